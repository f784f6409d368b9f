"""Gluon's semantic layer: the tile language's typing rules plus explicit layouts.

`GluonSemantic` subclasses `TileSemantic`, so promotion, casts, pointer arithmetic, math and
the combine regions of reductions are exactly the tile language's (Triton 3.6's). What it
overrides are the places where tensors are *created* or *combined*, because there Gluon has
rules the tile DSL does not (Triton's `GluonSemantic`):

- creation takes a layout (`arange`, `full`), `AutoLayout()` when none is given;
- operands of one op must already have equal layouts: nothing moves data implicitly, so a
  mismatch is an error that shows both layouts and their linear forms. An `AutoLayout`
  operand meeting a concrete one is pinned to it (`set_auto_layout`), as in Triton;
- broadcasting never adds dimensions (a layout has a rank) and keeps the layout;
- shape ops compute their result layout: `expand_dims` needs `SliceLayout(axis, parent)` and
  gives `parent`, reductions give `SliceLayout(axis, input layout)`, `permute` / `reshape` give
  the layout that makes them register renames (what the lowering assumes).

Errors are ValueError / TypeError; the code generator turns them into CompilationErrors that
name the kernel line.
"""

from __future__ import annotations

from typing import Callable, List, Sequence

from gluon.language._layouts import (AutoLayout, DistributedLayout, SharedLayout, SliceLayout,
                                     check_layout, is_auto, layout_difference, linear_form,
                                     linear_layout_of)
from shared_codegen.errors import CompilationError
from shared_codegen.frontend.values import tensor
from shared_codegen.ir.types import TensorType
from shared_codegen.ops.arith.definition import ConstantOp
from shared_codegen.ops.program.definition import BarrierOp
from shared_codegen.ops.reduction.definition import ReduceOp
from shared_codegen.ops.tensor.definition import BroadcastOp, ConvertLayoutOp, ExpandDimsOp, SplatOp
from gluon.language._movement import GluonMovementSemantic
from tile.language import _types as T
from tile.language.semantic import TileSemantic

SET_AUTO_LAYOUT_ATTR = "set_auto_layout"


class LayoutError(CompilationError, ValueError):
    """A Gluon layout rule was broken (mismatched operands, wrong slice, bad coverage)."""


def _gl_name(sym: str) -> str:
    # Messages built by the shared tile code say `tl.where`; Gluon users write `gl.where`.
    return "gl." + sym[3:] if sym.startswith("tl.") else sym


def _operator_text(sym: str) -> str:
    sym = _gl_name(sym)
    return sym if sym.startswith("gl.") else f"`{sym}`"


def layout_mismatch_message(what: str, named, shape) -> str:
    """`what` have different layouts, then each `name: repr` with its linear form indented
    under it, then the fix."""
    lines = [f"{what} have different layouts:"]
    for name, layout in named:
        lines.append(f"  {name}: {layout!r}")
        lines.extend("    " + line for line in linear_form(layout, shape).splitlines())
    layouts = [layout for _, layout in named]
    if len(layouts) == 2 and not any(map(is_auto, layouts)) and \
            linear_form(layouts[0], shape) == linear_form(layouts[1], shape):
        lines.append("  (they place every element identically, so the conversion is free)")
    if len(layouts) == 2 and repr(layouts[0]) == repr(layouts[1]):
        difference = layout_difference(layouts[0], layouts[1])
        lines.append(f"  (they print alike but differ in {difference})" if difference else
                     "  (they print alike; compare their linear forms above)")
    lines.append("  use gl.convert_layout(x, layout) to move one of them")
    return "\n".join(lines)


