"""shared_codegen.config: every variable declared once, parsed at call time."""

import os

import pytest

from shared_codegen import config


def test_unset_variables_read_their_defaults(monkeypatch):
    for name in config.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert config.get("SC_INTERPRET") is False
    assert config.get("SC_DUMP_IR_DIR") is None
    assert config.get("SC_CACHE_DIR") == os.path.expanduser("~/.cache/shared_codegen")
    assert config.get("SC_PTXAS_OPTS") == ""
    assert config.get("SC_TARGET") is None


@pytest.mark.parametrize("text, value", [("1", True), ("true", True), ("ON", True),
                                         ("0", False), ("no", False), ("", False)])
def test_booleans_accept_the_usual_words(monkeypatch, text, value):
    monkeypatch.setenv("SC_DEBUG", text)
    assert config.get("SC_DEBUG") is value


def test_a_value_set_after_import_is_seen(monkeypatch):
    monkeypatch.setenv("SC_INTERPRET", "1")
    assert config.SC_INTERPRET is True
    assert config.interpret is True
    monkeypatch.setenv("SC_INTERPRET", "0")
    assert config.SC_INTERPRET is False


def test_paths_are_expanded(monkeypatch, tmp_path):
    monkeypatch.setenv("SC_CACHE_DIR", str(tmp_path / "x" / ".." / "cache"))
    assert config.cache_dir == str(tmp_path / "cache")


def test_bad_values_name_the_variable(monkeypatch):
    monkeypatch.setenv("SC_CACHE_DISABLE", "maybe")
    with pytest.raises(config.ConfigError, match="SC_CACHE_DISABLE"):
        config.get("SC_CACHE_DISABLE")
    monkeypatch.setenv("SC_TARGET", "hopper")
    with pytest.raises(config.ConfigError, match="sm_90a"):
        config.get("SC_TARGET")


def test_target_is_normalized(monkeypatch):
    monkeypatch.setenv("SC_TARGET", "SM_90A")
    assert config.get("SC_TARGET") == "sm_90a"


def test_unknown_names_fail_loudly():
    with pytest.raises(KeyError, match="SC_INTERPRETT"):
        config.get("SC_INTERPRETT")
    with pytest.raises(AttributeError):
        config.no_such_knob


def test_describe_lists_every_variable_with_its_meaning():
    text = config.describe()
    for var in config.VARIABLES.values():
        assert var.name in text and var.meaning in text
