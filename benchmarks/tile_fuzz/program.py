"""A fuzzed tile program as data: loads, a chain of value nodes, one store; rendered as kernel
source text so the same program runs on our compiler and, by swapping the imports, on
Triton 3.6.

Shapes are kinds, not numbers: a 2-D program works on one (BLOCK_M, BLOCK_N) tile; a value is
the whole tile ('2d'), a vector along the columns ('row', shape (BLOCK_N,), broadcast as
`v[None, :]`), along the rows ('col', (BLOCK_M,), broadcast as `v[:, None]`) or a 0-d tensor
('scalar', what a full reduction gives). A 1-D program has only 'row' and 'scalar'. The real
extents M and N are runtime arguments below the block sizes (ragged edges under masks), so one
compiled kernel serves several extents.
"""

from __future__ import annotations

from dataclasses import dataclass

# Triton's dtype names, as the language spells them (`tl.<name>`), with the signature names.
SIGNATURE = {
    "int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
}
FLOATS = ("float16", "bfloat16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
NUMERIC = INTS + FLOATS
BITS = {"int1": 1, "int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8, "uint16": 16,
        "uint32": 32, "uint64": 64, "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64,
        "float8e4nv": 8, "float8e5": 8}

KIND_ORDER = {"scalar": 0, "row": 1, "col": 1, "2d": 2}


def join_kinds(*kinds: str) -> str:
    """The shape kind of an elementwise result: the broadcast of its operands' kinds."""
    present = set(kinds) - {"scalar"}
    if not present:
        return "scalar"
    if present == {"row"} or present == {"col"}:
        return present.pop()
    return "2d"


FP8 = ("float8e4nv", "float8e5")  # only ever cast to and straight back (see strategies)


def is_float(dtype: str) -> bool:
    return dtype in FLOATS or dtype in FP8


@dataclass(frozen=True)
class Load:
    """Input `x{index}`: loaded under the mask of its kind, `other` filling the masked lanes."""

    dtype: str
    kind: str
    other: int


@dataclass(frozen=True)
class Node:
    """One value. `op` names the family ('load', 'binary', 'unary', 'cast', 'where', 'reduce',
    'scan', 'dot'); `args` are indices of earlier nodes; `attr` is the family's data (the
    operator, a literal operand, the axis ...); `dtype` and `kind` are the result's, as Triton
    3.6's typing rules give them (the strategies compute them)."""

    op: str
    args: tuple
    attr: tuple
    dtype: str
    kind: str


@dataclass(frozen=True)
class Program:
    """A whole kernel: its block sizes, its nodes (loads first) and the node it stores."""

    rank: int  # 1 or 2
    block_m: int  # 1 in 1-D programs
    block_n: int
    nodes: tuple
    output: int
    grid: int = 1  # programs; program p works on slice p of every input and of the output
    num_warps: int = 4
    int_arg: int = 3  # the runtime scalars `s_int` (i32) and `s_float` (fp32)
    float_arg: float = 0.75

    @property
    def loads(self):
        return [n for n in self.nodes if n.op == "load"]

    @property
    def out_dtype(self) -> str:
        return self.nodes[self.output].dtype

    @property
    def out_kind(self) -> str:
        return self.nodes[self.output].kind

    def signature(self) -> dict:
        sig = {f"x{i}_ptr": "*" + SIGNATURE[load.dtype] for i, load in enumerate(self.loads)}
        sig["out_ptr"] = "*" + SIGNATURE[self.out_dtype]
        sig.update({"M": "i32", "N": "i32", "s_int": "i32", "s_float": "fp32"})
        return sig

    def constexprs(self) -> dict:
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n}

    def source(self, frontend: str = "tile") -> str:
        """The kernel's source text; `frontend='triton'` imports Triton instead of tile."""
        return render(self, frontend)


# ---------------------------------------------------------------------------------------------
# Rendering


