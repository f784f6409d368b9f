"""MLIR-like text form of the IR.

    #blocked0 = BlockedLayout([4], [32], [4], [0])
    tt.func @add_kernel(%x_ptr: !ptr<fp32>, %n: i32) attributes {kernel} {
      %pid = tt.get_program_id {axis = 0} : i32
      ...
    }

Layouts print once as `#name = ...` aliases at the top; values print with their source name
(`%pid`, `%offsets_1`) when the frontend recorded one, else a number.
"""

from __future__ import annotations

from typing import Dict, List

from shared_codegen.ir.core import Block, Function, Module, Operation, Value
from shared_codegen.ir.types import IRType, TensorType


class _Namer:
    def __init__(self):
        self.names: Dict[int, str] = {}
        self.used: Dict[str, int] = {}
        self.counter = 0

    def name(self, v: Value) -> str:
        key = id(v)
        got = self.names.get(key)
        if got is not None:
            return got
        hint = v.name_hint
        if hint and hint.isidentifier():
            n = self.used.get(hint, 0)
            self.used[hint] = n + 1
            text = f"%{hint}" if n == 0 else f"%{hint}_{n}"
        else:
            text = f"%{self.counter}"
            self.counter += 1
        self.names[key] = text
        return text


class Printer:
    def __init__(self, layout_aliases: bool = True):
        self.namer = _Namer()
        self.aliases: Dict[object, str] = {}
        self.use_aliases = layout_aliases

    # ---- types -------------------------------------------------------------------------
    def layout_name(self, layout) -> str:
        if not self.use_aliases:
            return str(layout)
        got = self.aliases.get(layout)
        if got is None:
            base = getattr(layout, "alias_prefix", None) or type(layout).__name__.replace(
                "Layout", "").lower() or "layout"
            count = sum(1 for n in self.aliases.values() if n.startswith("#" + base))
            got = f"#{base}{count}"
            self.aliases[layout] = got
        return got

    def type(self, ty: IRType) -> str:
        if isinstance(ty, TensorType):
            dims = "x".join(str(s) for s in ty.shape)
            lay = "" if ty.layout is None else ", " + self.layout_name(ty.layout)
            return f"tensor<{dims}x{self.type(ty.element)}{lay}>"
        return str(ty)

    # ---- ops ---------------------------------------------------------------------------
    def value(self, v: Value) -> str:
        return self.namer.name(v)

    def op(self, op: Operation, indent: int, out: List[str]) -> None:
        pad = "  " * indent
        lhs = ", ".join(self.value(r) for r in op.results)
        lhs = f"{lhs} = " if lhs else ""
        operands = ", ".join(self.value(v) for v in op.operands)
        attrs = op.opdef.print_attrs(op) if op.opdef is not None else ""
        types = ", ".join(self.type(r.type) for r in op.results)
        text = f"{pad}{lhs}{op.name}"
        if operands:
            text += " " + operands
        text += attrs
        if types:
            text += " : " + types
        if not op.regions:
            out.append(text)
            return
        out.append(text + " {")
        for i, region in enumerate(op.regions):
            if i:
                out.append(f"{pad}}} {{")
            self.block(region.block, indent + 1, out)
        out.append(pad + "}")

    def block(self, block: Block, indent: int, out: List[str]) -> None:
        if block.args:
            args = ", ".join(f"{self.value(a)}: {self.type(a.type)}" for a in block.args)
            out.append("  " * (indent - 1) + f"^bb({args}):")
        for op in block.ops:
            self.op(op, indent, out)

    def function(self, fn: Function, out: List[str]) -> None:
        args = ", ".join(f"{self.value(a)}: {self.type(a.type)}" for a in fn.args)
        flags = [k for k, v in sorted(fn.attrs.items()) if v is True]
        attrs = f" attributes {{{', '.join(flags)}}}" if flags else ""
        res = ""
        if fn.result_types:
            res = " -> (" + ", ".join(self.type(t) for t in fn.result_types) + ")"
        out.append(f"tt.func @{fn.name}({args}){res}{attrs} {{")
        for op in fn.body.block.ops:
            self.op(op, 1, out)
        out.append("}")


def print_module(module: Module, layout_aliases: bool = True) -> str:
    p = Printer(layout_aliases)
    body: List[str] = []
    for fn in module.functions.values():
        p.function(fn, body)
    header = []
    if module.attrs:
        items = ", ".join(f"{k} = {v!r}" for k, v in sorted(module.attrs.items()))
        header.append(f"module attributes {{{items}}}")
    for layout, name in p.aliases.items():
        header.append(f"{name} = {layout!r}")
    return "\n".join(header + body) + "\n"


def print_function(fn: Function) -> str:
    p = Printer()
    out: List[str] = []
    p.function(fn, out)
    aliases = [f"{name} = {layout!r}" for layout, name in p.aliases.items()]
    return "\n".join(aliases + out) + "\n"
