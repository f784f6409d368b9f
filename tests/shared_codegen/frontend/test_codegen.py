"""The shared frontend: Python source -> IR, control flow, calls, and errors in user terms."""

import os

import numpy as np
import pytest

import tile
import tile.language as tl
from shared_codegen.frontend.errors import ArgumentError, CompilationError
from shared_codegen.frontend.launch import make_specialization
from shared_codegen.interpreter.memory import InterpreterError
from shared_codegen.ir import print_module, verify_module

HERE = os.path.abspath(__file__)


def ir_of(kernel, args, num_warps=4):
    spec = make_specialization(kernel, list(args), num_warps, "sm_90a")
    module = kernel.make_ir(spec)
    verify_module(module)
    return print_module(module)


def line_of(text):
    with open(HERE) as f:
        for i, line in enumerate(f, 1):
            if text in line:
                return i
    raise AssertionError(text)


# ---- golden IR -------------------------------------------------------------------------------

@tile.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def test_vector_add_ir_is_named_after_the_source_variables():
    x = np.zeros(16, np.float32)
    text = ir_of(add_kernel, [x, x, x, 1000, 128])
    # enable_fp_fusion: the tile frontend lets mul + add fuse into an FMA, as Triton does.
    assert text.startswith("module attributes {enable_fp_fusion = True, num_warps = 4, "
                           "target = 'sm_90a', threads_per_warp = 32}\n")
    assert ("tt.func @add_kernel(%x_ptr: !ptr<fp32>, %y_ptr: !ptr<fp32>, %out_ptr: !ptr<fp32>, "
            "%n_elements: i32) attributes {kernel} {") in text
    for line in ["  %pid = tt.get_program_id {axis = 0} : i32",
                 "tt.make_range {end = 128, start = 0} : tensor<128xi32>",
                 "%mask = arith.cmpi %offsets, %",
                 "{predicate = slt} : tensor<128xi1>",
                 "%x = tt.load %", "%y = tt.load %",
                 "arith.addf %x, %y : tensor<128xfp32>", "  tt.return"]:
        assert line in text, line


def test_int_argument_equal_to_one_is_specialized_to_a_constant():
    x = np.zeros(16, np.float32)
    text = ir_of(add_kernel, [x, x, x, 1, 128])
    # The parameter stays in the signature, but the body compares against the constant 1.
    assert "%n_elements: i32" in text
    assert "arith.cmpi %offsets, %n_elements" not in text


def test_aligned_pointers_are_recorded_as_divisible_by_16():
    x = np.zeros(16, np.float32)
    spec = make_specialization(add_kernel, [x, x, x, 1000, 128], 4, "sm_90a")
    module = add_kernel.make_ir(spec)
    assert module.kernel.attrs["arg_divisibility"] == {0: 16, 1: 16, 2: 16, 3: 16} or \
        module.kernel.attrs["arg_divisibility"] == {0: 16, 1: 16, 2: 16}


# ---- control flow ----------------------------------------------------------------------------

@tile.jit
def control_flow_kernel(out_ptr, n, FLAG: tl.constexpr):
    acc = 0.0
    for i in range(n):
        if i % 2 == 0:
            acc += i
        else:
            acc -= 1.0
    j = 0
    while j < n:
        j += 3
    total = 0
    for k in tl.static_range(4):
        total += k
    if FLAG:
        extra = 100
    else:
        extra = 200
    tl.store(out_ptr, acc)
    tl.store(out_ptr + 1, j.to(tl.float32))
    tl.store(out_ptr + 2, total + extra)


@pytest.mark.parametrize("n,flag", [(0, True), (5, False), (6, True)])
def test_runtime_and_static_control_flow(n, flag):
    out = np.zeros(3, np.float32)
    control_flow_kernel[(1,)](out, n, FLAG=flag)
    acc = sum(float(i) if i % 2 == 0 else -1.0 for i in range(n))
    j = 0
    while j < n:
        j += 3
    assert out.tolist() == [acc, float(j), 6 + (100 if flag else 200)]


@tile.jit
def branch_numbers_kernel(out_ptr, n, B: tl.constexpr):
    if n > 3:
        x = 1
    else:
        x = B
    tl.store(out_ptr, x)


