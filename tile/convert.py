"""The converter: a tile kernel, specialized, printed as readable Gluon source.

The tile passes turn a kernel into explicit-layout IR, exactly what a Gluon author could have
written. This module prints that IR back as a `@gluon.jit` function:

- every layout becomes a named module-level constant (`BLOCKED0 = gl.constexpr(...)`);
- `ttg.convert_layout` appears where the compiler put it;
- variables keep their source names where they survived (`name_hint`), others get `v<N>`;
- scalar constants are literals, splats rely on Gluon's implicit broadcasting, structured
  control flow becomes Python `for`/`if`/`while`, and reduction combine regions become small
  `@gluon.jit` helpers.

The output compiles with `gluon` and computes what the original computes; it is the starting
point for hand tuning. Entry points: `to_gluon(kernel, *example_args, **constexprs)`,
`to_gluon_for_signature(kernel, signature, constexprs)`, and the `tile-to-gluon` CLI.
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import math
import os
import sys
from typing import Dict, List, Optional

from shared_codegen.frontend.compile import explicit_layout_module
from shared_codegen.frontend.launch import make_specialization
from shared_codegen.ir.core import Block, Module, Operation, Value
from shared_codegen.ir.types import (PointerType, ScalarType, TensorDescriptorType, TensorType,
                                     scalar_of)
from shared_codegen.layouts.relations import (joined_layout, reshaped_layout, split_layout,
                                              transposed_layout)
from shared_codegen.ops.arith.definition import (BITCAST, NAN_PROPAGATING, AddPtrOp, BinaryOp,
                                                 CastOp, CompareOp, ConstantOp, SelectOp)
from shared_codegen.ops.control.definition import ForOp, IfOp, WhileOp, YieldOp
from shared_codegen.ops.extern.definition import ExternElementwiseOp
from shared_codegen.ops.griddepcontrol.definition import GdcLaunchDependentsOp, GdcWaitOp
from shared_codegen.ops.map_elementwise.definition import MapElementwiseOp, MapElementwiseReturnOp
from shared_codegen.ops.math.definition import AbsIntOp, FmaOp, UnaryFloatOp
from shared_codegen.ops.memory.definition import AtomicCASOp, AtomicRMWOp, LoadOp, StoreOp
from shared_codegen.ops.movement.definition import GatherOp, HistogramOp, JoinOp, SplitOp
from shared_codegen.ops.program.definition import (AssertOp, AssumeOp, BarrierOp, PrintOp,
                                                   ProgramIdOp)
from shared_codegen.ops.reduction.definition import ReduceOp, ScanOp
from tile.convert_mma import MmaForms
from tile.convert_tma import MBARRIER_TMA, TmaForms
from tile.convert_warp_spec import WarpSpecForms
from shared_codegen.ops.tensor.definition import (BroadcastOp, ConvertLayoutOp, ExpandDimsOp,
                                                  HintOp, MakeRangeOp, ReshapeOp, SplatOp, TransOp)
from tile.language.extra.cuda import libdevice as libdevice_module

_COMPARE = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">=",
            "ult": "<", "ule": "<=", "ugt": ">", "uge": ">=", "oeq": "==", "one": "!=",
            "olt": "<", "ole": "<=", "ogt": ">", "oge": ">=", "une": "!="}
_ATOMIC = {"add": "gl.atomic_add", "fadd": "gl.atomic_add", "max": "gl.atomic_max",
           "umax": "gl.atomic_max", "min": "gl.atomic_min", "umin": "gl.atomic_min",
           "and": "gl.atomic_and", "or": "gl.atomic_or", "xor": "gl.atomic_xor",
           "xchg": "gl.atomic_xchg"}
# Ops that take a scalar operand as a Python number (`x + 1`, `gl.where(c, x, 0.0)`).
_ELEMENTWISE_USERS = (BinaryOp, AddPtrOp, CompareOp, SelectOp)
# libdevice symbol -> the library function that calls it (`__nv_powif` -> `pow`).
_LIBDEVICE_NAMES = {symbol: name for name, overloads in libdevice_module.FUNCTIONS.items()
                    for symbol, _ in overloads.values()}


class ConversionError(Exception):
    """The IR holds something the converter cannot print as Gluon."""


def dtype_source(ty) -> str:
    if isinstance(ty, PointerType):
        return f"gl.pointer_type({dtype_source(ty.element)})"
    return f"gl.{ty!r}"


def _literal(value, ty) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        if math.isnan(value):
            return "float('nan')"
        return repr(value)
    if isinstance(ty, ScalarType) and ty.is_floating():
        return repr(float(value))
    if isinstance(value, bool) or (isinstance(ty, ScalarType) and ty.is_bool()):
        return "True" if value else "False"
    return repr(int(value))


def _default_literal_type(value, ty) -> bool:
    """Whether Gluon would give the literal `value` the type `ty` on its own."""
    from tile.language.semantic import TileSemantic

    try:
        return TileSemantic.literal_type(value) == ty
    except TypeError:
        return False


class _Names:
    def __init__(self, reserved):
        self.used = set(reserved)
        self.counter = 0

    def fresh(self, hint: str = "") -> str:
        base = hint if hint and hint.isidentifier() and not keyword.iskeyword(hint) else ""
        if not base:
            while f"v{self.counter}" in self.used:
                self.counter += 1
            base = f"v{self.counter}"
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


class GluonPrinter(MmaForms, TmaForms, WarpSpecForms):
    dtype = staticmethod(lambda ty: dtype_source(ty))

    def __init__(self, module: Module):
        self.module = module
        self.imports = set()  # `from gluon.language.nvidia... import ...` lines the forms need
        self.layout_names: Dict[object, str] = {}
        self.layout_defs: List[str] = []
        self.helpers: List[str] = []
        self.helper_bodies: Dict[str, str] = {}
        self.literals = set()  # values printed as Python literals
        self.uses: Dict[Value, List[Operation]] = {}
        for op in module.walk():
            for v in op.operands:
                self.uses.setdefault(v, []).append(op)

    # ---- layouts -----------------------------------------------------------------------
    def layout(self, layout) -> str:
        got = self.layout_names.get(layout)
        if got is not None:
            return got
        parent = getattr(layout, "parent", None)
        kind = type(layout).__name__
        if kind == "SliceLayout":
            text = f"gl.SliceLayout({layout.dim}, {self.layout(parent)})"
        elif kind == "DotOperandLayout":
            text = (f"gl.DotOperandLayout({layout.operand_index}, {self.layout(parent)}, "
                    f"{layout.k_width})")
        elif kind == "MBarrierLayout":
            self.imports.add(MBARRIER_TMA)
            text = "mbarrier.MBarrierLayout()"
        else:
            text = "gl." + repr(layout)
        prefix = "MBARRIER" if kind == "MBarrierLayout" else \
            (getattr(layout, "alias_prefix", None) or kind.replace("Layout", "")).upper()
        count = sum(1 for n in self.layout_names.values() if n.rstrip("0123456789") == prefix)
        name = f"{prefix}{count}"
        self.layout_names[layout] = name
        self.layout_defs.append(f"{name} = gl.constexpr({text})")
        return name

    # ---- the kernel ----------------------------------------------------------------------
    def print(self, header: str) -> str:
        fn = self.module.kernel
        names = _Names(set(dir(__builtins__)) | {"gl", "gluon", "libdevice"})
        self.uses_libdevice = False
        self.names = names
        self.expr: Dict[Value, str] = {}
        params = []
        for a in fn.args:
            n = names.fresh(a.name_hint)
            self.expr[a] = n
            params.append(n)
        body: List[str] = []
        self.block(fn.body.block, body, 1)
        if not any(line.strip() for line in body):
            body.append("    pass")
        header += self.descriptor_parameters(fn)
        out = [f'"""{header}"""', "", "import gluon", "from gluon import language as gl",
               *sorted(self.imports)]
        if self.uses_libdevice:  # one library for both languages
            out.append("from tile.language.extra import libdevice")
        out.append("")
        out += self.layout_defs
        if self.layout_defs:
            out.append("")
        for h in self.helpers:
            out += ["", h]
        out += ["", "", "@gluon.jit", f"def {fn.name}({', '.join(params)}):"]
        out += body
        return "\n".join(out) + "\n"

    def descriptor_parameters(self, fn) -> str:
        """What each tensor-descriptor parameter must be given (a host TensorDescriptor)."""
        lines = []
        for a in fn.args:
            if isinstance(a.type, TensorDescriptorType):
                ty = a.type
                lines.append(f"- {self.expr[a]}: a TensorDescriptor of {ty.element!r} with "
                             f"block_shape {list(ty.block_shape)} and layout "
                             f"{self.layout(ty.layout)} (the tile kernel's "
                             f"`TensorDescriptor.from_tensor(x, {list(ty.block_shape)})` is "
                             f"one; `gluon.nvidia.hopper.TensorDescriptor.from_tensor(x, "
                             f"{list(ty.block_shape)}, {self.layout(ty.layout)})` too).")
        return ("\nTensor descriptor parameters:\n" + "\n".join(lines) + "\n") if lines else ""

    def fail(self, message: str) -> ConversionError:
        """The error the forms (convert_mma, convert_tma) raise: `raise self.fail(...)`."""
        return ConversionError(message)

    def value(self, v: Value) -> str:
        try:
            return self.expr[v]
        except KeyError:
            raise ConversionError(f"value {v!r} is used before it is defined") from None

    def bind(self, v: Value, text: str, out: List[str], indent: int):
        name = self.names.fresh(v.name_hint)
        out.append("    " * indent + f"{name} = {text}")
        self.expr[v] = name

    def block(self, block: Block, out: List[str], indent: int):
        for op in block.ops:
            self.op(op, out, indent)

    def op(self, op: Operation, out: List[str], indent: int):
        pad = "    " * indent
        kind = op.opdef
        args = [self.expr.get(v) for v in op.operands]
        res = op.results[0] if op.results else None
        spelling = kind.spelling_of(op) if kind is not None else None
        if isinstance(kind, (YieldOp, MapElementwiseReturnOp)) or self.tensor_map_helper(op):
            return
        if getattr(kind, "pure", False) and op.results and \
                not any(self.uses.get(r) for r in op.results):
            return  # dead (a descriptor's unused innermost stride, say): nothing to print
        if isinstance(kind, ConstantOp):
            self.constant(op, out, indent)
        elif isinstance(kind, (BinaryOp, AddPtrOp)) and not spelling.isidentifier():
            self.bind(res, f"{args[0]} {spelling} {args[1]}", out, indent)
        elif isinstance(kind, BinaryOp) and op.name not in NAN_PROPAGATING:
            self.bind(res, f"gl.{spelling}({args[0]}, {args[1]})", out, indent)
        elif isinstance(kind, BinaryOp):
            self.bind(res, f"gl.{spelling}({args[0]}, {args[1]}, "
                           "propagate_nan=gl.PropagateNan.ALL)", out, indent)
        elif isinstance(kind, CompareOp):
            self.bind(res, f"{args[0]} {_COMPARE[op.attrs['predicate']]} {args[1]}", out,
                      indent)
        elif isinstance(kind, SelectOp):
            self.bind(res, f"gl.where({args[0]}, {args[1]}, {args[2]})", out, indent)
        elif isinstance(kind, CastOp):
            src = args[0]
            if op.operands[0] in self.literals:  # `.to` needs a tensor, not a Python number
                src = f"gl.to_tensor({src})"
            bitcast = ", bitcast=True" if op.name == BITCAST else ""
            self.bind(res, f"{src}.to({dtype_source(scalar_of(res.type))}{bitcast})", out,
                      indent)
        elif isinstance(kind, (UnaryFloatOp, AbsIntOp)):
            self.bind(res, f"gl.{spelling}({args[0]})", out, indent)
        elif isinstance(kind, FmaOp):
            self.bind(res, f"gl.fma({args[0]}, {args[1]}, {args[2]})", out, indent)
        elif isinstance(kind, ProgramIdOp):
            self.bind(res, f"gl.{spelling}({op.attrs['axis']})", out, indent)
        elif isinstance(kind, MakeRangeOp):
            self.bind(res, f"gl.arange({op.attrs['start']}, {op.attrs['end']}, "
                           f"layout={self.layout(res.type.layout)})", out, indent)
        elif isinstance(kind, SplatOp):
            self.splat(op, out, indent)
        elif isinstance(kind, BroadcastOp):
            self.bind(res, f"gl.broadcast_to({args[0]}, {list(res.type.shape)})", out, indent)
        elif isinstance(kind, ExpandDimsOp):
            self.bind(res, f"gl.expand_dims({args[0]}, {op.attrs['axis']})", out, indent)
        elif isinstance(kind, ReshapeOp):
            self.bind(res, f"gl.reshape({args[0]}, {list(res.type.shape)})", out, indent)
            self.pin_inferred(op, out, indent)
        elif isinstance(kind, TransOp):
            self.bind(res, f"gl.permute({args[0]}, {list(op.attrs['order'])})", out, indent)
            self.pin_inferred(op, out, indent)
        elif isinstance(kind, ConvertLayoutOp):
            self.bind(res, f"gl.convert_layout({args[0]}, {self.layout(res.type.layout)})",
                      out, indent)
        elif isinstance(kind, HintOp):
            text = args[0]
            if "divisibility" in op.attrs:
                text = f"gl.multiple_of({text}, {op.attrs['divisibility']})"
            if "contiguity" in op.attrs:
                text = f"gl.max_contiguous({text}, {op.attrs['contiguity']})"
            self.bind(res, text, out, indent)
        elif isinstance(kind, LoadOp):
            self.load(op, out, indent)
        elif isinstance(kind, StoreOp):
            self.store(op, out, indent)
        elif isinstance(kind, AtomicRMWOp):
            mask = f", mask={args[2]}" if op.attrs.get("has_mask") else ""
            self.bind(res, f"{_ATOMIC[op.attrs['kind']]}({args[0]}, {args[1]}{mask}, "
                           f"sem={op.attrs['sem']!r}, scope={op.attrs['scope']!r})", out, indent)
        elif isinstance(kind, AtomicCASOp):
            self.bind(res, f"gl.atomic_cas({args[0]}, {args[1]}, {args[2]}, "
                           f"sem={op.attrs['sem']!r}, scope={op.attrs['scope']!r})", out, indent)
        elif isinstance(kind, BarrierOp):
            out.append(pad + "gl.thread_barrier()")
        elif isinstance(kind, PrintOp):
            out.append(pad + f"gl.device_print({op.attrs['prefix']!r}, {', '.join(args)})")
        elif isinstance(kind, AssertOp):
            out.append(pad + f"gl.device_assert({args[0]}, {op.attrs['message']!r})")
        elif isinstance(kind, AssumeOp):
            out.append(pad + f"gl.assume({args[0]})")
        elif isinstance(kind, (GdcWaitOp, GdcLaunchDependentsOp)):
            # Upstream Gluon has no names of its own for these; its kernels call the
            # triton.language ones, as ours call tile's.
            self.imports.add("from tile.language.extra import cuda")
            out.append(pad + f"cuda.{kind.user_name}()")
        elif isinstance(kind, ExternElementwiseOp):
            self.uses_libdevice = True
            name = _LIBDEVICE_NAMES[op.attrs["symbol"]]
            # The int1 predicates' raw i32 result is what the IR holds; the cast follows.
            tail = ".to(gl.int32)" if name in libdevice_module.PREDICATES else ""
            self.bind(res, f"libdevice.{name}({', '.join(args)}){tail}", out, indent)
        elif isinstance(kind, (ReduceOp, ScanOp)):
            self.reduction(op, out, indent)
        elif isinstance(kind, (JoinOp, SplitOp, GatherOp, HistogramOp, MapElementwiseOp)):
            self.movement(op, args, out, indent)
        elif isinstance(kind, ForOp):
            self.for_loop(op, out, indent)
        elif isinstance(kind, IfOp):
            self.if_op(op, out, indent)
        elif isinstance(kind, WhileOp):
            self.while_loop(op, out, indent)
        elif not self.tma_op(op, out, indent) and not self.mma_op(op, out, indent) and \
                not self.warp_spec_op(op, out, indent):
            raise ConversionError(f"{op.loc}: no Gluon form for `{op.name}`")

    # ---- individual forms ----------------------------------------------------------------
    def constant(self, op, out, indent):
        res = op.result
        ty = res.type
        value = op.attrs["value"]
        if isinstance(ty, TensorType):
            self.bind(res, f"gl.full({list(ty.shape)}, {_literal(value, ty.element)}, "
                           f"{dtype_source(ty.element)}, layout={self.layout(ty.layout)})",
                      out, indent)
            return
        users = self.uses.get(res, [])
        # A bare literal is typed by the other operand (or by Triton's literal rules); keep
        # it bare when that gives the constant's own type, else spell the type out.
        elementwise_peer = users and all(
            isinstance(u.opdef, _ELEMENTWISE_USERS) and any(
                w is not res and scalar_of(w.type) == ty for w in u.operands)
            for u in users)
        if elementwise_peer or _default_literal_type(value, ty):
            self.expr[res] = _literal(value, ty)
            self.literals.add(res)
        else:
            self.bind(res, f"gl.to_tensor({_literal(value, ty)}).to({dtype_source(ty)})",
                      out, indent)

    def splat(self, op, out, indent):
        res = op.result
        users = self.uses.get(res, [])
        # Gluon broadcasts a scalar against a tensor operand with that tensor's layout.
        if users and all(isinstance(u.opdef, _ELEMENTWISE_USERS) and any(
                isinstance(w.type, TensorType) and w is not res for w in u.operands)
                for u in users):
            self.expr[res] = self.value(op.operands[0])
            return
        ty = res.type
        zero = "0" if not isinstance(ty.element, PointerType) else None
        if zero is None:
            self.bind(res, f"{self.value(op.operands[0])} + gl.zeros({list(ty.shape)}, gl.int32, "
                           f"layout={self.layout(ty.layout)})", out, indent)
        else:
            self.bind(res, f"gl.full({list(ty.shape)}, 0, {dtype_source(ty.element)}, "
                           f"layout={self.layout(ty.layout)}) + {self.value(op.operands[0])}",
                      out, indent)

    def load(self, op, out, indent):
        parts = [self.value(op.operands[0])]
        i = 1
        if op.attrs.get("has_mask"):
            parts.append(f"mask={self.value(op.operands[i])}")
            i += 1
        if op.attrs.get("has_other"):
            parts.append(f"other={self.value(op.operands[i])}")
        if op.attrs.get("cache"):
            parts.append(f"cache_modifier={op.attrs['cache']!r}")
        if op.attrs.get("evict"):
            parts.append(f"eviction_policy={op.attrs['evict']!r}")
        if op.attrs.get("volatile"):
            parts.append("volatile=True")
        self.bind(op.result, f"gl.load({', '.join(parts)})", out, indent)

    def store(self, op, out, indent):
        parts = [self.value(op.operands[0]), self.value(op.operands[1])]
        if op.attrs.get("has_mask"):
            parts.append(f"mask={self.value(op.operands[2])}")
        if op.attrs.get("cache"):
            parts.append(f"cache_modifier={op.attrs['cache']!r}")
        if op.attrs.get("evict"):
            parts.append(f"eviction_policy={op.attrs['evict']!r}")
        out.append("    " * indent + f"gl.store({', '.join(parts)})")

    def combine_helper(self, block: Block, kind: str) -> str:
        """A `@gluon.jit` function for a combine region (shared between equal regions)."""
        saved_expr, saved_names = self.expr, self.names
        self.expr = dict(saved_expr)
        self.names = _Names({"gl", "gluon"})
        params = []
        for a in block.args:
            n = self.names.fresh(a.name_hint if a.name_hint and not a.name_hint[0].isdigit()
                                 else "")
            self.expr[a] = n
            params.append(n)
        lines: List[str] = []
        self.block(block, lines, 1)
        returned = ", ".join(self.value(v) for v in block.terminator.operands)
        lines.append(f"    return {returned}")
        body = "\n".join(lines)
        self.expr, self.names = saved_expr, saved_names
        key = f"{len(params)}|{body}"
        name = self.helper_bodies.get(key)
        if name is None:
            name = f"_{kind}_combine_{len(self.helper_bodies)}"
            self.helper_bodies[key] = name
            self.helpers.append(f"\n@gluon.jit\ndef {name}({', '.join(params)}):\n{body}")
        return name

    def reduction(self, op, out, indent):
        helper = self.combine_helper(op.regions[0].block, "reduce" if isinstance(op.opdef, ReduceOp)
                                     else "scan")
        ins = [self.value(v) for v in op.operands]
        arg = ins[0] if len(ins) == 1 else f"({', '.join(ins)})"
        if isinstance(op.opdef, ReduceOp):
            call = f"gl.reduce({arg}, {op.attrs['axis']}, {helper})"
        else:
            call = (f"gl.associative_scan({arg}, {op.attrs['axis']}, {helper}, "
                    f"reverse={bool(op.attrs.get('reverse'))})")
        if len(op.results) == 1:
            self.bind(op.results[0], call, out, indent)
            return
        names = [self.names.fresh(r.name_hint) for r in op.results]
        out.append("    " * indent + f"{', '.join(names)} = {call}")
        for r, n in zip(op.results, names):
            self.expr[r] = n

    def movement(self, op, args, out, indent):
        """join / split / gather / histogram / map_elementwise: Gluon infers the same result
        layouts the tile passes gave (histogram's is spelled out)."""
        kind = op.opdef
        if isinstance(kind, JoinOp):
            call = f"gl.join({args[0]}, {args[1]})"
        elif isinstance(kind, SplitOp):
            call = f"gl.split({args[0]})"
        elif isinstance(kind, GatherOp):
            call = f"gl.gather({args[0]}, {args[1]}, {op.attrs['axis']})"
        elif isinstance(kind, HistogramOp):
            mask = f", mask={args[1]}" if len(args) > 1 else ""
            call = (f"gl.histogram({args[0]}, {op.attrs['num_bins']}{mask}, "
                    f"layout={self.layout(op.result.type.layout)})")
        else:
            helper = self.combine_helper(op.regions[0].block, "map")
            pack = op.attrs["pack"]
            call = f"gl.map_elementwise({helper}, {', '.join(args)}" + (
                f", pack={pack})" if pack > 1 else ")")
            # The scalar function returns a tuple unless it returns one value (pack 1).
            if len(op.results) == 1 and pack > 1:
                name = self.names.fresh(op.result.name_hint)
                out.append("    " * indent + f"{name}, = {call}")
                self.expr[op.result] = name
                return
        if len(op.results) == 1:
            self.bind(op.result, call, out, indent)
        else:
            names = [self.names.fresh(r.name_hint) for r in op.results]
            out.append("    " * indent + f"{', '.join(names)} = {call}")
            for r, n in zip(op.results, names):
                self.expr[r] = n
        if isinstance(kind, (JoinOp, SplitOp)):
            self.pin_inferred(op, out, indent)

    def pin_inferred(self, op, out, indent):
        """Gluon infers the result layouts of reshape, permute, join and split. Where the
        tile passes gave a result another layout object placing elements alike (a linear
        layout built for the broadcast shape of a size-1 dim), convert to it: free, and the
        ops after it then see the layout the IR has."""
        src = op.operands[0].type
        for r in op.results:
            if isinstance(op.opdef, ReshapeOp):
                inferred = reshaped_layout(src.layout, src.shape, r.type.shape)
            elif isinstance(op.opdef, TransOp):
                inferred = transposed_layout(src.layout, list(op.attrs["order"]), src.shape)
            elif isinstance(op.opdef, JoinOp):
                inferred = joined_layout(src.layout, src.shape)
            else:
                inferred = split_layout(src.layout, src.shape)
            try:
                same = inferred == r.type.layout
            except ValueError:
                same = False
            if not same:
                self.bind(r, f"gl.convert_layout({self.expr[r]}, {self.layout(r.type.layout)})",
                          out, indent)

    def carried(self, values_init: List[str], results, block_args, out, indent) -> List[str]:
        names = []
        for init, r, a in zip(values_init, results, block_args):
            n = self.names.fresh(r.name_hint or a.name_hint)
            out.append("    " * indent + f"{n} = {init}")
            names.append(n)
            self.expr[a] = n
        return names

    def assign_yield(self, names, term, out, indent):
        if not names:
            return
        values = [self.value(v) for v in term.operands]
        if values != names:
            out.append("    " * indent + f"{', '.join(names)} = {', '.join(values)}")

    def body(self, block, names, out, indent):
        """A nested block, its yielded values assigned to `names` (`pass` if empty)."""
        start = len(out)
        self.block(block, out, indent)
        self.assign_yield(names, block.terminator, out, indent)
        if len(out) == start:
            out.append("    " * indent + "pass")

    def for_loop(self, op, out, indent):
        lb, ub, step = (self.value(v) for v in op.operands[:3])
        block = op.regions[0].block
        inits = [self.value(v) for v in op.operands[3:]]
        names = self.carried(inits, op.results, block.args[1:], out, indent)
        iv = self.names.fresh(block.args[0].name_hint or "i")
        self.expr[block.args[0]] = iv
        rng = f"range({lb}, {ub})" if step == "1" else f"range({lb}, {ub}, {step})"
        out.append("    " * indent + f"for {iv} in {rng}:")
        self.body(block, names, out, indent + 1)
        for r, n in zip(op.results, names):
            self.expr[r] = n

    def if_op(self, op, out, indent):
        names = [self.names.fresh(r.name_hint) for r in op.results]
        out.append("    " * indent + f"if {self.value(op.operands[0])}:")
        for k, region in enumerate(op.regions):
            if k == 1:
                out.append("    " * indent + "else:")
            self.body(region.block, names, out, indent + 1)
        for r, n in zip(op.results, names):
            self.expr[r] = n

    def while_loop(self, op, out, indent):
        before, after = op.regions[0].block, op.regions[1].block
        inits = [self.value(v) for v in op.operands]
        names = self.carried(inits, op.results, before.args, out, indent)
        for a, n in zip(after.args, names):
            self.expr[a] = n
        # The condition's ops go into a helper so the `while` test stays one expression.
        helper, extra = self.condition_helper(before)
        out.append("    " * indent + f"while {helper}({', '.join(names + extra)}):")
        self.body(after, names, out, indent + 1)
        for r, n in zip(op.results, names):
            self.expr[r] = n

    def condition_helper(self, block: Block) -> str:
        saved_expr, saved_names = self.expr, self.names
        # Everything the condition reads from outside it (kernel arguments, values of the
        # enclosing loops and branches) is passed in under its name; literals stay inline.
        inner, outer = set(block.args), []
        for op in _walk(block):
            inner.update(op.results)
            for region in op.regions:
                inner.update(region.block.args)
        for op in _walk(block):
            outer += [v for v in op.operands if v not in inner and v not in outer]
        self.expr, extra = {}, []
        for v in outer:
            text = saved_expr.get(v)
            if text is None:
                raise ConversionError(f"value {v!r} is used before it is defined")
            self.expr[v] = text
            if text.isidentifier() and text not in extra:
                extra.append(text)
        self.names = _Names({"gl", "gluon"} | set(extra))
        params = []
        for a in block.args:
            n = self.names.fresh(a.name_hint)
            self.expr[a] = n
            params.append(n)
        lines: List[str] = []
        self.block(block, lines, 1)
        lines.append(f"    return {self.value(block.terminator.operands[0])}")
        name = f"_while_condition_{len(self.helpers)}"
        self.helpers.append(f"\n@gluon.jit\ndef {name}({', '.join(params + extra)}):\n"
                            + "\n".join(lines))
        self.expr, self.names = saved_expr, saved_names
        return name, extra


def _walk(block: Block):
    for op in block.ops:
        yield op
        for region in op.regions:
            yield from _walk(region.block)


def module_to_gluon(module: Module, header: str = "") -> str:
    return GluonPrinter(module).print(header)


def _describe_spec(kernel, spec) -> str:
    parts = [f"{n}={spec.constants[i]!r}" for i, n in enumerate(kernel.arg_names)
             if spec.is_constexpr(i)]
    parts += [f"{n}={_describe_type(spec.arg_types[i], spec.key[i][0])}"
              + (":16" if spec.hints[i] == "D" else "")
              + (" (==1)" if spec.hints[i] == "1" else "")
              for i, n in enumerate(kernel.arg_names) if not spec.is_constexpr(i)]
    return ", ".join(parts)


def _describe_type(ty, key: str) -> str:
    if isinstance(ty, TensorDescriptorType):
        return f"TensorDescriptor({ty.element!r}, block_shape={list(ty.block_shape)})"
    return key


def _launch_warps(module, spec) -> str:
    """The num_warps the printed kernel is launched with: the module's, which the tile
    passes make 8 for a num_warps=4 kernel whose wgmma consumer they warp-specialize."""
    from tile.passes.warp_specialize import REQUESTED_WARPS

    num_warps = int(module.attrs.get("num_warps", spec.num_warps))
    if module.attrs.get(REQUESTED_WARPS) is None:
        return str(num_warps)
    return (f"{num_warps} (the tile kernel's num_warps={module.attrs[REQUESTED_WARPS]}: "
            f"tl.range(warp_specialize=True) runs its wgmma consumer, the default partition, "
            f"on two warpgroups, as Triton 3.6 does)")


def _convert(kernel, spec) -> str:
    module = explicit_layout_module(kernel, spec, persistent=False)
    path = kernel.source_info.file
    try:
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else os.path.basename(path)
    except ValueError:  # another drive (Windows)
        path = os.path.basename(path)
    header = (f"Gluon source converted from the tile kernel `{kernel.__name__}` "
              f"({path}).\n\nSpecialization: {_describe_spec(kernel, spec)}."
              f"\nLaunch with num_warps={_launch_warps(module, spec)}; constexpr parameters "
              f"are folded in"
              + (f"; loops feeding tl.dot pipelined {spec.num_stages} stages deep"
                 if spec.num_stages > 1 else "") + ".\n")
    return module_to_gluon(module, header)


def to_gluon(kernel, *example_args, num_warps: int = 4, target: str = "sm_90a",
             num_stages: int = 3, **kwargs) -> str:
    """Gluon source for `kernel` specialized like a launch with these arguments would be
    (arrays give dtypes and alignment; constexprs are passed by keyword). `target` picks the
    tl.dot instructions, `num_stages` the pipelining depth (as the launch's)."""
    values = kernel.bind_args(example_args, kwargs)
    spec = make_specialization(kernel, values, num_warps, target, num_stages)
    return _convert(kernel, spec)


def to_gluon_for_signature(kernel, signature: Dict[str, str], constexprs=None,
                           num_warps: int = 4, target: str = "sm_90a",
                           num_stages: int = 3) -> str:
    """Like `tile.compile`'s arguments: `signature` maps runtime parameters to "*fp16:16",
    "i32", ...; `constexprs` gives the constexpr values."""
    from shared_codegen.frontend.launch import specialization_for_signature

    spec = specialization_for_signature(kernel, signature, constexprs or {}, num_warps,
                                        target, num_stages)
    return _convert(kernel, spec)


def _load_kernel(path_and_name: str):
    path, _, name = path_and_name.rpartition(":")
    if not path or not name:
        raise SystemExit(f"expected FILE.py:KERNEL, got {path_and_name!r}")
    spec = importlib.util.spec_from_file_location("_converted_source", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(__import__("pathlib").Path(path).resolve().parent))
    spec.loader.exec_module(module)
    kernel = getattr(module, name, None)
    if kernel is None or not getattr(kernel, "is_jit_function", False):
        raise SystemExit(f"{path} has no @tile.jit kernel named {name!r}")
    return kernel


def _parse_pairs(text: Optional[str]) -> Dict[str, str]:
    out = {}
    for item in filter(None, (text or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected NAME=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="tile-to-gluon", description="Print a tile kernel as Gluon source.")
    parser.add_argument("kernel", help="FILE.py:KERNEL")
    parser.add_argument("--signature", required=True,
                        help="runtime parameters, e.g. x_ptr=*fp32:16,n=i32")
    parser.add_argument("--constexpr", default="", help="e.g. BLOCK=1024")
    parser.add_argument("--num-warps", type=int, default=4)
    parser.add_argument("--target", default="sm_90a")
    parser.add_argument("--num-stages", type=int, default=3,
                        help="pipelining depth of loops feeding tl.dot (1: none)")
    parser.add_argument("-o", "--output", help="write here instead of stdout")
    args = parser.parse_args(argv)
    kernel = _load_kernel(args.kernel)
    constexprs = {}
    for k, v in _parse_pairs(args.constexpr).items():
        try:
            constexprs[k] = int(v)
        except ValueError:
            constexprs[k] = {"True": True, "False": False}.get(v, v)
    text = to_gluon_for_signature(kernel, _parse_pairs(args.signature), constexprs,
                                  args.num_warps, args.target, args.num_stages)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
