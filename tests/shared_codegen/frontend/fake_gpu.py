"""A stand-in GPU for the launch-path tests: compiling and the driver are replaced by
recorders, so the fast path, the full path and the binder calls they make can be checked
without a GPU."""

import types

from shared_codegen.runtime.specialize import register_handler


class DevicePointer:
    """Stands in for a device tensor (a pointer argument that is not host data)."""


register_handler(DevicePointer, lambda arg: ("*fp32", "D"))


def install(monkeypatch, kernels, make_binder):
    """Launches of `kernels` (JITFunctions, their launch caches emptied) go to the binder
    `make_binder(num_stages)` gives each compiled variant, and nothing is compiled. Returns
    the list that records the (kernel name, num_stages) of each variant compiled."""
    from shared_codegen.frontend import launch as launch_mod
    from shared_codegen.runtime import driver, launcher

    compiles = []

    def compile_variant(jit_fn, spec_key, num_warps, target, num_stages=3, instrument=(),
                        num_ctas=1):
        compiles.append((jit_fn.__name__, num_stages))
        variant = launch_mod._Variant()
        variant.kernel = types.SimpleNamespace(metadata={"target": "sm_90a"})
        variant.function, variant.check = None, None
        variant.binder = make_binder(num_stages)
        variant.runtime_positions = [i for i, (name, _) in enumerate(spec_key)
                                     if name != "constexpr"]
        variant.shared, variant.num_warps = 0, num_warps
        return variant

    monkeypatch.setattr(launch_mod, "_compile_variant", compile_variant)
    monkeypatch.setattr(driver, "has_gpu", lambda: True)
    monkeypatch.setattr(launcher, "current_stream", lambda: 0)
    for kernel in kernels:
        for name in ("_fast_launch", "_fast_variants", "_fast_guarded_variants", "_variants"):
            monkeypatch.setattr(kernel, name, None if name == "_fast_launch" else {})
    return compiles


def forbid_the_full_path(monkeypatch):
    """From now on a launch that leaves the fast path fails the test."""
    from shared_codegen.frontend import launch as launch_mod

    def full_path(*args, **kwargs):
        raise AssertionError("the launch took the full path")

    monkeypatch.setattr(launch_mod, "_run_gpu", full_path)
