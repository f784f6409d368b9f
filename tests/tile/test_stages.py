"""tile/stages.py: the stages list, the interpreter running the IR after the tile passes,
num_stages reaching the pipeliner, and launch options that nothing applies yet (maxnreg)
reported instead of dropped."""

import warnings

import numpy as np
import pytest

import shared_codegen.interpreter.run as interpreter_run
import tile
import tile.language as tl
from shared_codegen.frontend.errors import ArgumentError
from shared_codegen.ir.printer import print_module
from shared_codegen.ir.types import TensorType
from shared_codegen.stages import BACKEND_STAGES
from tile.passes import TILE_PIPELINE
from tile.stages import TILE_STAGES


@tile.jit
def transpose_kernel(x_ptr, out_ptr, N: tl.constexpr):
    rows = tl.arange(0, N)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    tl.store(out_ptr + rows * N + cols, tl.trans(x))


@tile.jit
def copy_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


SHARED_TAIL = ["explicit_layout_ir", "axis_analysis", "warp_specialization_planning",
               "shared_memory_allocation", "tensor_memory_allocation",
               "barrier_insertion", "lower_to_llvm", "llvm_to_ptx",
               "ptx_to_cubin"]


def test_the_stages_are_the_tile_passes_then_the_shared_backend_stages():
    names = [name for name, _ in TILE_STAGES]
    assert names == ["combine_dot_add", "loop_unroll", "warp_specialize_warps",
                     "layout_assignment",
                     "remove_redundant_conversions", "cse", "persistent_programs",
                     "loop_flatten",
                     "warp_specialization", "software_pipelining",
                     "hoist_invariant_conversions"] + SHARED_TAIL
    assert TILE_STAGES[len(TILE_PIPELINE):] == BACKEND_STAGES


def test_the_gluon_stages_finish_the_layouts_then_share_the_backend_stages():
    from gluon.stages import GLUON_STAGES

    assert [name for name, _ in GLUON_STAGES] == ["resolve_auto_layouts",
                                                   "verify_layouts"] + SHARED_TAIL


@pytest.fixture
def interpreted_modules(monkeypatch):
    modules = []
    run_kernel = interpreter_run.run_kernel

    def recording(module, *args):
        modules.append(module)
        return run_kernel(module, *args)

    monkeypatch.setattr(interpreter_run, "run_kernel", recording)
    return modules


def test_the_interpreter_runs_the_ir_after_the_tile_passes(interpreted_modules):
    x = np.arange(256, dtype=np.float32).reshape(16, 16)
    out = np.zeros_like(x)
    transpose_kernel[(1,)](x, out, N=16)
    np.testing.assert_array_equal(out, x.T)
    (module,) = interpreted_modules
    tensors = [r for op in module.walk() for r in op.results if isinstance(r.type, TensorType)]
    assert tensors and all(t.type.layout is not None for t in tensors)
    # The transpose's layout differs from the store's: the pass inserted a conversion, and
    # the interpreter executed it.
    assert "ttg.convert_layout" in print_module(module)


def _launch(**options):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    copy_kernel[(1,)](x, out, N=64, **options)
    np.testing.assert_array_equal(out, x)


def test_num_stages_must_be_a_non_negative_int():
    with pytest.raises(ArgumentError, match=r"copy_kernel: num_stages must be an int >= 0, got "
                                            r"-1"):
        _launch(num_stages=-1)


@pytest.mark.parametrize("num_stages", [None, 0, 1, 3, 4])
def test_no_pipelining_asked_or_the_default_launches_quietly(num_stages):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _launch(num_stages=num_stages)


def test_maxnreg_is_reported_as_not_applied():
    with pytest.warns(UserWarning, match=r"maxnreg=128 is ignored"):
        _launch(maxnreg=128)


def test_an_autotune_config_passes_its_options_on_to_the_launch():
    x = np.arange(64, dtype=np.float32)
    out = np.zeros_like(x)
    staged = tile.autotune([tile.Config({}, num_stages=-1)], key=[])(copy_kernel)
    with pytest.raises(Exception, match=r"num_stages must be an int >= 0, got -1"):
        staged[(1,)](x, out, N=64)
    clustered = tile.autotune([tile.Config({}, num_ctas=2)], key=[])(copy_kernel)
    with pytest.raises(ArgumentError, match=r"num_ctas=2 is supported for Gluon kernels"):
        clustered[(1,)](x, out, N=64)


def test_a_range_asking_for_stages_or_flattening():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tl.range(0, 8, num_stages=2).num_stages == 2  # the pipeliner reads it
        # tile/passes/loop_flatten.py warns at the loop's line about a nest it cannot
        # flatten (tests/tile/passes/test_loop_flatten.py).
        assert tl.range(0, 8, flatten=True).flatten


def test_a_range_asking_for_warp_specialization_leaves_the_decision_to_the_pass():
    # tile/passes/warp_specialize.py warns at the loop's line where it cannot split it
    # (tests/tile/passes/test_warp_specialize.py).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tl.range(0, 8, warp_specialize=True).warp_specialize
