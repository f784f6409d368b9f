"""Triton 3.6 Gluon spellings that upstream kernels use (issue 12): each runs in the
interpreter and compiles for sm_90a. Expected values were checked against Triton 3.6."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.layouts import to_linear_layout

# (block_shape, dtype, transposed) -> swizzle_byte_width, as Triton 3.6 picks it.
DEFAULT_SWIZZLES = [
    ([128, 64], gl.float16, False, 128), ([64, 32], gl.float16, False, 64),
    ([64, 32], gl.float16, True, 128), ([64, 16], gl.float16, False, 32),
    ([64, 16], gl.float8e4nv, False, 0), ([4, 64], gl.float16, False, 0),
    ([8, 8], gl.float32, False, 32), ([2, 4, 64], gl.float16, False, 128),
    ([2, 4, 64], gl.float16, True, 0), ([16, 24], gl.float32, True, 64),
    ([128], gl.float32, False, 0),
]


@pytest.mark.parametrize("shape, dtype, transposed, swizzle", DEFAULT_SWIZZLES)
def test_get_default_for_picks_the_widest_swizzle_that_fits(shape, dtype, transposed, swizzle):
    layout = gl.NVMMASharedLayout.get_default_for(shape, dtype, transposed=transposed)
    assert layout == gl.NVMMASharedLayout(swizzle, dtype.primitive_bitwidth, len(shape),
                                          transposed)


def test_get_default_for_rejects_what_is_not_a_dtype():
    with pytest.raises(TypeError, match="dtype must be a gl dtype"):
        gl.NVMMASharedLayout.get_default_for([64, 64], "fp16")


@gluon.jit
def default_layout_round_trip_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr):
    # The layout is computed inside the kernel from compile-time values.
    smem_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([M, N], gl.float16)
    blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, blocked))
    offs = rows[:, None] * N + cols[None, :]
    smem = gl.allocate_shared_memory(gl.float16, [M, N], smem_layout, gl.load(x_ptr + offs))
    gl.store(out_ptr + offs, smem.load(blocked))


def test_get_default_for_inside_a_kernel_runs_and_compiles():
    x = np.arange(64 * 64, dtype=np.float16).reshape(64, 64)
    out = np.zeros_like(x)
    default_layout_round_trip_kernel[(1,)](x, out, 64, 64)
    np.testing.assert_array_equal(out, x)
    ptx = gluon.compile(default_layout_round_trip_kernel, {"x_ptr": "*fp16:16",
                                                           "out_ptr": "*fp16:16"},
                        {"M": 64, "N": 64}, target="sm_90a").asm["ptx"]
    assert "st.shared" in ptx and "ld.shared" in ptx


# ---- num_warps as a kernel parameter -------------------------------------------------------


@gluon.jit
def warps_iota_kernel(out_ptr, num_warps: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    offs = gl.arange(0, 32 * num_warps, layout=layout)
    gl.store(out_ptr + offs, offs + gl.num_warps() * 1000)


@pytest.mark.parametrize("num_warps", [1, 4, 8])
def test_a_num_warps_parameter_is_filled_from_the_launch_option(num_warps):
    out = np.zeros(32 * num_warps, np.int32)
    warps_iota_kernel[(1,)](out, num_warps=num_warps)
    np.testing.assert_array_equal(out, np.arange(32 * num_warps) + 1000 * num_warps)


def test_a_num_warps_parameter_defaults_to_four_warps_and_compiles():
    out = np.zeros(128, np.int32)
    warps_iota_kernel[(1,)](out)
    np.testing.assert_array_equal(out, np.arange(128) + 4000)
    compiled = gluon.compile(warps_iota_kernel, {"out_ptr": "*i32:16"}, {}, num_warps=8)
    # gl.num_warps() folded to the launch option's 8.
    assert compiled.num_warps == 8 and "8000" in compiled.asm["ptx"]


def test_launch_keywords_of_upstream_tests_are_accepted():
    out = np.zeros(64, np.int32)
    warps_iota_kernel[(1,)](out, num_warps=2, sanitize_overflow=False, debug=False, num_ctas=1)
    np.testing.assert_array_equal(out, np.arange(64) + 2000)


# ---- Python min / max on runtime scalars ---------------------------------------------------


@gluon.jit
def min_max_kernel(out_ptr, a, b, c):
    gl.store(out_ptr, min(a, b))
    gl.store(out_ptr + 1, max(a, b, c))
    gl.store(out_ptr + 2, min(a + 1, 7))


@pytest.mark.parametrize("a, b, c", [(5, 3, 9), (-2, 4, -8), (10, 10, 1)])
def test_python_min_and_max_take_runtime_scalars(a, b, c):
    out = np.zeros(3, np.int32)
    min_max_kernel[(1,)](out, a, b, c)
    assert list(out) == [min(a, b), max(a, b, c), min(a + 1, 7)]
    ptx = gluon.compile(min_max_kernel, {"out_ptr": "*i32", "a": "i32", "b": "i32",
                                         "c": "i32"}).asm["ptx"]
    assert "min.s32" in ptx and "max.s32" in ptx


# ---- gl.to_linear_layout -------------------------------------------------------------------

BLOCKED = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])


def test_to_linear_layout_of_a_register_layout_is_a_distributed_linear_layout():
    @gluon.jit
    def kernel(out_ptr, layout: gl.constexpr):
        ll: gl.constexpr = gl.to_linear_layout(layout, [32, 32])
        gl.static_assert(isinstance(ll, gl.DistributedLinearLayout))
        rows = gl.arange(0, 32, layout=gl.SliceLayout(1, ll))  # a slice of a linear layout
        cols = gl.arange(0, 32, layout=gl.SliceLayout(0, ll))
        offs = rows[:, None] * 32 + cols[None, :]
        offs = gl.convert_layout(offs, layout, assert_trivial=True)
        gl.store(out_ptr + offs, offs)

    out = np.zeros(32 * 32, np.int32)
    kernel[(1,)](out, BLOCKED)
    np.testing.assert_array_equal(out, np.arange(32 * 32))
    ptx = gluon.compile(kernel, {"out_ptr": "*i32:16"}, {"layout": BLOCKED}).asm["ptx"]
    assert "st.global.v4.b32" in ptx  # the register layout is BLOCKED's: 4 per thread


def test_to_linear_layout_keeps_the_bases_and_types_shared_layouts_as_shared():
    from gluon.language._layouts import linear_layout_of

    linear = linear_layout_of(BLOCKED, [32, 32])
    assert to_linear_layout(linear, [32, 32]) == to_linear_layout(BLOCKED, [32, 32])
    for dim in (0, 1):
        assert to_linear_layout(gl.SliceLayout(dim, linear), [32]) == \
            to_linear_layout(gl.SliceLayout(dim, BLOCKED), [32])
    nvmma = gl.NVMMASharedLayout(128, 16)
    shared = linear_layout_of(nvmma, [64, 64])
    assert isinstance(shared, gl.SharedLinearLayout) and shared.alignment == 1024
    assert to_linear_layout(shared, [64, 64]) == to_linear_layout(nvmma, [64, 64])


# ---- host-side names -----------------------------------------------------------------------


def test_constexpr_values_compute_on_the_host_as_in_triton():
    block = gl.constexpr(64)
    assert isinstance(block * 2, gl.constexpr) and block * 2 == 128
    assert 256 // block == 4 and -block == -64 and block > 32 and int(block) + 1 == 65
    assert list(gl.constexpr((1, 2))) == [1, 2] and gl.constexpr([3, 4])[1] == 4


def test_must_use_result_marks_functions_with_and_without_a_message():
    @gluon.must_use_result
    @gluon.jit
    def a(x):
        return x

    @gluon.must_use_result("the token must be waited on")
    @gluon.jit
    def b(x):
        return x

    assert a._must_use_result is True and b._must_use_result == "the token must be waited on"


@gluon.must_use_result("the doubled value is the point")
@gluon.jit
def doubled(x):
    return x * 2


@gluon.jit
@gluon.must_use_result
def tripled(x):  # the mark under @jit counts too
    return x * 3


@gluon.jit
def must_use_kernel(out_ptr, DROP: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, 128, layout=layout)
    if DROP == 1:
        doubled(offs)
    if DROP == 2:
        tripled(offs)
    gl.store(out_ptr + offs, doubled(offs) + tripled(offs))


def test_a_used_must_use_result_runs():
    out = np.zeros(128, np.int32)
    must_use_kernel[(1,)](out, DROP=0)
    np.testing.assert_array_equal(out, np.arange(128) * 5)


@pytest.mark.parametrize("drop, name, why", [
    (1, "doubled", ": the doubled value is the point"), (2, "tripled", "")])
def test_dropping_a_must_use_result_is_a_compile_error(drop, name, why):
    from shared_codegen.frontend.errors import CompilationError
    with pytest.raises(CompilationError) as info:
        must_use_kernel[(1,)](np.zeros(128, np.int32), DROP=drop)
    text = str(info.value)
    assert (f"the result of {name}(...) is not used, but {name} is marked "
            f"must_use_result{why}") in text
    assert f"\n    {name}(offs)\n" in text and "test_gluon_parity.py:" in text


# ---- return inside a runtime if ------------------------------------------------------------


@gluon.jit
def early_return_kernel(out_ptr, n, FLAG: gl.constexpr):
    pid = gl.program_id(0)
    if pid >= n:
        return
    if FLAG:
        gl.store(out_ptr + pid, 7)
        return
    else:
        if pid % 2 == 0:
            gl.store(out_ptr + pid, 2)
            return
    gl.store(out_ptr + pid, 1)


@pytest.mark.parametrize("flag", [False, True])
def test_return_inside_a_runtime_if_skips_the_rest(flag):
    out = np.zeros(8, np.int32)
    early_return_kernel[(8,)](out, 5, flag)
    want = [7] * 5 if flag else [2, 1, 2, 1, 2]
    np.testing.assert_array_equal(out, want + [0, 0, 0])
    ptx = gluon.compile(early_return_kernel, {"out_ptr": "*i32", "n": "i32"},
                        {"FLAG": flag}).asm["ptx"]
    assert ptx.count("st.global") == (1 if flag else 2)


def test_return_inside_a_runtime_loop_is_still_refused():
    @gluon.jit
    def kernel(out_ptr, n):
        for i in range(n):
            if i == 3:
                return
            gl.store(out_ptr + i, i)

    from shared_codegen.frontend.errors import CompilationError

    with pytest.raises(CompilationError, match="`return` inside a runtime `if`/loop"):
        kernel[(1,)](np.zeros(8, np.int32), 8)


@gluon.jit
def arith_functions_kernel(x_ptr, out_ptr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, 128, layout=layout)
    gl.assume(offs >= 0)
    x = gl.load(gl.add(x_ptr, offs))
    gl.store(out_ptr + offs, gl.sub(gl.mul(x, 3, sanitize_overflow=False), 1))


def test_add_sub_mul_and_assume_are_functions_too():
    x = np.arange(128, dtype=np.int32)
    out = np.zeros_like(x)
    arith_functions_kernel[(1,)](x, out)
    np.testing.assert_array_equal(out, 3 * x - 1)
    gluon.compile(arith_functions_kernel, {"x_ptr": "*i32:16", "out_ptr": "*i32:16"})


def test_the_ampere_mbarrier_module_is_the_hopper_one():
    from gluon.language.nvidia.ampere import mbarrier as ampere_mbarrier
    from gluon.language.nvidia.hopper import mbarrier as hopper_mbarrier

    for name in ampere_mbarrier.__all__:
        assert getattr(ampere_mbarrier, name) is getattr(hopper_mbarrier, name)


def test_a_mismatch_of_layouts_that_print_alike_says_what_differs():
    from gluon.language._semantic import layout_mismatch_message

    class BlockedLayout(gl.BlockedLayout):  # e.g. a layout class from another package
        pass

    ours = gl.BlockedLayout([1], [32], [4], [0])
    other = BlockedLayout([1], [32], [4], [0])
    assert repr(ours) == repr(other) and ours != other
    text = layout_mismatch_message("`lhs` and `rhs` of gl.add", [("lhs", ours), ("rhs", other)],
                                   [128])
    assert "(they place every element identically, so the conversion is free)" in text
    assert "(they print alike but differ in class shared_codegen.layouts.distributed." \
           "BlockedLayout vs " in text
    assert "test_gluon_parity" in text.splitlines()[-2]


def test_warmup_compiles_without_running_and_returns_the_compiled_kernel():
    out = np.zeros(128, np.int32)
    compiled = warps_iota_kernel.warmup(out, num_warps=4, grid=(1,))
    assert not out.any()  # nothing ran
    assert "ptx" in compiled.asm and ".target sm_90a" in compiled.asm["ptx"]
