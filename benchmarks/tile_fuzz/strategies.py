"""Hypothesis strategies for fuzzed tile programs.

`programs()` draws a Program: block sizes, 1 to 3 masked loads of any dtype, then a chain of
nodes, each drawn from one op family of FAMILIES. A family is one function
`(draw, state) -> list of nodes or None` (None: it does not apply to what exists so far); a
new op family (`tl.dot`, say) is one more entry. Every node's dtype follows Triton 3.6's
rules (typing_rules), so the program is valid Triton source; where an op is undefined for
some inputs (integer division by zero, shifts past the width, float-to-int out of range) the
family avoids it or the reference marks those elements unverifiable.
"""

from __future__ import annotations

from hypothesis import strategies as st

from . import typing_rules as R
from .program import FP8, BITS, NUMERIC, Node, Program, is_float, join_kinds

BLOCKS = (1, 2, 4, 8, 16, 32, 64)
MAX_NUMEL = 2048


class State:
    """The nodes drawn so far, the program's rank and block sizes."""

    def __init__(self, rank: int, block_m: int = 1, block_n: int = 1):
        self.rank, self.block_m, self.block_n = rank, block_m, block_n
        self.nodes: list = []

    def add(self, node: Node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def pick(self, draw, want=None) -> int | None:
        """An earlier node (recent ones likelier) whose dtype satisfies `want`."""
        # fp8 values are only cast back (by the family that made them), never used otherwise
        candidates = [i for i, n in enumerate(self.nodes)
                      if n.dtype not in FP8 and (want is None or want(n))]
        if not candidates:
            return None
        recent = candidates[-4:]
        pool = draw(st.sampled_from(["recent", "any"]))
        return draw(st.sampled_from(recent if pool == "recent" else candidates))


def _numeric(node: Node) -> bool:
    return node.dtype != "int1"


INT_LITERALS = (1, 2, 3, 5, 7, -1, -3)
FLOAT_LITERALS = (0.5, 1.5, 2.0, -3.25, 0.0)
BINARY_SYMS = ("+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>", "<", "<=", ">",
               ">=", "==", "!=", "maximum", "minimum", "div_rn", "fdiv")


def binary(draw, s: State):
    sym = draw(st.sampled_from(BINARY_SYMS))
    logical = sym in R.BITWISE or sym in ("==", "!=")
    a = s.pick(draw, None if logical else _numeric)
    if a is None:
        return None
    adt = s.nodes[a].dtype
    literal = None
    # Integer division, remainder and shifts take a literal right operand: a tensor divisor
    # could be 0 and a tensor shift could pass the width, both undefined in Triton.
    needs_literal = sym in R.SHIFT or (sym in ("//", "%") and not is_float(adt))
    if needs_literal or draw(st.integers(0, 3)) == 0:
        if sym in R.SHIFT:
            if is_float(adt):
                return None
            width = BITS[R.computation_type(adt, "int32", False, True)]
            literal = draw(st.integers(0, width - 1))
        elif sym in ("//", "%") and not is_float(adt):
            literal = draw(st.sampled_from((1, 2, 3, 5, 7)))
        elif is_float(adt) and sym not in R.BITWISE:
            literal = draw(st.sampled_from(FLOAT_LITERALS + (1, 2, 3)))
        else:
            literal = draw(st.sampled_from(INT_LITERALS))
            if not R.is_signed(adt):
                literal = abs(literal)
        if sym in ("div_rn", "fdiv", "maximum", "minimum"):
            return None  # functions take tensors here
        typed = R.binary_result(sym, adt, R.literal_dtype(literal), b_literal=True)
        args = (a,)
    else:
        b = s.pick(draw, None if logical else _numeric)
        bdt = s.nodes[b].dtype
        if (adt == "int1") != (bdt == "int1"):
            return None
        typed = R.binary_result(sym, adt, bdt)
        args = (a, b)
    if typed is None:
        return None
    kind = join_kinds(*(s.nodes[i].kind for i in args))
    return [Node("binary", args, (sym, literal), typed[1], kind)]


MATH = ("exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf",
        "floor", "ceil", "sigmoid")


def unary(draw, s: State):
    fn = draw(st.sampled_from(("neg", "abs", "not") + MATH))
    a = s.pick(draw)
    node = s.nodes[a]
    out = []
    if fn in MATH:
        if node.dtype not in ("float32", "float64") or (fn == "sqrt_rn"
                                                        and node.dtype != "float32"):
            # Triton's math takes fp32/fp64 only: cast first, as a user would.
            out.append(Node("cast", (a,), (), "float32", node.kind))
            a = len(s.nodes)
        dtype = "float32" if out else node.dtype
        return out + [Node("unary", (a,), (fn,), dtype, node.kind)]
    if fn == "not" and is_float(node.dtype):
        return None
    if fn in ("neg", "abs") and node.dtype == "int1":
        return None
    return [Node("unary", (a,), (fn,), node.dtype, node.kind)]


def cast(draw, s: State):
    a = s.pick(draw)
    src = s.nodes[a].dtype
    dst = draw(st.sampled_from(NUMERIC + ("int1",)))
    if dst == src or (dst == "int1" and is_float(src)):
        return None  # float -> int1 is fptoui to i1 in Triton: undefined past 0 and 1
    return [Node("cast", (a,), (), dst, s.nodes[a].kind)]


def _compare_with_zero(draw, s: State):
    a = s.pick(draw, _numeric)
    if a is None:
        return None, []
    sym = draw(st.sampled_from(R.COMPARE))
    adt = s.nodes[a].dtype
    literal = 0.0 if is_float(adt) else 0
    typed = R.binary_result(sym, adt, R.literal_dtype(literal), True)
    return Node("binary", (a,), (sym, literal), typed[1], s.nodes[a].kind), a


def where(draw, s: State):
    out = []
    c = s.pick(draw, lambda n: n.dtype == "int1")
    if c is None or draw(st.booleans()):
        node, _ = _compare_with_zero(draw, s)
        if node is None:
            return None
        out.append(node)
        c = len(s.nodes)
    a = s.pick(draw, _numeric)
    b = s.pick(draw, _numeric)
    if a is None:
        return None
    ct = R.computation_type(s.nodes[a].dtype, s.nodes[b].dtype)
    cond_kind = out[0].kind if out else s.nodes[c].kind
    kind = join_kinds(cond_kind, s.nodes[a].kind, s.nodes[b].kind)
    return out + [Node("where", (c, a, b), (), ct, kind)]


def fma(draw, s: State):
    picks = [s.pick(draw, lambda n: n.dtype in ("float32", "float64")) for _ in range(3)]
    if None in picks:
        return None
    dtypes = [s.nodes[i].dtype for i in picks]
    ct = "float64" if "float64" in dtypes else "float32"
    return [Node("fma", tuple(picks), (), ct, join_kinds(*(s.nodes[i].kind for i in picks)))]


def clamp(draw, s: State):
    a = s.pick(draw, lambda n: is_float(n.dtype))
    if a is None:
        return None
    lo = draw(st.sampled_from((-2.0, -0.5, 0.0)))
    hi = draw(st.sampled_from((0.25, 1.0, 3.0)))
    # tl.clamp makes its bounds fp32 tensors (not Python scalars) and takes bf16 to fp32, so
    # fp16 / bf16 inputs give fp32
    dtype = R.computation_type(R.promote_bf16(s.nodes[a].dtype), "float32")
    return [Node("clamp", (a,), (lo, hi), dtype, s.nodes[a].kind)]


REDUCTIONS = ("sum", "max", "min", "argmax", "argmin", "xor_sum", "combine_add",
              "combine_max")


def _axis_result(draw, kind: str):
    """(axis, result kind) of reducing a value of `kind`."""
    if kind == "2d":
        axis = draw(st.sampled_from((0, 1, None)))
        return axis, {0: "row", 1: "col", None: "scalar"}[axis]
    return 0, "scalar"


def reduce(draw, s: State):
    a = s.pick(draw, lambda n: n.kind != "scalar" and n.dtype != "int1")
    if a is None:
        return None
    fn = draw(st.sampled_from(REDUCTIONS))
    dtype = s.nodes[a].dtype
    if fn == "xor_sum" and is_float(dtype):
        return None
    axis, kind = _axis_result(draw, s.nodes[a].kind)
    keep_dims = kind != "scalar" and draw(st.integers(0, 3)) == 0
    out_dtype = {"sum": R.sum_dtype(dtype), "max": R.minmax_dtype(dtype),
                 "min": R.minmax_dtype(dtype), "argmax": "int32", "argmin": "int32",
                 "xor_sum": dtype, "combine_add": dtype, "combine_max": dtype}[fn]
    return [Node("reduce", (a,), (fn, axis, keep_dims), out_dtype, kind)]


def scan(draw, s: State):
    a = s.pick(draw, lambda n: n.kind != "scalar" and n.dtype != "int1")
    if a is None:
        return None
    fn = draw(st.sampled_from(("cumsum", "cumprod", "combine_add", "combine_max")))
    kind = s.nodes[a].kind
    axis = draw(st.sampled_from((0, 1))) if kind == "2d" else 0
    reverse = draw(st.booleans())
    dtype = s.nodes[a].dtype if fn.startswith("combine") else R.scan_dtype(fn, s.nodes[a].dtype)
    return [Node("scan", (a,), (fn, axis, reverse), dtype, kind)]


def fp8_round_trip(draw, s: State):
    """`x.to(fp8).to(float)`: fp8 rounding (RN, saturating) is observable only through a
    cast back; Triton has no fp8 arithmetic outside dot."""
    a = s.pick(draw, lambda n: n.dtype in ("float16", "bfloat16", "float32"))
    if a is None:
        return None
    fp8 = draw(st.sampled_from(FP8))
    back = draw(st.sampled_from(("float16", "bfloat16", "float32")))
    kind = s.nodes[a].kind
    return [Node("cast", (a,), (), fp8, kind), Node("cast", (len(s.nodes),), (), back, kind)]


DOT_TYPES = ("float16", "bfloat16", "float32", "int8")


def dot(draw, s: State):
    """`tl.dot(a, b)` of two whole tiles: square programs only (K = BLOCK_N = BLOCK_M), so the
    product is a tile again; both operands cast to one dot input type first."""
    if s.rank != 2 or s.block_m != s.block_n or s.block_n < 16:
        return None
    dtype = draw(st.sampled_from(DOT_TYPES))
    if dtype == "int8" and s.block_n < 32:
        return None  # Triton needs K >= 32 for 8-bit inputs
    out, args = [], []
    for _ in range(2):
        a = s.pick(draw, lambda n: n.kind == "2d")
        if a is None:
            return None
        if s.nodes[a].dtype != dtype:
            out.append(Node("cast", (a,), (), dtype, "2d"))
            a = len(s.nodes) + len(out) - 1
        args.append(a)
    result = "int32" if dtype == "int8" else "float32"
    return out + [Node("dot", tuple(args), (), result, "2d")]


def trans(draw, s: State):
    """`tl.trans` of a square tile (so the result is a tile of the same shape)."""
    if s.rank != 2 or s.block_m != s.block_n:
        return None
    a = s.pick(draw, lambda n: n.kind == "2d")
    if a is None:
        return None
    return [Node("trans", (a,), (), s.nodes[a].dtype, "2d")]


LOOP_SYMS = ("+", "*", "^", "maximum", "-")


def loop(draw, s: State):
    """`acc = a; for _ in range(trips): acc = acc <op> b`: a loop-carried value, which must
    keep its dtype and shape across iterations."""
    sym = draw(st.sampled_from(LOOP_SYMS))
    a = s.pick(draw, _numeric)
    b = s.pick(draw, _numeric)
    if a is None:
        return None
    acc, other = s.nodes[a], s.nodes[b]
    typed = R.binary_result(sym, acc.dtype, other.dtype)
    if typed is None or typed[1] != acc.dtype or join_kinds(acc.kind, other.kind) != acc.kind:
        return None
    trips = draw(st.integers(0, 3))
    return [Node("loop", (a, b), (sym, trips), acc.dtype, acc.kind)]


def sort_or_flip(draw, s: State):
    """`tl.sort` / `tl.flip` along the last axis of a tile, or of a vector."""
    a = s.pick(draw, lambda n: n.kind != "scalar" and n.dtype != "int1")
    if a is None:
        return None
    node = s.nodes[a]
    dim = 1 if node.kind == "2d" else 0
    if draw(st.booleans()):
        return [Node("sort", (a,), (dim, draw(st.booleans())), node.dtype, node.kind)]
    return [Node("flip", (a,), (dim,), node.dtype, node.kind)]


def _language_has(name: str) -> bool:
    import tile.language as tl

    return name in tl.__all__


FAMILIES = {"binary": binary, "unary": unary, "cast": cast, "where": where, "fma": fma,
            "clamp": clamp, "reduce": reduce, "scan": scan, "fp8": fp8_round_trip,
            "trans": trans, "loop": loop, "sort": sort_or_flip}
if _language_has("dot"):  # tl.dot lands on its own branch
    FAMILIES["dot"] = dot
# How often each family is drawn (a weight per name; families absent here weigh 1).
WEIGHTS = {"binary": 5, "unary": 3, "cast": 3, "reduce": 2, "scan": 1, "where": 2, "dot": 6}


def _load(draw, rank: int) -> Node:
    dtype = draw(st.sampled_from(NUMERIC))
    kind = "row" if rank == 1 else draw(st.sampled_from(("2d", "2d", "row", "col")))
    other = draw(st.sampled_from((0, 1)))
    return Node("load", (), (other,), dtype, kind)


@st.composite
def programs(draw, max_ops: int = 6, families=None):
    families = FAMILIES if families is None else families
    names = sorted(families)
    weighted = [n for n in names for _ in range(WEIGHTS.get(n, 1))]
    rank = draw(st.sampled_from((1, 2)))
    if rank == 1:
        block_m, block_n = 1, draw(st.sampled_from(BLOCKS + (128, 256)))
    else:
        block_m = draw(st.sampled_from(BLOCKS))
        block_n = draw(st.sampled_from([b for b in BLOCKS if b * block_m <= MAX_NUMEL]))
        if draw(st.integers(0, 3)) == 0 and block_m * block_m <= MAX_NUMEL:
            block_n = block_m  # square tiles: what tl.dot of two tiles needs
    state = State(rank, block_m, block_n)
    for _ in range(draw(st.integers(1, 3))):
        state.add(_load(draw, rank))
    # the runtime scalars: 0-d tensors of int32 / fp32 (they promote like tensors)
    int_arg = draw(st.sampled_from((3, -5, 7, 1000, 16)))
    float_arg = draw(st.sampled_from((0.75, -1.5, 3.0)))
    if draw(st.booleans()):
        state.add(Node("arg", (), ("s_int",), "int32", "scalar"))
    if draw(st.booleans()):
        state.add(Node("arg", (), ("s_float",), "float32", "scalar"))
    for _ in range(draw(st.integers(1, max_ops))):
        for _attempt in range(4):
            nodes = families[draw(st.sampled_from(weighted))](draw, state)
            if nodes:
                for node in nodes:
                    state.add(node)
                break
    output = len(state.nodes) - 1
    grid = draw(st.sampled_from((1, 1, 2, 3)))
    num_warps = draw(st.sampled_from((1, 2, 4, 4, 8)))
    return Program(rank, block_m, block_n, tuple(state.nodes), output, grid, num_warps,
                   int_arg, float_arg)