def test_a_runtime_if_may_give_a_variable_another_number_in_each_branch():
    # The converter prints constants as literals, so converted kernels do this a lot.
    out = np.zeros(1, np.int32)
    for n, want in ((5, 1), (2, 7)):
        branch_numbers_kernel[(1,)](out, n, B=7)
        assert out.tolist() == [want]
    with pytest.raises(CompilationError, match=r"variable `x` has type i32 in the `if` branch "
                                               r"but fp32 in the `else` branch"):
        branch_numbers_kernel[(1,)](np.zeros(1, np.float32), 5, B=2.5)


def test_runtime_loops_become_scf_ops_and_static_loops_unroll():
    out = np.zeros(3, np.float32)
    text = ir_of(control_flow_kernel, [out, 5, True])
    assert text.count("scf.for") == 1
    assert text.count("scf.while") == 1
    assert text.count("scf.if") == 1
    assert "^bb(%i: i32, %acc_1: fp32):" in text


@tile.jit
def _scaled(x, factor: tl.constexpr):
    return x * factor, factor + 1


@tile.jit
def _add_one(x):
    return x + 1


@tile.jit
def call_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y, f = _scaled(x, 3)
    tl.static_assert(f == 4, "factor must be 4")
    tl.store(out_ptr + offs, _add_one(y))


def test_calls_to_jitted_functions_are_inlined_and_return_tuples():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    call_kernel[(1,)](x, out, BLOCK=8)
    np.testing.assert_array_equal(out, x * 3 + 1)
    assert "tt.call" not in ir_of(call_kernel, [x, out, 8])


def test_ir_dump_env_var_writes_one_file_per_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("SC_DUMP_IR_DIR", str(tmp_path))
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    import shared_codegen.frontend.compile as compile_mod
    monkeypatch.setattr(compile_mod, "_DISK_CACHE", None)
    tile.compile(add_kernel, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "out_ptr": "*fp32:16",
                              "n_elements": "i32"}, {"BLOCK_SIZE": 256})
    files = sorted(os.listdir(tmp_path))
    assert files, "no IR dumped"
    assert all(f.endswith(".mlir") for f in files)
    assert "tt.func @add_kernel" in (tmp_path / files[-1]).read_text()


# ---- errors ----------------------------------------------------------------------------------

@tile.jit
def k_break(x_ptr, n):
    for i in range(n):
        break  # line: break


@tile.jit
def k_undefined(x_ptr):
    tl.store(x_ptr, y_undefined)  # noqa: F821  line: undefined


@tile.jit
def k_loop_type(x_ptr, n):
    acc = tl.program_id(0) * 0  # an int32 tensor: a Python number would widen (loop_widening)
    for i in range(n):  # line: loop type
        acc += tl.load(x_ptr + i)
    tl.store(x_ptr, acc)


@tile.jit
def k_oob(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)  # line: oob


@tile.jit
def k_store_scalar(x_ptr, n):
    tl.store(x_ptr, n)


GLOBAL_PLAIN = 3


@tile.jit
def k_global(x_ptr):
    tl.store(x_ptr, GLOBAL_PLAIN)  # line: global


@tile.jit
def k_return_in_if(x_ptr, n):
    # A bare `return` in a runtime `if` is folded (frontend/early_return.py); inside a loop
    # it would end the loop, which structured IR cannot say.
    for i in range(n):
        if i > 0:
            return  # line: return in if


def test_unsupported_python_names_file_line_and_source():
    x = np.zeros(8, np.float32)
    with pytest.raises(CompilationError) as info:
        k_break[(1,)](x, 3)
    line = line_of("# line: break")
    assert str(info.value) == (f"{HERE}:{line}: unsupported Python construct in a kernel: "
                               "`break`\n    break  # line: break\n    ^")


def test_undefined_name():
    with pytest.raises(CompilationError) as info:
        k_undefined[(1,)](np.zeros(8, np.float32))
    line = line_of("# noqa: F821  line: undefined")
    assert str(info.value).startswith(f"{HERE}:{line}: name `y_undefined` is not defined\n")


def test_loop_carried_type_change():
    with pytest.raises(CompilationError) as info:
        k_loop_type[(1,)](np.zeros(8, np.float32), 3)
    line = line_of("# line: loop type")
    assert str(info.value).splitlines()[0] == (
        f"{HERE}:{line}: loop-carried variable `acc` has type i32 before the loop but fp32 at "
        "the end of the loop body; make the types match (e.g. with .to())")