class GluonSemantic(GluonMovementSemantic, TileSemantic):
    """What gl.* builtins and operators build; `num_warps` is set by the JIT per kernel."""

    num_warps = 4

    # ---- layout helpers -------------------------------------------------------------------
    def _retag(self, t: tensor, layout) -> tensor:
        """Give a freshly built op result its layout (the shared op builders make tensors
        without one; the value has no users yet, so changing its type is safe)."""
        t.handle.type = t.handle.type.with_layout(layout)
        return self.make_tensor(t.handle)

    def check_layout(self, layout, shape, what="tensor"):
        check_layout(layout, shape, self.num_warps, what)

    def set_auto_layout(self, x, layout) -> tensor:
        """Pin an AutoLayout tensor to `layout`. Built as a `ttg.convert_layout` marked
        `set_auto_layout`; the resolve pass propagates the layout backwards from it and then
        removes it, so it never moves data."""
        if not isinstance(x, tensor) or not x.is_block():
            raise TypeError(f"gl.set_auto_layout needs a tensor, got {T.describe(x)}")
        if not isinstance(layout, DistributedLayout) or is_auto(layout):
            raise TypeError(f"gl.set_auto_layout must set a distributed layout, got {layout!r}")
        if not is_auto(x.layout):
            raise LayoutError(f"gl.set_auto_layout input must have an AutoLayout, but it has "
                              f"{x.layout!r}; use gl.convert_layout to change a layout")
        self.check_layout(layout, x.shape, "gl.set_auto_layout")
        op = self.builder.create(ConvertLayoutOp.name, [x.handle], [x.type.with_layout(layout)],
                                 {SET_AUTO_LAYOUT_ATTR: True})
        return self.make_tensor(op.result)

    def unify_layouts(self, xs: Sequence, names: Sequence[str], what: str) -> List:
        """The block tensors among `xs` with one layout: AutoLayout ones are pinned to the
        concrete layout; two different concrete layouts are an error. Others pass through."""
        xs = list(xs)
        blocks = [i for i, x in enumerate(xs) if isinstance(x, tensor) and x.is_block()]
        concrete = [i for i in blocks if not is_auto(xs[i].layout)]
        if not concrete:
            return xs
        first = concrete[0]
        target = xs[first].layout
        for i in concrete[1:]:
            if xs[i].layout != target:
                raise LayoutError(layout_mismatch_message(
                    what, [(names[first], target), (names[i], xs[i].layout)],
                    xs[first].shape if xs[first].shape == xs[i].shape else xs[i].shape))
        for i in blocks:
            if is_auto(xs[i].layout):
                if len(xs[i].shape) != len(xs[first].shape):
                    raise LayoutError(f"{what} have different ranks: {xs[i].type} and "
                                      f"{xs[first].type}; Gluon does not add dimensions "
                                      "implicitly (use gl.expand_dims)")
                # Size-1 dims broadcast later with the layout kept, so pin at this shape.
                xs[i] = self.set_auto_layout(xs[i], target)
        return xs

    # ---- creation -------------------------------------------------------------------------
    def arange(self, start, end, layout=None) -> tensor:
        layout = AutoLayout() if layout is None else layout
        out = super().arange(start, end)
        self.check_layout(layout, out.shape, "gl.arange")
        return self._retag(out, layout)

    def full(self, shape, value, dtype, layout=None) -> tensor:
        shape = T.canonical_shape(shape) if shape not in ((), []) else []
        if dtype is None:
            raise ValueError("gl.full needs a `dtype`")
        dtype = T.as_dtype(dtype)
        layout = AutoLayout() if layout is None else layout
        value = T.plain_number(value)
        if isinstance(value, tensor):
            if value.is_block():
                raise ValueError(f"gl.full's `value` must be a scalar, got {value.type}")
            return self._broadcast_to(self.cast(value, dtype), shape, layout)
        if not T.is_number(value):
            raise TypeError(f"gl.full's `value` must be a number, got {T.describe(value)}")
        if not shape:
            return self.scalar_constant(value, dtype)
        self.check_layout(layout, shape, "gl.full")
        ty = TensorType(tuple(shape), dtype, layout)
        return self.make_tensor(ConstantOp.build(self.builder, T.constant_value(value, dtype),
                                                 ty))

    def to_tensor(self, x, like=None) -> tensor:
        if isinstance(like, tensor) and like.is_block() and not isinstance(x, tensor):
            scalar = super().to_tensor(x, like=like.dtype)
            return self._broadcast_to(scalar, like.shape, like.layout)
        return super().to_tensor(x, like)

    # ---- broadcasting ---------------------------------------------------------------------
    def _broadcast_to(self, x: tensor, shape, layout=None) -> tensor:
        """Splat a scalar (with `layout`, else AutoLayout) or broadcast size-1 dims of a
        tensor of the same rank, keeping its layout."""
        shape = [int(s) for s in shape]
        if not x.is_block():
            if not shape:
                return x
            layout = AutoLayout() if layout is None else layout
            self.check_layout(layout, shape)
            return self.make_tensor(SplatOp.build(self.builder, x.handle, shape, layout))
        if layout is not None and not is_auto(layout) and not is_auto(x.layout) \
                and x.layout != layout:
            raise LayoutError(layout_mismatch_message("the value and its destination",
                                                      [("value", x.layout),
                                                       ("destination", layout)], x.shape))
        if len(x.shape) != len(shape):
            raise ValueError(f"cannot broadcast {x.type} to shape {shape}: Gluon does not add "
                             "dimensions implicitly (the layout has a rank); use "
                             "gl.expand_dims with a SliceLayout operand")
        if x.shape == shape:
            return x
        if self.broadcast_shape(x.shape, shape) != shape:
            raise ValueError(f"cannot broadcast {x.type} to shape {shape}")
        return self.make_tensor(BroadcastOp.build(self.builder, x.handle, shape))

    def _broadcast_pair(self, a: tensor, b: tensor, what="operands"):
        if not a.is_block() and not b.is_block():
            return a, b
        if not a.is_block():
            return self._broadcast_to(a, b.shape, b.layout), b
        if not b.is_block():
            return a, self._broadcast_to(b, a.shape, a.layout)
        a, b = self.unify_layouts([a, b], ["lhs", "rhs"], what)
        if len(a.shape) != len(b.shape):
            raise ValueError(f"cannot broadcast {a.type} and {b.type}: ranks differ and Gluon "
                             "does not add dimensions implicitly; use gl.expand_dims")
        shape = self.broadcast_shape(a.shape, b.shape)
        return self._broadcast_to(a, shape), self._broadcast_to(b, shape)

    def broadcast_tensors(self, *xs: tensor, names=None, what="operands"):
        names = names or [f"operand {i}" for i in range(len(xs))]
        xs = self.unify_layouts(xs, names, what)
        blocks = [x for x in xs if x.is_block()]
        if not blocks:
            return tuple(xs)
        ranks = {len(x.shape) for x in blocks}
        if len(ranks) > 1:
            raise ValueError(f"{what}: cannot broadcast "
                             + ", ".join(str(x.type) for x in blocks)
                             + ": ranks differ and Gluon does not add dimensions implicitly")
        shape: List[int] = []
        for x in blocks:
            shape = self.broadcast_shape(shape, x.shape)
        layout = blocks[0].layout
        return tuple(self._broadcast_to(x, shape, layout) for x in xs)

    def binary_operands(self, lhs, rhs, allow_lhs_ptr=False, allow_rhs_ptr=False,
                        arithmetic=True, div_or_mod=False, sym=""):
        what = f"operands of {_operator_text(sym)}" if sym else "operands"
        a, b = self.unify_layouts([lhs, rhs], ["lhs", "rhs"], what)
        return super().binary_operands(a, b, allow_lhs_ptr, allow_rhs_ptr, arithmetic,
                                       div_or_mod, sym)

    def where(self, cond, a, b) -> tensor:
        xs = self.unify_layouts([cond, a, b],
                                ["condition", "x", "y"], "operands of gl.where")
        return super().where(*xs)

    def broadcast_to(self, x, shape) -> tensor:
        x = self._operand(x, "broadcast_to input")
        return self._broadcast_to(x, T.canonical_shape(shape))

    # ---- memory ---------------------------------------------------------------------------
    def _memory_operands(self, fn, ptr, named):
        """`ptr` and the other operands of a memory op with the pointer's layout: scalars
        are splatted with it, tensors must already have it."""
        if not isinstance(ptr, tensor) or not ptr.is_block():
            return [v for _, v in named]
        out = []
        for name, v in named:
            if isinstance(v, tensor) and v.is_block():
                if is_auto(v.layout) and not is_auto(ptr.layout):
                    v = self.set_auto_layout(v, ptr.layout)
                elif v.layout != ptr.layout and not is_auto(ptr.layout):
                    raise LayoutError(layout_mismatch_message(
                        f"`pointer` and `{name}` of {fn}", [("pointer", ptr.layout),
                                                           (name, v.layout)], ptr.shape))
            out.append(v)
        return out

    def load(self, ptr, mask=None, other=None, *args, **kwargs) -> tensor:
        # Scalars `mask` / `other` are splatted with the pointer's layout by broadcast_tensors.
        mask, other = self._memory_operands("gl.load", ptr, [("mask", mask), ("other", other)])
        return super().load(ptr, mask, other, *args, **kwargs)

    def _splat_like_pointer(self, ptr, values):
        """Scalar values of a store / atomic as tensors in the pointer's layout (the shared
        code would otherwise splat them without one)."""
        if not isinstance(ptr, tensor) or not ptr.is_block():
            return values
        out = []
        for v in values:
            if v is not None:
                v = self._operand(v)
                if not v.is_block():
                    v = self._broadcast_to(v, ptr.shape, ptr.layout)
            out.append(v)
        return out

    def store(self, ptr, value, mask=None, *args, **kwargs):
        value, mask = self._memory_operands("gl.store", ptr, [("value", value), ("mask", mask)])
        value, mask = self._splat_like_pointer(ptr, [value, mask])
        return super().store(ptr, value, mask, *args, **kwargs)

    def _atomic_operands(self, ptr, val, mask, op, sem, scope):
        val, mask = self._memory_operands(f"gl.atomic_{op}", ptr, [("val", val), ("mask", mask)])
        val, mask = self._splat_like_pointer(ptr, [val, mask])
        return super()._atomic_operands(ptr, val, mask, op, sem, scope)

    # ---- shapes ---------------------------------------------------------------------------
    def expand_dims(self, x, axis) -> tensor:
        x = self._operand(x, "expand_dims input")
        if not x.is_block():
            raise TypeError("gl.expand_dims needs a tensor with a layout, got a scalar; build "
                            "it with gl.full(shape, value, dtype, layout) instead")
        norm = self.expand_dims_axes(x, axis)
        for a in sorted(norm):
            layout = x.layout
            if is_auto(layout):
                result = layout
            elif isinstance(layout, SliceLayout) and layout.dim == a:
                result = layout.parent
            else:
                raise LayoutError(
                    f"gl.expand_dims(x, {a}) needs x to have a SliceLayout(dim={a}, parent) "
                    f"(the result then has `parent`), but x has {layout!r}; create x with "
                    f"layout=gl.SliceLayout({a}, parent) or gl.convert_layout it to one")
            x = self.make_tensor(ExpandDimsOp.build(self.builder, x.handle, a, result))
        return x

    def reshape(self, x, shape, can_reorder=False) -> tensor:
        if can_reorder:
            raise ValueError("gl.reshape: can_reorder=True is not supported in Gluon (the "
                             "result layout must be known); reshape keeps row-major order")
        x = self._operand(x, "reshape input")
        out = super().reshape(x, shape, False)
        if out is x or not out.is_block() or not x.is_block():
            return out
        if is_auto(x.layout):
            return self._retag(out, x.layout)
        from shared_codegen.layouts.relations import reshaped_layout

        return self._retag(out, reshaped_layout(x.layout, x.shape, out.shape))

    def permute(self, x, dims) -> tensor:
        x = self._operand(x, "permute input")
        out = super().permute(x, dims)
        if out is x:
            return out
        if is_auto(x.layout):
            return self._retag(out, x.layout)
        from shared_codegen.layouts.relations import transposed_layout

        order = [int(d) for d in dims]
        return self._retag(out, transposed_layout(x.layout, order, x.shape))

    def convert_layout(self, x, layout, assert_trivial=False) -> tensor:
        from shared_codegen.ops.tensor.definition import ConvertLayoutOp

        if not isinstance(x, tensor) or not x.is_block():
            raise TypeError(f"gl.convert_layout needs a tensor, got {T.describe(x)}")
        if not isinstance(layout, DistributedLayout) or is_auto(layout):
            raise TypeError(f"gl.convert_layout: expected `layout` to be a distributed layout, "
                            f"got {layout!r}")
        if is_auto(x.layout):
            raise LayoutError("gl.convert_layout input has no layout yet (AutoLayout); use "
                              "gl.set_auto_layout(x, layout) to give it one")
        self.check_layout(layout, x.shape, "gl.convert_layout")
        if assert_trivial:
            self._assert_trivial(x, layout)
        if layout == x.layout:
            return x
        return self.make_tensor(ConvertLayoutOp.build(self.builder, x.handle, layout))

    def _assert_trivial(self, x: tensor, layout):
        """Triton's meaning of `assert_trivial`: no data crosses threads (the plan is a
        no-op or a register permutation)."""
        from shared_codegen.layouts.planner import plan_conversion

        bits = 64 if T.is_ptr(x.dtype) else max(8, x.dtype.bits)
        plan = plan_conversion(x.layout, layout, x.shape, bits, self.num_warps)
        if plan.kind not in ("noop", "register_permutation"):
            raise TypeError(
                f"layout conversion from {x.layout!r} to {layout!r} is not trivial: it needs "
                f"a {plan.kind.replace('_', ' ')} ({plan.cost}).\nThe linear layouts are:\n"
                f"{linear_form(x.layout, x.shape)}\n{linear_form(layout, x.shape)}")

    # ---- reductions and scans -------------------------------------------------------------
    def _same_layout_inputs(self, inputs, what):
        inputs = self._reduce_inputs(inputs, what)
        names = [f"input {i}" for i in range(len(inputs))]
        return self.unify_layouts(inputs, names, f"inputs of {_gl_name(what)}")

    def reduction(self, inputs, axis, body: Callable, keep_dims=False, what="reduce"):
        """Like the tile language's, with the result layout SliceLayout(axis, input's)."""
        inputs = self._same_layout_inputs(inputs, what)
        rank = len(inputs[0].shape)
        source_layout = inputs[0].layout
        flat = axis is None
        if flat:
            inputs = [self.reshape(t, [t.numel]) for t in inputs]
            axis = 0
        else:
            axis = self._wrap_axis(axis, rank, what)
        layout = inputs[0].layout
        result_layout = layout if is_auto(layout) else SliceLayout(axis, layout)
        if len(inputs[0].shape) == 1:
            result_layout = None  # the results are scalars
        op = ReduceOp.build(self.builder, [t.handle for t in inputs], axis, result_layout)
        self._build_combine(op, inputs, body, what)
        results = [self.make_tensor(r) for r in op.results]
        if keep_dims:
            if flat:
                results = [self._broadcast_to(r, [1] * rank, source_layout) for r in results]
            else:
                results = [self.expand_dims(r, axis) if r.is_block() else
                           self._broadcast_to(r, [1], layout) for r in results]
        return results

    def scan(self, inputs, axis, body: Callable, reverse=False, what="associative_scan"):
        inputs = self._same_layout_inputs(inputs, what)
        return super().scan(inputs, axis, body, reverse, what)

    # ---- layout queries -------------------------------------------------------------------
    def to_linear_layout(self, layout, shape):
        from shared_codegen.layouts import to_linear_layout

        if is_auto(layout):
            return layout
        if not isinstance(layout, (DistributedLayout, SharedLayout)):
            raise TypeError(f"gl.to_linear_layout: expected a DistributedLayout or "
                            f"SharedLayout, got {type(layout).__name__}")
        shape = [int(s) for s in shape]
        to_linear_layout(layout, shape)  # raises the errors it always raised
        return linear_layout_of(layout, shape)

    def bank_conflicts(self, distr_ty, shared_ty) -> int:
        """Gluon 3.6's `bank_conflicts(distr_ty, shared_ty)`: `distr_ty` is a tensor type
        (`x.type`), `shared_ty` a shared-memory descriptor type (anything with `shape`,
        `layout`, an element type and optionally `alloc_shape`)."""
        from shared_codegen.layouts.bank_conflicts import bank_conflicts

        if isinstance(distr_ty, tensor):
            distr_ty = distr_ty.type
        if not isinstance(distr_ty, TensorType) or not isinstance(distr_ty.layout,
                                                                  DistributedLayout):
            raise TypeError("bank_conflicts expects the register layout to be a distributed "
                            f"tensor type, got {type(distr_ty).__name__}")
        if is_auto(distr_ty.layout):
            raise LayoutError("bank_conflicts needs a concrete register layout, got AutoLayout")
        layout = getattr(shared_ty, "layout", None)
        if not isinstance(layout, SharedLayout):
            raise TypeError("bank_conflicts expects the shared layout to be a shared memory "
                            f"descriptor type, got {type(shared_ty).__name__}")
        shape = list(getattr(shared_ty, "shape"))
        elem = next((getattr(shared_ty, n) for n in ("element_ty", "element", "dtype")
                     if getattr(shared_ty, n, None) is not None), None)
        if list(distr_ty.shape) != shape:
            raise ValueError(f"register shape {list(distr_ty.shape)} and shared shape {shape} "
                             "must match")
        if elem is not None and elem != distr_ty.element:
            raise ValueError(f"mismatched dtypes between register ({distr_ty.element}) and "
                             f"shared ({elem}) layouts")
        alloc = list(getattr(shared_ty, "alloc_shape", None) or shape)
        if alloc[-len(shape):] != shape:
            raise ValueError(f"bank_conflicts NYI for subslices. Got shape {shape} and "
                             f"alloc_shape {alloc}")
        return bank_conflicts(distr_ty.layout, layout, shape, distr_ty.element)

    # ---- misc -----------------------------------------------------------------------------
    def thread_barrier(self):
        BarrierOp.build(self.builder)

    def call_language(self, name: str, *args, **kwargs):
        import gluon.language as gl

        fn = getattr(gl, name, None)
        if fn is None:
            raise AttributeError(f"gluon.language has no builtin named {name!r}")
        return fn(*args, _semantic=self, **kwargs)


__all__ = ["GluonSemantic", "LayoutError", "layout_mismatch_message", "SET_AUTO_LAYOUT_ATTR"]
