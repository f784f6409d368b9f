"""``gluon-layouts`` / ``python -m gluon.layouts``: print, plan and draw layouts.

Layouts are written as in kernels, e.g. ``"BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])"``.
The text is parsed with ``ast`` and evaluated by hand: only layout constructors, lists,
tuples, ints, keyword arguments and names bound with ``--let NAME=LAYOUT`` are allowed, so a
layout string can never run code.
"""

from __future__ import annotations

import argparse
import ast
import sys

import numpy as np

__all__ = ["main", "parse_layout", "show_text", "convert_text", "LayoutSyntaxError"]


class LayoutSyntaxError(ValueError):
    """A layout string that does not parse or evaluate; the message points at the part."""


def _constructors() -> dict:
    """Every layout family the package exports, by class name."""
    import importlib

    names = {}
    for module_name in ("gluon.layouts", "shared_codegen.layouts.distributed",
                        "shared_codegen.layouts.shared"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name in getattr(module, "__all__", dir(module)):
            obj = getattr(module, name, None)
            if isinstance(obj, type) and (name.endswith("Layout")) and not name.startswith("_"):
                names[name] = obj
    names.pop("DistributedLayout", None)
    names.pop("LinearLayout", None)  # takes dicts; DistributedLinearLayout covers it
    names.pop("SharedLayout", None)
    return names


def _segment(text: str, node: ast.AST) -> str:
    return ast.get_source_segment(text, node) or ast.dump(node)


def parse_layout(text: str, names: dict | None = None):
    """Evaluate one layout expression safely; ``names`` binds extra layout names."""
    constructors = _constructors()
    bound = dict(names or {})
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise LayoutSyntaxError(f"cannot parse layout {text!r}: {error.msg} at column "
                                f"{(error.offset or 0)}") from None
    source = text.strip()

    def ev(node):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (int, bool)) or node.value is None:
                return node.value
            raise LayoutSyntaxError(f"in {source!r}: {_segment(source, node)} is not allowed "
                                    f"(only ints, lists and layout constructors)")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = ev(node.operand)
            if isinstance(value, int):
                return -value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [ev(e) for e in node.elts]
        if isinstance(node, ast.Name):
            if node.id in bound:
                return bound[node.id]
            if node.id in constructors:
                raise LayoutSyntaxError(f"in {source!r}: {node.id} must be called, e.g. "
                                        f"{node.id}(...)")
            raise LayoutSyntaxError(f"in {source!r}: unknown name {node.id!r}; allowed: "
                                    f"{', '.join(sorted(constructors) + sorted(bound))}")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in constructors:
                raise LayoutSyntaxError(f"in {source!r}: {_segment(source, node.func)} is not "
                                        f"a layout constructor; allowed: "
                                        f"{', '.join(sorted(constructors))}")
            args = [ev(a) for a in node.args]
            kwargs = {}
            for kw in node.keywords:
                if kw.arg is None:
                    raise LayoutSyntaxError(f"in {source!r}: ** arguments are not allowed")
                kwargs[kw.arg] = ev(kw.value)
            try:
                return constructors[node.func.id](*args, **kwargs)
            except Exception as error:  # the family's own message, with the failing part
                raise LayoutSyntaxError(f"in {source!r}: {_segment(source, node)} failed: "
                                        f"{error}") from None
        raise LayoutSyntaxError(f"in {source!r}: {_segment(source, node)} is not allowed "
                                f"(only ints, lists and layout constructors)")

    return ev(tree.body)


def _parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(p) for p in text.lower().replace(",", "x").split("x") if p)
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 64x64, got {text!r}") from None
    if not shape or any(s <= 0 or s & (s - 1) for s in shape):
        raise argparse.ArgumentTypeError(f"shape entries must be powers of two, got {text!r}")
    return shape


