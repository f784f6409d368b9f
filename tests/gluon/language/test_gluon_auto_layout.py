"""AutoLayout: tensors built without a layout get one by propagation (gluon/passes.py),
forward and backward through elementwise ops, expand_dims, reductions, permutes and control
flow; nothing connected to a layout, or two layouts meeting, is an error naming the line."""

import numpy as np

import gluon
from gluon import language as gl
from gluon.passes import GLUON_PIPELINE
from gl_test_util import L1, L2, compile_error
from shared_codegen.frontend.launch import make_specialization

X = np.arange(512, dtype=np.float32)


def traced(kernel, *args, **constexprs):
    """The module the interpreter would run (AutoLayout already resolved)."""
    values = kernel.bind_args(args, constexprs)
    return kernel.make_ir(make_specialization(kernel, values, 4, "interpreter"))


def layouts_of(module):
    found = set()
    for op in module.walk():
        for r in op.results:
            layout = getattr(r.type, "layout", None)
            if layout is not None:
                found.add(layout)
    return found


@gluon.jit
def backward_kernel(x_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N)             # AutoLayout
    x = gl.load(x_ptr + offs)          # AutoLayout
    y = x + gl.full([N], 1.0, gl.float32, layout)   # pins x (and offs) to `layout`
    gl.store(out_ptr + offs, y)


def test_layout_flows_backward_from_a_concrete_operand():
    out = np.zeros(64, dtype=np.float32)
    backward_kernel[(1,)](X, out, N=64, layout=L1)
    np.testing.assert_array_equal(out, X[:64] + 1)
    module = traced(backward_kernel, X, out, N=64, layout=L1)
    assert layouts_of(module) == {L1}
    assert "set_auto_layout" not in str([op.attrs for op in module.walk()])


@gluon.jit
def two_d_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr, layout: gl.constexpr):
    rows = gl.arange(0, M)
    cols = gl.arange(0, N)
    offs = rows[:, None] * N + cols[None, :]    # expand_dims and broadcast of AutoLayout
    x = gl.load(x_ptr + offs)
    total = gl.sum(x, axis=1)                    # SliceLayout(1, auto)
    y = gl.set_auto_layout(x, layout)
    gl.store(out_ptr + offs, y + gl.expand_dims(total, 1))


def test_set_auto_layout_resolves_slices_through_expand_dims_and_reductions():
    out = np.zeros(16 * 32, dtype=np.float32)
    two_d_kernel[(1,)](X, out, M=16, N=32, layout=L2)
    x = X[:512].reshape(16, 32)
    np.testing.assert_allclose(out.reshape(16, 32), x + x.sum(1, keepdims=True), rtol=1e-6)
    found = layouts_of(traced(two_d_kernel, X, out, M=16, N=32, layout=L2))
    assert found == {L2, gl.SliceLayout(0, L2), gl.SliceLayout(1, L2)}


@gluon.jit
def forward_kernel(x_ptr, out_ptr, N: gl.constexpr, layout: gl.constexpr):
    offs = gl.arange(0, N, layout=layout)
    x = gl.load(x_ptr + offs)
    bias = gl.zeros([N], gl.float32)      # AutoLayout, resolved forward from the add
    acc = x + bias
    for i in range(3):
        acc = acc + 1.0
    gl.store(out_ptr + offs, acc)


def test_auto_operands_take_the_concrete_layout_and_loops_keep_it():
    out = np.zeros(64, dtype=np.float32)
    forward_kernel[(1,)](X, out, N=64, layout=L1)
    np.testing.assert_array_equal(out, X[:64] + 3)


@gluon.jit
def compiled_auto_kernel(x_ptr, out_ptr, N: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, N)
    x = gl.load(x_ptr + offs)
    gl.store(out_ptr + offs, gl.set_auto_layout(x, layout) * 2)


def test_resolved_kernels_compile_with_the_resolved_layout():
    kernel = gluon.compile(compiled_auto_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                           {"N": 512})
    assert "AutoLayout" not in kernel.asm["ttgir"]
    assert "ld.global.v4.b32" in kernel.asm["ptx"]


@gluon.jit
def unresolved_kernel(x_ptr):
    offs = gl.arange(0, 64)
    gl.store(x_ptr + offs, 1.0)


def test_nothing_connected_to_a_layout_is_an_error_naming_the_line():
    message = compile_error(unresolved_kernel, X)
    assert "cannot infer the layout of this gl.arange result (tensor<64xi32, AutoLayout()>)" \
        in message
    assert "offs = gl.arange(0, 64)" in message


@gluon.jit
def conflict_kernel(x_ptr, a: gl.constexpr, b: gl.constexpr):
    offs = gl.arange(0, 64)
    y = offs + gl.arange(0, 64, layout=a)
    z = offs + gl.arange(0, 64, layout=b)


def test_two_layouts_reaching_one_auto_value_conflict():
    b = gl.BlockedLayout([2], [32], [4], [0])
    message = compile_error(conflict_kernel, X, a=L1, b=b)
    assert "AutoLayout resolution found conflicting layouts" in message
    assert repr(L1) in message and repr(b) in message


@gluon.jit
def set_auto_twice_kernel(x_ptr, layout: gl.constexpr):
    y = gl.set_auto_layout(gl.arange(0, 64, layout=layout), layout)


def test_set_auto_layout_needs_an_auto_input():
    assert "gl.set_auto_layout input must have an AutoLayout" in compile_error(
        set_auto_twice_kernel, X, layout=L1)


def test_the_pipeline_is_resolve_then_verify():
    assert [name for name, _ in GLUON_PIPELINE] == ["resolve_auto_layouts", "verify_layouts"]


# ---- CoalescedLayout ---------------------------------------------------------------------


@gluon.jit
def coalesced_kernel(x_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr):
    # Upstream's pattern (test_coalesced_layout): coalesced aranges, expanded.
    rows = gl.arange(0, M, gl.CoalescedLayout())
    cols = gl.arange(0, N, gl.CoalescedLayout())
    offs = rows[:, None] * N + cols[None, :]
    x = gl.load(x_ptr + offs)
    gl.store(out_ptr + offs, x * 2.0)


def test_coalesced_layout_takes_the_coalesce_pass_choice():
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    out = np.zeros_like(x)
    coalesced_kernel[(1,)](x, out, 64, 64)
    np.testing.assert_array_equal(out, x * 2)
    module = traced(coalesced_kernel, x, out, M=64, N=64)
    # 16-byte vectors along the contiguous dim, 16 lanes across it (Triton's Coalesce).
    want = gl.BlockedLayout([1, 4], [2, 16], [4, 1], [1, 0])
    assert want in layouts_of(module)
    assert not any(isinstance(l, gl.AutoLayout) for l in layouts_of(module))
    ptx = gluon.compile(coalesced_kernel, {"x_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                        {"M": 64, "N": 64}, target="sm_90a").asm["ptx"]
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx


def test_coalesced_layout_with_no_memory_access_is_an_error():
    @gluon.jit
    def lonely(out_ptr):
        x = gl.arange(0, 128, layout=gl.CoalescedLayout())
        gl.static_assert(x.type.shape[0] == 128)

    import pytest
    from shared_codegen.frontend.errors import CompilationError
    with pytest.raises(CompilationError, match="cannot infer the layout of this gl.arange"):
        lonely[(1,)](np.zeros(128, np.int32))
