"""Patterns from Triton's tutorials and test_core that used to fail in the tile DSL, each run
in the interpreter against numpy (and compiled for sm_90a where the pattern lowers)."""

import numpy as np
import pytest

import tile
import tile.language as tl


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("SC_INTERPRET", "1")


@tile.jit
def grouped_order_kernel(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         GROUP_SIZE_M: tl.constexpr):
    # Tutorial 03's grouped ordering, verbatim but for the store.
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, max(pid_n, 0))


def _grouped_reference(M, N, bm, bn, group):
    out = []
    num_m, num_n = -(-M // bm), -(-N // bn)
    for pid in range(num_m * num_n):
        in_group = group * num_n
        first = (pid // in_group) * group
        size = min(num_m - first, group)
        out += [first + (pid % in_group) % size, (pid % in_group) // size]
    return out


def test_min_max_builtins_on_runtime_values_grouped_ordering(interpret):
    M, N = 300, 200
    grid = (-(-M // 64) * -(-N // 32),)
    out = np.zeros(2 * grid[0], np.int32)
    grouped_order_kernel[grid](out, M, N, BLOCK_M=64, BLOCK_N=32, GROUP_SIZE_M=4)
    np.testing.assert_array_equal(out, _grouped_reference(M, N, 64, 32, 4))


def test_grouped_ordering_with_assume_compiles_for_the_gpu():
    compiled = tile.compile(grouped_order_kernel, signature={"out_ptr": "*i32", "M": "i32",
                                                             "N": "i32"},
                            constexprs={"BLOCK_M": 64, "BLOCK_N": 32, "GROUP_SIZE_M": 8},
                            target="sm_90a")
    assert "st.global" in compiled.asm["ptx"] and compiled.asm["cubin"]


@tile.jit
def assume_kernel(x_ptr, n):
    tl.assume(n % 4 == 0)
    tl.store(x_ptr, n)


def test_a_false_assumption_is_reported_by_the_interpreter(interpret):
    x = np.zeros(1, np.int32)
    assume_kernel[(1,)](x, 8)
    assert x[0] == 8
    with pytest.raises(tile.InterpreterError, match="tl.assume: the assumed condition is false"):
        assume_kernel[(1,)](x, 6)


@tile.jit
def early_exit_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK >= n:
        return
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if tl.sum(x) < 0:
        tl.store(out_ptr + offs, -x, mask=offs < n)
        return
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


def test_early_exit_and_return_inside_a_runtime_if(interpret):
    x = np.array([1, 2, -9, 1, 3, 3, 0, 0], np.float32)
    out = np.full(8, 7, np.float32)
    early_exit_kernel[(4,)](x, out, 6, BLOCK=2)  # programs 3 exits at once
    np.testing.assert_array_equal(out, [2, 4, 9, -1, 6, 6, 7, 7])
    ptx = tile.compile(early_exit_kernel, signature={"x_ptr": "*fp32", "out_ptr": "*fp32",
                                                     "n": "i32"},
                       constexprs={"BLOCK": 128}, target="sm_90a").asm["ptx"]
    assert ptx.count("st.global") >= 2


@tile.jit
def pointer_cast_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    bits = tl.load(x_ptr.to(tl.pi32_t) + offs)  # test_core's pointer reinterpretation
    first = tl.load(out_ptr + tl.arange(0, 1)).item()  # a one-element tensor as a scalar
    tl.store(out_ptr + offs, bits + first)


def test_pi32_t_and_item(interpret):
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    out = np.full(4, 10, np.int32)
    pointer_cast_kernel[(1,)](x, out, N=4)
    np.testing.assert_array_equal(out, x.view(np.int32) + 10)
    assert tl.pi32_t == tl.pointer_type(tl.int32)


@tile.jit
def builtin_named_params_kernel(out_ptr, type, len, id: tl.constexpr):
    tl.store(out_ptr, type * 100 + len * 10 + id)


def test_parameters_named_like_python_builtins(interpret):
    out = np.zeros(1, np.int32)
    builtin_named_params_kernel[(1,)](out, 3, 2, 1)
    builtin_named_params_kernel[(1,)](out, type=4, len=5, id=6)  # the fast path, by keyword
    assert out[0] == 456


@tile.jit
def strided_copy_kernel(x_ptr, out_ptr, stride_m, stride_n, M: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, M)[:, None]
    j = tl.arange(0, N)[None, :]
    tl.store(out_ptr + i * N + j, tl.load(x_ptr + i * stride_m + j * stride_n) + 1)


@pytest.mark.parametrize("layout", ["fortran", "transposed", "sliced"])
def test_interpreter_takes_column_major_and_strided_arrays(interpret, layout):
    base = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    x = {"fortran": np.asfortranarray(base), "transposed": base.T.copy().T,
         "sliced": np.asfortranarray(base)[1::2, ::2]}[layout]
    out = np.zeros(x.shape, np.float32)
    strided_copy_kernel[(1,)](x, out, x.strides[0] // 4, x.strides[1] // 4, M=x.shape[0],
                              N=x.shape[1])
    np.testing.assert_array_equal(out, x + 1)


@tile.jit
def strided_store_kernel(out_ptr, stride_m, stride_n, M: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, M)[:, None]
    j = tl.arange(0, N)[None, :]
    tl.store(out_ptr + i * stride_m + j * stride_n, i * 10 + j)


def test_stores_into_a_column_major_array_land_in_it(interpret):
    out = np.zeros((4, 8), np.int32, order="F")
    strided_store_kernel[(1,)](out, 1, 4, M=4, N=8)  # column-major strides, in elements
    np.testing.assert_array_equal(out, np.arange(4)[:, None] * 10 + np.arange(8)[None, :])


@tile.jit
def optional_bias_kernel(x_ptr, bias_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offs)
    tl.store(out_ptr + offs, x)


def test_is_not_none_on_an_argument(interpret):
    x, b = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
    out = np.zeros(4, np.float32)
    optional_bias_kernel[(1,)](x, None, out, N=4)
    np.testing.assert_array_equal(out, x)
    optional_bias_kernel[(1,)](x, b, out, N=4)
    np.testing.assert_array_equal(out, x + 0.5)


@tile.jit
def conditional_call_kernel(x_ptr, y_ptr, flag):
    tl.store(x_ptr, 1) if flag > 0 else tl.store(y_ptr, 2)
    # Only the chosen branch loads: y_ptr + 100 is out of bounds and never read.
    v = tl.load(x_ptr + 1) if flag > 0 else tl.load(y_ptr + 100) if flag < 0 else 5
    tl.store(y_ptr + 1, v)


def test_conditional_expression_with_calls_runs_only_the_chosen_branch(interpret):
    x, y = np.array([0, 9], np.int32), np.zeros(2, np.int32)
    conditional_call_kernel[(1,)](x, y, 1)
    assert list(x) == [1, 9] and list(y) == [0, 9]
    conditional_call_kernel[(1,)](x, y, 0)
    assert list(y) == [2, 5]
    ptx = tile.compile(conditional_call_kernel, signature={"x_ptr": "*i32", "y_ptr": "*i32",
                                                           "flag": "i32"},
                       target="sm_90a").asm["ptx"]
    assert "bra" in ptx  # a branch, not two stores and a select


@tile.jit
def int_accumulator_kernel(x_ptr, out_ptr, K, N: tl.constexpr):
    acc = 0
    for k in range(K):
        acc += tl.load(x_ptr + k * N + tl.arange(0, N))
    total = 0
    for k in range(K):
        total += k
    tl.store(out_ptr + tl.arange(0, N), acc.to(tl.float32) + total.to(tl.float32))


def test_python_int_accumulators_become_tensors(interpret):
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    out = np.zeros(4, np.float32)
    int_accumulator_kernel[(1,)](x, out, 3, N=4)
    np.testing.assert_array_equal(out, x.astype(np.float32).sum(0) + 3)
    ptx = tile.compile(int_accumulator_kernel, signature={"x_ptr": "*fp16", "out_ptr": "*fp32",
                                                          "K": "i32"},
                       constexprs={"N": 128}, target="sm_90a").asm["ptx"]
    assert "cvt.f32.f16" in ptx


@tile.jit
def typo_kernel(x_ptr, CASE: tl.constexpr):
    if CASE == 0:
        tl.store(x_ptr, tl.arangee(0, 4))
    elif CASE == 1:
        tl.store(x_ptr, tl.no_such_builtin(x_ptr))
    else:
        tl.store(x_ptr, tl.load(x_ptr).no_such_method())


@pytest.mark.parametrize("case,text", [
    (0, "tl.arangee is not supported by this compiler (yet); did you mean tl.arange?\n"),
    (1, "tl.no_such_builtin is not supported by this compiler (yet)\n"),
    (2, "tl.no_such_method is not supported by this compiler (yet)\n")])
def test_a_missing_builtin_is_reported_as_unsupported(interpret, case, text):
    with pytest.raises(tile.CompilationError) as info:
        typo_kernel[(1,)](np.zeros(4, np.int32), CASE=case)
    assert text in str(info.value) and "test_frontend_gaps.py" in str(info.value)


def test_a_missing_name_outside_a_kernel_says_the_same():
    with pytest.raises(AttributeError, match=r"tl.program_idd is not supported by this "
                                             r"compiler \(yet\); did you mean tl.program_id\?"):
        tl.program_idd  # noqa: B018
    assert not hasattr(tl, "no_such_name")