def _operand(name: str, kind: str, context: str) -> str:
    """`name` broadcast into an expression of kind `context`."""
    if context == "2d" and kind == "row":
        return f"{name}[None, :]"
    if context == "2d" and kind == "col":
        return f"{name}[:, None]"
    return name


def _literal(value) -> str:
    return repr(value)


# User combine functions for tl.reduce / tl.associative_scan (defined in every program).
COMBINE_FNS = {"combine_add": "_fuzz_add", "combine_max": "_fuzz_max"}
COMBINE_SOURCE = """
@triton.jit
def _fuzz_add(a, b):
    return a + b


@triton.jit
def _fuzz_max(a, b):
    return tl.where(a > b, a, b)
"""

UNARY_SPELLING = {
    "neg": "-{0}", "abs": "tl.abs({0})", "not": "~{0}", "exp": "tl.exp({0})",
    "exp2": "tl.exp2({0})", "log": "tl.log({0})", "log2": "tl.log2({0})",
    "sqrt": "tl.sqrt({0})", "sqrt_rn": "tl.sqrt_rn({0})", "rsqrt": "tl.rsqrt({0})",
    "sin": "tl.sin({0})", "cos": "tl.cos({0})", "erf": "tl.erf({0})", "floor": "tl.floor({0})",
    "ceil": "tl.ceil({0})", "sigmoid": "tl.sigmoid({0})",
}
BINARY_FUNCTIONS = {"maximum": "tl.maximum", "minimum": "tl.minimum", "div_rn": "tl.div_rn",
                    "fdiv": "tl.fdiv"}


def _expression(program: Program, node: Node, names: list) -> str:
    kinds = [program.nodes[a].kind for a in node.args]
    ops = [_operand(names[a], k, node.kind) for a, k in zip(node.args, kinds)]
    if node.op == "binary":
        sym, literal = node.attr
        if literal is not None:  # attr[1] is the right operand, a Python number
            ops.append(_literal(literal))
        if sym in BINARY_FUNCTIONS:
            return f"{BINARY_FUNCTIONS[sym]}({ops[0]}, {ops[1]})"
        return f"{ops[0]} {sym} {ops[1]}"
    if node.op == "unary":
        return UNARY_SPELLING[node.attr[0]].format(ops[0])
    if node.op == "cast":
        return f"{ops[0]}.to(tl.{node.dtype})"
    if node.op == "where":
        return f"tl.where({ops[0]}, {ops[1]}, {ops[2]})"
    if node.op == "fma":
        return f"tl.fma({ops[0]}, {ops[1]}, {ops[2]})"
    if node.op == "clamp":
        lo, hi = node.attr
        return f"tl.clamp({ops[0]}, {_literal(lo)}, {_literal(hi)})"
    if node.op == "reduce":
        fn, axis, keep_dims = node.attr
        call = (f"tl.reduce({names[node.args[0]]}, {axis}, {COMBINE_FNS[fn]}"
                if fn in COMBINE_FNS else f"tl.{fn}({names[node.args[0]]}, axis={axis}")
        if not keep_dims:
            return call + ")"
        # keep_dims leaves a (BLOCK_M, 1) / (1, BLOCK_N) tile (or (1,) from a vector);
        # reshape it back to the kind's shape
        shape = {"col": "(BLOCK_M,)", "row": "(BLOCK_N,)", "scalar": "()"}[node.kind]
        return f"tl.reshape({call}, keep_dims=True), {shape})"
    if node.op == "scan":
        fn, axis, reverse = node.attr
        if fn in COMBINE_FNS:
            return (f"tl.associative_scan({names[node.args[0]]}, {axis}, {COMBINE_FNS[fn]}, "
                    f"reverse={reverse})")
        return f"tl.{fn}({names[node.args[0]]}, axis={axis}, reverse={reverse})"
    if node.op == "arg":
        return node.attr[0]  # a kernel argument: a 0-d tensor, not a Python number
    if node.op == "sort":
        return f"tl.sort({names[node.args[0]]}, dim={node.attr[0]}, descending={node.attr[1]})"
    if node.op == "flip":
        return f"tl.flip({names[node.args[0]]}, dim={node.attr[0]})"
    if node.op == "trans":
        return f"tl.trans({names[node.args[0]]})"
    if node.op == "dot":
        return f"tl.dot({names[node.args[0]]}, {names[node.args[1]]})"
    raise ValueError(f"no spelling for node {node}")


