"""tile.autotune / tile.heuristics with Triton's semantics (interpreter: first config wins)."""

import numpy as np
import pytest

import tile
import tile.language as tl


@tile.autotune(configs=[tile.Config({"BLOCK": 32}, num_warps=1),
                        tile.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@tile.jit
def tuned_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def test_autotune_uses_the_config_meta_parameters_in_the_grid():
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    tuned_copy[lambda meta: (tile.cdiv(100, meta["BLOCK"]),)](x, y, 100)
    np.testing.assert_array_equal(x, y)
    assert tuned_copy.best_config.kwargs == {"BLOCK": 32}


def test_autotune_rejects_meta_parameters_given_twice():
    x = np.zeros(8, np.float32)
    with pytest.raises(ValueError, match=r"conflicting meta-parameters \['BLOCK'\]"):
        tuned_copy[(1,)](x, x, 8, BLOCK=16)


def test_autotune_key_names_that_are_not_parameters_are_left_out_with_a_warning():
    # Triton ignores them (tutorial 08 keys on a misspelt 'gropup_c_ptrs'); we say so.
    with pytest.warns(UserWarning, match=r"autotune key names \['m'\] are not parameters of "
                                         r"tuned_copy \(src, dst, n, BLOCK\); they are left "
                                         r"out of the key"):
        tuned = tile.autotune(configs=[tile.Config({"BLOCK": 32})], key=["m", "n"])(
            tuned_copy.fn)
    x = np.arange(40, dtype=np.float32)
    y = np.zeros_like(x)
    tuned[(2,)](x, y, 40)
    np.testing.assert_array_equal(x, y)
    assert tuned._key({"src": x, "dst": y, "n": 40}) == (40, "float32", "float32")


@tile.jit
def scaled_copy(src, dst, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * SCALE, mask=offs < n)


def test_autotune_key_also_holds_the_constexprs_the_call_passes():
    # A constexpr the key does not name makes a different kernel (tutorial 06's causal
    # STAGE), so each value is tuned on its own; the configs' own BLOCK is not in the key.
    tuned = tile.autotune(configs=[tile.Config({"BLOCK": 32}), tile.Config({"BLOCK": 64})],
                          key=["n"])(scaled_copy)
    x = np.arange(40, dtype=np.float32)
    y = np.zeros_like(x)
    assert tuned._key({"src": x, "dst": y, "n": 40, "SCALE": 2}) == \
        (40, "float32", "float32", ("SCALE", 2))
    for scale in (2, 3):
        tuned[(2,)](x, y, 40, SCALE=scale)
        np.testing.assert_array_equal(y, x * scale)
    assert len(tuned.cache) == 2
    # An unhashable constexpr (a list) keys by its repr instead of failing the lookup.
    assert tuned._key({"src": x, "dst": y, "n": 40, "SCALE": [2]}) == \
        (40, "float32", "float32", ("SCALE", "[2]"))


def test_autotune_reset_to_zero_must_name_parameters():
    with pytest.raises(ValueError, match=r"autotune reset_to_zero names \['out'\] are not "
                                         r"parameters of tuned_copy"):
        tile.autotune(configs=[tile.Config({})], key=["n"], reset_to_zero=["out"])(
            tuned_copy.fn)


def test_prune_configs_by_early_prune():
    seen = []

    def prune(configs, named, **kwargs):
        seen.append(named["n"])
        return [c for c in configs if c.kwargs["BLOCK"] == 64]

    @tile.autotune(configs=[tile.Config({"BLOCK": 32}), tile.Config({"BLOCK": 64})], key=["n"],
                   prune_configs_by={"early_config_prune": prune})
    @tile.jit
    def copy(src, dst, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

    x = np.arange(70, dtype=np.int32)
    y = np.zeros_like(x)
    copy[lambda meta: (tile.cdiv(70, meta["BLOCK"]),)](x, y, 70)
    np.testing.assert_array_equal(x, y)
    assert copy.best_config.kwargs == {"BLOCK": 64} and seen == [70]


@tile.heuristics({"BLOCK": lambda args: 1 << (args["n"] - 1).bit_length(),
                  "EVEN": lambda args: args["n"] % 2 == 0})
@tile.jit
def heuristic_fill(dst, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.full([BLOCK], 2 if EVEN else 1, tl.int32), mask=offs < n)


@pytest.mark.parametrize("n,value", [(5, 1), (6, 2), (16, 2)])
def test_heuristics_compute_meta_parameters_from_arguments(n, value):
    y = np.zeros(n, np.int32)
    heuristic_fill[(1,)](y, n)
    assert y.tolist() == [value] * n