def test_non_constexpr_global_is_rejected():
    with pytest.raises(CompilationError) as info:
        k_global[(1,)](np.zeros(8, np.float32))
    assert "cannot read the global variable `GLOBAL_PLAIN` (3) in a kernel: only globals " \
           "wrapped in constexpr are allowed, e.g. `GLOBAL_PLAIN = tl.constexpr(3)`" in \
           str(info.value)


def test_return_inside_runtime_if_in_a_loop_is_rejected():
    with pytest.raises(CompilationError, match="`return` inside a runtime `if`/loop is not "
                                               "supported"):
        k_return_in_if[(1,)](np.zeros(8, np.float32), 3)


def test_out_of_bounds_access_names_line_program_and_offset():
    x = np.zeros(8, np.float32)
    with pytest.raises(InterpreterError) as info:
        k_oob[(2,)](x, BLOCK=16)
    line = line_of("# line: oob")
    assert str(info.value).splitlines()[0] == (
        f"{HERE}:{line}: out-of-bounds load of `x_ptr`: element offset 8 is outside [0, 8) "
        "(8 elements of float32) (program id (0, 0, 0))")


def test_too_few_arguments():
    with pytest.raises(ArgumentError, match=r"^k_store_scalar\(\) missing 1 required argument: "
                                            r"'n'$"):
        k_store_scalar[(1,)](np.zeros(8, np.float32))


def test_unsupported_dtype_names_the_parameter():
    with pytest.raises(ArgumentError) as info:
        k_store_scalar[(1,)](np.zeros(8, np.complex64), 1)
    assert str(info.value) == ("argument `x_ptr` of k_store_scalar: numpy dtype complex64 is "
                               "not supported by kernels")


def test_grid_of_the_wrong_rank():
    with pytest.raises(ArgumentError) as info:
        k_store_scalar[(1, 2, 3, 4)](np.zeros(8, np.float32), 1)
    assert str(info.value) == ("grid of k_store_scalar must be a tuple of 1 to 3 ints, got "
                               "(1, 2, 3, 4) (4 dimensions)")


def test_calling_a_kernel_directly_explains_the_launch_syntax():
    with pytest.raises(RuntimeError, match=r"launch it with k_store_scalar\[grid\]"):
        k_store_scalar(np.zeros(8, np.float32), 1)


def test_builtins_outside_kernels_explain_themselves():
    with pytest.raises(RuntimeError, match=r"program_id\(\) is a kernel builtin"):
        tl.program_id(0)


@tile.jit
def k_dtype_method(x_ptr, out_ptr):
    x = tl.load(x_ptr)
    if x.dtype.is_floating():
        tl.store(out_ptr, x * 2)
    else:
        tl.store(out_ptr, x + 100)


def test_methods_of_compile_time_values_run_at_compile_time():
    out = np.zeros(1, np.float32)
    k_dtype_method[(1,)](np.array([3.0], np.float32), out)
    assert out[0] == 6.0
    out_i = np.zeros(1, np.int32)
    k_dtype_method[(1,)](np.array([3], np.int32), out_i)
    assert out_i[0] == 103


@tile.jit
def k_nested_return(x_ptr, out_ptr, N: tl.constexpr, SPLIT: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    cols = tl.arange(0, N)
    if SPLIT > 1:  # neither branch of this `if` ends in a return; the inner one does
        if x > 0:
            tl.store(out_ptr + pid * N + cols, tl.full([N], -1.0, tl.float32))
            return
    else:
        if x > 1:
            if x > 2:
                return
            tl.store(out_ptr + pid * N + cols, tl.full([N], -2.0, tl.float32))
    tl.store(out_ptr + pid * N + cols, tl.full([N], 7.0, tl.float32))


@pytest.mark.parametrize("split", [1, 2])
def test_return_in_an_inner_runtime_if_skips_what_follows_the_outer_if(split):
    # The rest of the kernel after the outer `if` must not run on the path that returned
    # (it used to: the fold moved only the outer branch's own remaining statements).
    x = np.array([1, 0, 2, 3], np.float32)
    out = np.zeros(16, np.float32)
    k_nested_return[(4,)](x, out, N=4, SPLIT=split)
    want = [-1, 7, -1, -1] if split == 2 else [7, 7, 7, 0]
    np.testing.assert_array_equal(out, np.repeat(np.array(want, np.float32), 4))