def _parse_index(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--who takes i,j, got {text!r}") from None


# -- text output ----------------------------------------------------------------------------

def _matrix_text(ll) -> str:
    """Bit matrix with labelled rows (out bits) and columns (in bits)."""
    matrix = ll.bit_matrix()
    cols = [f"{name[0]}{i}" for name in ll.in_dims for i in range(ll.in_dim_size_log2(name))]
    rows = [f"{name}[{i}]" for name in ll.out_dims for i in range(ll.out_dim_size_log2(name))]
    width = max([len(r) for r in rows] + [1])
    out = [" " * width + " | " + " ".join(f"{c:>3}" for c in cols)]
    for label, row in zip(rows, matrix):
        out.append(f"{label:>{width}} | " + " ".join(f"{int(b):>3}" for b in row))
    return "\n".join(out)


def _holders(ll, shape):
    """For each element (row-major over shape): list of (warp, lane, register)."""
    from shared_codegen.layouts.planner import placement
    place = placement(ll, shape)                         # [warp, lane, reg] -> flat (dim0 minor)
    holders: dict[int, list] = {}
    for (w, lane, r), flat in np.ndenumerate(place):
        holders.setdefault(int(flat), []).append((w, lane, r))
    return holders


def _coords(flat: int, shape) -> tuple[int, ...]:
    out = []
    for s in shape:
        out.append(flat % s)
        flat //= s
    return tuple(out)


def _flat(index, shape) -> int:
    flat, stride = 0, 1
    for i, s in zip(index, shape):
        flat += i * stride
        stride *= s
    return flat


def show_text(layout, shape, who=None, max_cells: int = 32) -> str:
    from shared_codegen.layouts.planner import as_linear_layout
    ll = as_linear_layout(layout, shape)
    lines = [f"layout: {layout!r}", f"shape: {'x'.join(map(str, shape))}", "bases:"]
    lines += [" " + line for line in str(ll).strip("\n").splitlines()]
    lines += ["bit matrix (rows: element bits, columns: r=register l=lane w=warp b=block):",
              _matrix_text(ll)]
    holders = _holders(ll, shape)
    if who is not None:
        if len(who) != len(shape) or any(not 0 <= i < s for i, s in zip(who, shape)):
            raise ValueError(f"--who {','.join(map(str, who))} is outside shape "
                             f"{'x'.join(map(str, shape))}")
        found = holders.get(_flat(who, shape), [])
        lines.append(f"element {tuple(who)} is held by {len(found)} location(s):")
        lines += [f"  warp {w} lane {lane} (thread {w * 32 + lane}) register {r}"
                  for w, lane, r in found]
        return "\n".join(lines)
    if len(shape) != 2:
        lines.append("(element table is drawn for 2-D tensors only)")
        return "\n".join(lines)
    rows, cols = shape
    shown_r, shown_c = min(rows, max_cells), min(cols, max_cells)
    lines.append(f"element (i, j) -> T<thread>:<register> (thread = 32*warp + lane; '*' = "
                 f"also held elsewhere){' first %dx%d shown' % (shown_r, shown_c) if (shown_r, shown_c) != (rows, cols) else ''}:")
    cells = {}
    for i in range(shown_r):
        for j in range(shown_c):
            found = holders.get(_flat((i, j), shape), [])
            if not found:
                cells[i, j] = "-"
                continue
            w, lane, r = found[0]
            cells[i, j] = f"T{w * 32 + lane}:{r}" + ("*" if len(found) > 1 else "")
    width = max(len(c) for c in cells.values())
    head = "     " + " ".join(f"{j:>{width}}" for j in range(shown_c))
    lines.append(head)
    for i in range(shown_r):
        lines.append(f"{i:>4} " + " ".join(f"{cells[i, j]:>{width}}" for j in range(shown_c)))
    return "\n".join(lines)


def convert_text(src, dst, shape, dtype) -> str:
    from shared_codegen.layouts.planner import conversion_matrix, plan_conversion
    cvt = conversion_matrix(src, dst, shape)
    plan = plan_conversion(src, dst, shape, dtype)
    lines = [f"src: {src!r}", f"dst: {dst!r}", f"shape: {'x'.join(map(str, shape))}, "
             f"dtype: {dtype}",
             "conversion dst^-1 o src (where each source bit lands in the destination):"]
    lines += [" " + line for line in str(cvt).strip("\n").splitlines()]
    lines += ["conversion bit matrix:", _matrix_text(cvt), plan.describe()]
    return "\n".join(lines)


# -- entry point ------------------------------------------------------------------------------

def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gluon-layouts", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--shape", type=_parse_shape, required=True, help="e.g. 64x64")
        p.add_argument("--let", action="append", default=[], metavar="NAME=LAYOUT",
                       help="bind a name usable inside layout strings (e.g. a parent)")

    show = sub.add_parser("show", help="bases, bit matrix and who holds each element")
    show.add_argument("layout")
    common(show)
    show.add_argument("--who", type=_parse_index, help="i,j: which threads hold element (i,j)")
    show.add_argument("--max", type=int, default=32, help="table rows/cols shown (32)")

    convert = sub.add_parser("convert", help="conversion matrix, plan and cost")
    convert.add_argument("src")
    convert.add_argument("dst")
    common(convert)
    convert.add_argument("--dtype", default="fp16", help="fp16, bf16, fp32, fp8, i8 ...")

    render = sub.add_parser("render", help="draw a layout, or a conversion side by side")
    render.add_argument("layouts", nargs="+", metavar="LAYOUT", help="LAYOUT or SRC DST")
    common(render)
    render.add_argument("-o", "--output", required=True, help="out.png or out.svg")
    return parser


def _bindings(lets) -> dict:
    names = {}
    for item in lets:
        if "=" not in item:
            raise LayoutSyntaxError(f"--let expects NAME=LAYOUT, got {item!r}")
        name, text = item.split("=", 1)
        if not name.strip().isidentifier():
            raise LayoutSyntaxError(f"--let name {name.strip()!r} is not an identifier")
        names[name.strip()] = parse_layout(text, names)
    return names


def main(argv=None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        names = _bindings(args.let)
        if args.command == "show":
            print(show_text(parse_layout(args.layout, names), args.shape, args.who, args.max))
        elif args.command == "convert":
            src, dst = parse_layout(args.src, names), parse_layout(args.dst, names)
            print(convert_text(src, dst, args.shape, args.dtype))
        else:
            from gluon.layouts.render import render_conversion, render_layout
            layouts = [parse_layout(t, names) for t in args.layouts]
            if len(layouts) == 1:
                render_layout(layouts[0], args.shape, args.output)
            elif len(layouts) == 2:
                render_conversion(layouts[0], layouts[1], args.shape, args.output)
            else:
                parser.error("render takes LAYOUT or SRC DST")
            print(f"wrote {args.output}")
    except (ValueError, TypeError, NotImplementedError, ImportError) as error:
        print(f"gluon-layouts: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