# Where slice `pid` of an argument of each kind starts (elements).
SLICE_START = {"2d": "pid * M * N + ", "row": "pid * N + ", "col": "pid * M + ",
               "scalar": "pid"}


def _load_lines(program: Program, index: int, load: Load) -> str:
    ptr = f"x{index}_ptr + {SLICE_START[load.kind]}"
    other = load.other
    if load.kind == "2d":
        return f"tl.load({ptr}offs, mask=mask, other={other})"
    if load.kind == "row":
        return f"tl.load({ptr}rn, mask=rn < N, other={other})"
    return f"tl.load({ptr}rm, mask=rm < M, other={other})"


def render(program: Program, frontend: str = "tile") -> str:
    if frontend == "tile":
        header = "import tile as triton\nimport tile.language as tl\n"
    else:
        header = "import triton\nimport triton.language as tl\n"
    args = [f"x{i}_ptr" for i in range(len(program.loads))]
    lines = [header, COMBINE_SOURCE, "", "@triton.jit",
             f"def kernel({', '.join(args)}, out_ptr, M, N, s_int, s_float, "
             f"BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):",
             "    pid = tl.program_id(0)",
             "    rn = tl.arange(0, BLOCK_N)"]
    if program.rank == 2:
        lines += ["    rm = tl.arange(0, BLOCK_M)",
                  "    mask = (rm[:, None] < M) & (rn[None, :] < N)",
                  "    offs = rm[:, None] * N + rn[None, :]"]
    names = []
    load_index = 0
    for i, node in enumerate(program.nodes):
        name = f"v{i}"
        names.append(name)
        if node.op == "load":
            expr = _load_lines(program, load_index, Load(node.dtype, node.kind, node.attr[0]))
            load_index += 1
        elif node.op == "loop":
            sym, trips = node.attr
            acc, other = names[node.args[0]], names[node.args[1]]
            other = _operand(other, program.nodes[node.args[1]].kind, node.kind)
            step = (f"{BINARY_FUNCTIONS[sym]}({name}, {other})" if sym in BINARY_FUNCTIONS
                    else f"{name} {sym} {other}")
            lines += [f"    {name} = {acc}", f"    for _ in range({trips}):",
                      f"        {name} = {step}"]
            expr = None
        else:
            expr = _expression(program, node, names)
        if expr is not None:
            lines.append(f"    {name} = {expr}")
        if node.op != "load":
            # the dtype Triton 3.6's rules give: a compile error where a compiler disagrees,
            # even when the values would not show it
            lines.append(f"    tl.static_assert({name}.dtype == tl.{node.dtype}, "
                         f"\"{name} should be {node.dtype}\")")
    out = names[program.output]
    kind = program.out_kind
    ptr = f"out_ptr + {SLICE_START[kind]}"
    if kind == "2d":
        lines.append(f"    tl.store({ptr}offs, {out}, mask=mask)")
    elif kind == "row":
        lines.append(f"    tl.store({ptr}rn, {out}, mask=rn < N)")
    elif kind == "col":
        lines.append(f"    tl.store({ptr}rm, {out}, mask=rm < M)")
    else:
        lines.append(f"    tl.store({ptr}, {out})")
    return "\n".join(lines) + "\n"


def out_shape(program: Program, m: int, n: int) -> tuple:
    """The stored array's shape at extents (m, n): one slice per program."""
    return (program.grid,) + {"2d": (m, n), "row": (n,), "col": (m,), "scalar": ()}[
        program.out_kind]


def load_shape(program: Program, kind: str, m: int, n: int) -> tuple:
    return (program.grid,) + {"2d": (m, n), "row": (n,), "col": (m,)}[kind]
