"""Issue 16, item 6: a kernel that folds in a value from outside its arguments (a global read
through an attribute, a global read by a jitted helper, a closure, `float(sys.argv[1])`) is
never served from a cache after that value changed: the in-memory variants, the launch fast
path and the on-disk cache all check the values the trace recorded (frontend/guards.py)."""

import sys

import numpy as np
import pytest

import gluon
import tile
import tile.language as tl
from gluon import language as gl
from shared_codegen.frontend import compile as compile_mod
from shared_codegen.frontend.errors import CompilationError
from shared_codegen.runtime.specialize import register_handler


class Cfg:
    def __init__(self):
        self.scale = 2.0
        self.inner = None

    def get_scale(self):
        return self.scale


CFG = Cfg()
CFG.inner = Cfg()
HELPER_FACTOR = tl.constexpr(3.0)
TABLE = (1.0, 10.0)


@tile.jit
def _scaled_helper(x):
    return x * HELPER_FACTOR


@tile.jit
def _attr_kernel(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(X + offs)
    tl.store(Y + offs, x * CFG.scale + CFG.inner.scale)


@tile.jit
def _helper_kernel(X, Y, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(Y + offs, _scaled_helper(tl.load(X + offs)) + TABLE[1])


@tile.jit
def _argv_kernel(Y):
    tl.store(Y, float(sys.argv[1]))


@tile.jit
def _method_kernel(Y):
    tl.store(Y, CFG.get_scale())


@tile.jit
def _pass_object_kernel(Y):
    tl.store(Y, getattr(CFG, "scale"))


@gluon.jit
def _gluon_attr_kernel(X, Y, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, N, layout=layout)
    gl.store(Y + offs, gl.load(X + offs) * CFG.scale)


def _run(kernel, n=128):
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    kernel[(1,)](x, y, n)
    return x, y


SIG = {"X": "*fp32", "Y": "*fp32"}


@pytest.fixture
def fresh_disk_cache(monkeypatch, tmp_path):
    """An on-disk cache in a temporary folder, and a way to drop the in-memory state (a new
    process sees the same folder with nothing in memory)."""
    monkeypatch.setenv("SC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SC_CACHE_DISABLE", raising=False)
    monkeypatch.setattr(compile_mod, "_DISK_CACHE", None)

    def reset():
        compile_mod._DISK_CACHE = None

    return reset


def test_interpreter_sees_a_changed_attribute(monkeypatch):
    monkeypatch.setattr(CFG, "scale", 2.0)
    x, y = _run(_attr_kernel)
    np.testing.assert_allclose(y, x * 2.0 + 2.0)
    monkeypatch.setattr(CFG, "scale", 5.0)
    x, y = _run(_attr_kernel)
    np.testing.assert_allclose(y, x * 5.0 + 2.0)
    monkeypatch.setattr(CFG.inner, "scale", -1.0)
    x, y = _run(_attr_kernel)
    np.testing.assert_allclose(y, x * 5.0 - 1.0)
    # Back to an earlier value: the earlier trace is reused, not retraced.
    monkeypatch.setattr(CFG, "scale", 2.0)
    monkeypatch.setattr(CFG.inner, "scale", 2.0)
    x, y = _run(_attr_kernel)
    np.testing.assert_allclose(y, x * 2.0 + 2.0)


def test_interpreter_sees_a_global_read_by_a_helper(monkeypatch):
    monkeypatch.setattr(HELPER_FACTOR, "value", 3.0)
    x, y = _run(_helper_kernel)
    np.testing.assert_allclose(y, x * 3.0 + 10.0)
    monkeypatch.setattr(HELPER_FACTOR, "value", 7.0)
    x, y = _run(_helper_kernel)
    np.testing.assert_allclose(y, x * 7.0 + 10.0)
    monkeypatch.setattr(sys.modules[__name__], "TABLE", (1.0, 20.0))
    x, y = _run(_helper_kernel)
    np.testing.assert_allclose(y, x * 7.0 + 20.0)


def test_closure_value_changes():
    def make(box):
        @tile.jit
        def closure_kernel(Y):
            tl.store(Y, box[0])

        return closure_kernel

    box = [1.5]
    kernel = make(box)
    y = np.zeros(1, dtype=np.float32)
    kernel[(1,)](y)
    assert y[0] == 1.5
    box[0] = 9.0
    kernel[(1,)](y)
    assert y[0] == 9.0


def test_call_on_a_module_attribute_is_keyed_on_its_value(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["prog", "2.5"])
    y = np.zeros(1, dtype=np.float32)
    _argv_kernel[(1,)](y)
    assert y[0] == 2.5
    monkeypatch.setattr(sys, "argv", ["prog", "4"])
    _argv_kernel[(1,)](y)
    assert y[0] == 4.0


def test_method_of_a_global_object_is_refused():
    y = np.zeros(1, dtype=np.float32)
    with pytest.raises(CompilationError) as info:
        _method_kernel[(1,)](y)
    assert "cannot call `CFG.get_scale` in a kernel: it is a method of a global object" in \
        str(info.value)
    assert "tl.store(Y, CFG.get_scale())" in str(info.value)


def test_passing_a_global_object_to_a_compile_time_call_is_refused():
    y = np.zeros(1, dtype=np.float32)
    with pytest.raises(CompilationError, match="cannot pass the global object `CFG` to "
                                               "`getattr` at compile time"):
        _pass_object_kernel[(1,)](y)


def test_plain_global_numbers_are_still_refused_as_in_triton():
    global PLAIN_SCALE
    PLAIN_SCALE = 2.0

    @tile.jit
    def plain_kernel(Y):
        tl.store(Y, PLAIN_SCALE)

    with pytest.raises(CompilationError, match="cannot read the global variable `PLAIN_SCALE`"):
        plain_kernel[(1,)](np.zeros(1, dtype=np.float32))


@pytest.mark.parametrize("language", ["tile", "gluon"])
def test_compile_and_disk_cache_see_a_changed_attribute(monkeypatch, fresh_disk_cache,
                                                        language):
    kernel, compile_fn = ((_attr_kernel, tile.compile) if language == "tile" else
                          (_gluon_attr_kernel, gluon.compile))
    monkeypatch.setattr(CFG, "scale", 2.0)
    first = compile_fn(kernel, SIG, {"N": 128})
    assert [g[4] for g in first.metadata["globals"]][:1] == ["CFG.scale"]
    monkeypatch.setattr(CFG, "scale", 5.0)
    second = compile_fn(kernel, SIG, {"N": 128})
    assert second.asm["ptx"] != first.asm["ptx"]
    assert "0f40A00000" in second.asm["ptx"] and "0f40A00000" not in first.asm["ptx"]  # 5.0
    # A fresh in-memory state over the same folder: each value gets its own kernel back.
    for value, expected in ((2.0, first), (5.0, second), (2.0, first)):
        fresh_disk_cache()
        monkeypatch.setattr(CFG, "scale", value)
        again = compile_fn(kernel, SIG, {"N": 128})
        assert again.asm["ptx"] == expected.asm["ptx"]
    # A value never compiled before is compiled, not served from the folder.
    fresh_disk_cache()
    monkeypatch.setattr(CFG, "scale", 0.25)
    third = compile_fn(kernel, SIG, {"N": 128})
    assert third.asm["ptx"] not in (first.asm["ptx"], second.asm["ptx"])


def test_disk_cache_sees_a_helper_global_across_fresh_state(monkeypatch, fresh_disk_cache):
    monkeypatch.setattr(HELPER_FACTOR, "value", 3.0)
    first = tile.compile(_helper_kernel, SIG, {"N": 128})
    fresh_disk_cache()
    monkeypatch.setattr(HELPER_FACTOR, "value", 7.0)
    second = tile.compile(_helper_kernel, SIG, {"N": 128})
    assert second.asm["ptx"] != first.asm["ptx"]
    assert {g[4]: g[3] for g in second.metadata["globals"]}["HELPER_FACTOR"] == \
        "constexpr(float:7.0)"


def test_kernels_without_globals_record_none():
    @tile.jit
    def plain(X, Y, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(Y + offs, tl.load(X + offs) * 2.0)

    kernel = tile.compile(plain, SIG, {"N": 128})
    assert kernel.metadata["globals"] == [] and kernel.guards == ()


# ---- the GPU launch fast path, with the driver replaced by a recorder --------------------

@tile.jit
def _scalar_attr_kernel(Y, s):
    tl.store(Y, s * CFG.scale)


@tile.jit
def _scalar_plain_kernel(Y, s):
    tl.store(Y, s * 2.0)


class _FakeBinder:
    def __init__(self, launches, kernel):
        self.launches, self.kernel = launches, kernel

    def launch(self, function, grid, num_warps, shared, stream, args):
        self.launches.append(self.kernel)


@pytest.fixture
def fake_gpu(monkeypatch):
    """`kernel[grid](...)` takes the GPU path (fast launcher included) but compiles for
    sm_90a without a device and records which compiled kernel each launch would run."""
    from shared_codegen.frontend import launch as launch_mod
    from shared_codegen.frontend.compile import compile_spec
    from shared_codegen.frontend.guards import make_check
    from shared_codegen.frontend.jit import Specialization
    from shared_codegen.runtime import driver, launcher

    launches = []

    def compile_variant(jit_fn, spec_key, num_warps, target, num_stages=3):
        kernel = compile_spec(jit_fn, Specialization.from_key(spec_key, num_warps, "sm_90a",
                                                              num_stages))
        variant = launch_mod._Variant()
        variant.kernel, variant.function = kernel, None
        variant.binder = _FakeBinder(launches, kernel)
        variant.runtime_positions = [i for i, (name, _) in enumerate(spec_key)
                                     if name != "constexpr"]
        variant.shared, variant.num_warps = kernel.shared, kernel.num_warps
        variant.check = make_check(kernel.guards)
        return variant

    monkeypatch.setattr(launch_mod, "_compile_variant", compile_variant)
    monkeypatch.setattr(driver, "has_gpu", lambda: True)
    monkeypatch.setattr(launcher, "current_stream", lambda: 0)
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    monkeypatch.setattr(compile_mod, "_DISK_CACHE", None)
    for kernel in (_scalar_attr_kernel, _scalar_plain_kernel):
        monkeypatch.setattr(kernel, "_fast_launch", None)
    return launches


class _DevicePointer:
    """Stands in for a device tensor (a pointer argument that is not host data)."""


register_handler(_DevicePointer, lambda arg: ("*fp32", "D"))


def test_fast_path_checks_folded_globals(fake_gpu, monkeypatch):
    y = _DevicePointer()
    early = _scalar_attr_kernel[(1,)]  # built before anything was compiled
    seen = {}
    for value in (2.0, 3.0, 3.0, 2.0, 0.5):
        monkeypatch.setattr(CFG, "scale", value)
        for launch in (_scalar_attr_kernel[(1,)], early):
            launch(y, 1.0)
            kernel = fake_gpu[-1]
            assert kernel.metadata["globals"][0][3] == f"float:{value!r}"
            seen.setdefault(value, kernel)
            assert seen[value] is kernel  # earlier values reuse their variant
    assert _scalar_attr_kernel._fast_guarded
    assert len(fake_gpu) == 10


def test_kernel_without_globals_keeps_the_unchecked_launcher(fake_gpu):
    y = _DevicePointer()
    for _ in range(3):
        _scalar_plain_kernel[(1,)](y, 1.0)
    assert len(fake_gpu) == 3 and not _scalar_plain_kernel._fast_guarded
    assert len(_scalar_plain_kernel._fast_variants) == 1


class _ClassCfg:
    scale = 2.0


@tile.jit
def _class_attr_kernel(Y):
    tl.store(Y, _ClassCfg.scale)


def test_class_attribute_changes(monkeypatch):
    y = np.zeros(1, dtype=np.float32)
    _class_attr_kernel[(1,)](y)
    assert y[0] == 2.0
    monkeypatch.setattr(_ClassCfg, "scale", 6.0)
    _class_attr_kernel[(1,)](y)
    assert y[0] == 6.0


WEIGHTS = np.array([1.0, 2.0, 3.0], dtype=np.float32)


@tile.jit
def _array_kernel(Y):
    tl.store(Y, WEIGHTS[1])


def test_global_array_changed_in_place():
    y = np.zeros(1, dtype=np.float32)
    _array_kernel[(1,)](y)
    assert y[0] == 2.0
    WEIGHTS[1] = 8.0
    try:
        _array_kernel[(1,)](y)
        assert y[0] == 8.0
    finally:
        WEIGHTS[1] = 2.0


def test_generated_check_matches_the_guards(monkeypatch):
    from shared_codegen.frontend.guards import make_check

    monkeypatch.setattr(CFG, "scale", 2.0)
    kernel = tile.compile(_attr_kernel, SIG, {"N": 128})
    check = make_check(kernel.guards)
    assert check()
    monkeypatch.setattr(CFG, "scale", 2)  # equal, but another type: another kernel
    assert not check()
    monkeypatch.setattr(CFG, "scale", 2.0)
    assert check()
    monkeypatch.delattr(CFG.inner, "scale")
    assert not check()
