"""The IR's structure: values, operations, blocks, regions, functions and modules.

SSA values; structured control flow with regions that hold one block each (like MLIR's scf):
`scf.for`, `scf.if` and `scf.while` carry loop values through block arguments and `scf.yield`.

Every op name is defined once, by an `OpDef` subclass in its family's folder
(`shared_codegen/ops/<family>/definition.py`: builder, type rule, traits, verifier, printer,
interpreter rule), whose `lowering.py` registers the lowering rule next door
(`lowering_rule`). `Operation.opdef` finds the definition by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from shared_codegen.errors import CompilationError
from shared_codegen.ir.types import FunctionType, IRType


@dataclass(frozen=True)
class Location:
    """Where an op came from in the user's source: file, line, column and the source line."""

    file: str = "<unknown>"
    line: int = 0
    col: int = 0
    source_line: str = ""
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


UNKNOWN_LOC = Location()


class Value:
    """An SSA value: the result of an op or an argument of a block."""

    __slots__ = ("type", "owner", "index", "name_hint")

    def __init__(self, type: IRType, owner=None, index: int = 0, name_hint: str = ""):
        self.type = type
        self.owner = owner  # Operation or Block
        self.index = index
        self.name_hint = name_hint

    @property
    def defining_op(self) -> Optional["Operation"]:
        return self.owner if isinstance(self.owner, Operation) else None

    def __repr__(self) -> str:
        return f"<Value {self.name_hint or '?'}: {self.type}>"


class Block:
    """A list of ops with typed arguments. Regions here hold exactly one block."""

    __slots__ = ("args", "ops", "parent")

    def __init__(self, arg_types: Sequence[IRType] = (), parent=None):
        self.args: List[Value] = [Value(t, self, i) for i, t in enumerate(arg_types)]
        self.ops: List[Operation] = []
        self.parent = parent  # the Region

    @property
    def terminator(self) -> Optional["Operation"]:
        return self.ops[-1] if self.ops else None


class Region:
    __slots__ = ("block", "parent")

    def __init__(self, arg_types: Sequence[IRType] = (), parent=None):
        self.block = Block(arg_types, self)
        self.parent = parent  # the Operation or Function


class Operation:
    """One op: a name, operands, typed results, attributes and nested regions."""

    __slots__ = ("name", "operands", "results", "attrs", "regions", "loc", "parent", "opdef")

    def __init__(self, name: str, operands: Sequence[Value], result_types: Sequence[IRType],
                 attrs: Optional[Dict[str, Any]] = None, regions: Sequence[Region] = (),
                 loc: Location = UNKNOWN_LOC):
        self.name = name
        self.opdef = lookup_opdef(name)
        self.operands: List[Value] = list(operands)
        self.results: List[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: Dict[str, Any] = dict(attrs or {})
        self.regions: List[Region] = list(regions)
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Optional[Block] = None

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    @property
    def parent_op(self) -> Optional["Operation"]:
        """The op whose region holds this op (None at a function's top level or detached)."""
        region = self.parent.parent if self.parent is not None else None
        owner = region.parent if region is not None else None
        return owner if isinstance(owner, Operation) else None

    @property
    def outermost_op(self) -> "Operation":
        """This op, or the outermost op whose regions hold it: an op of the function's body
        (or of a detached block)."""
        top = self
        while top.parent_op is not None:
            top = top.parent_op
        return top

    def ancestor_in(self, block: "Block") -> Optional["Operation"]:
        """The op of `block` that is this op or holds it; None when this op is outside."""
        op = self
        while op is not None and op.parent is not block:
            op = op.parent_op
        return op

    def users(self) -> List["Operation"]:
        """The ops of this op's function (or detached block) that read one of its results:
        the IR keeps no use lists, so this walks them all."""
        block = self.outermost_op.parent
        results = self.results
        return [user for top in (block.ops if block is not None else ())
                for user in top.walk() if any(v is r for v in user.operands for r in results)]

    def walk(self) -> Iterator["Operation"]:
        """This op and every op nested in its regions, pre-order."""
        yield self
        for r in self.regions:
            for op in r.block.ops:
                yield from op.walk()

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.loc}>"


class Function:
    """A function: typed arguments (the entry block's arguments) and a body region."""

    def __init__(self, name: str, arg_types: Sequence[IRType], arg_names: Sequence[str] = (),
                 result_types: Sequence[IRType] = (), attrs: Optional[Dict[str, Any]] = None,
                 loc: Location = UNKNOWN_LOC):
        self.name = name
        self.body = Region(arg_types, self)
        for v, n in zip(self.body.block.args, arg_names):
            v.name_hint = n
        self.result_types = list(result_types)
        self.attrs = dict(attrs or {})
        self.loc = loc

    @property
    def args(self) -> List[Value]:
        return self.body.block.args

    @property
    def type(self) -> FunctionType:
        return FunctionType(tuple(a.type for a in self.args), tuple(self.result_types))

    def walk(self) -> Iterator[Operation]:
        for op in self.body.block.ops:
            yield from op.walk()


class Module:
    """A compiled unit: its functions (the kernel among them) and module attributes such as
    `num_warps`, `threads_per_warp` and `target`."""

    def __init__(self, attrs: Optional[Dict[str, Any]] = None):
        self.functions: Dict[str, Function] = {}
        self.attrs: Dict[str, Any] = dict(attrs or {})
        # What the backend stages computed for later ones (the axis analysis, the LLVM IR, the
        # PTX...): not IR, so not printed; decisions are also recorded as op attributes.
        self.stage_results: Dict[str, Any] = {}

    def add(self, fn: Function) -> Function:
        self.functions[fn.name] = fn
        return fn

    @property
    def kernel(self) -> Function:
        for fn in self.functions.values():
            if fn.attrs.get("kernel"):
                return fn
        raise LookupError("module has no kernel function")

    def walk(self) -> Iterator[Operation]:
        for fn in self.functions.values():
            yield from fn.walk()


# ---- op definitions ------------------------------------------------------------------

_OPDEFS: Dict[str, "OpDef"] = {}


class OpDef:
    """The rules for one op name. Subclasses live in the op family's module.

    - `verify(op)` raises `VerificationError` when the op is malformed.
    - `print_attrs(op)` returns the text printed after the operands (attributes).
    - `interpret(op, frame)` computes the results from numpy values (see interpreter).
    - `lower(op, ctx)` emits LLVM IR (see lowering).

    Traits (class attributes, read by passes, analyses and the converter, which keep no op
    lists): `layout_rule`, `axis_rule`, `pure`, `cheap`, `memory_effects`, `needs_all_warps`,
    `user_name`, `spelling`. Most ops declare one to three of them; the defaults say
    "nothing known".
    """

    name: str = ""

    # ---- traits: what passes, analyses and the converter ask instead of keeping op lists ----
    # How the layouts of the op's tensors relate (`shared_codegen.layouts.relations`).
    layout_rule: Any = None
    # `rule(op, operand_infos) -> result_infos` for axis analysis; None: nothing is known.
    axis_rule: Optional[Callable] = None
    # Ops whose regions carry values (scf.for/if/while): `rule(analysis, op)` visits them.
    axis_region_rule: Optional[Callable] = None
    # No side effects, so `cse` merges duplicates. A family spanning several op names may give
    # the subset of its names instead of True (the same for `cheap`).
    pure: Any = False
    # Index arithmetic: recomputed per use rather than converted between layouts.
    cheap: Any = False
    # Ends its block and hands its operands to the enclosing op (scf.yield, scf.condition,
    # tt.return, tt.reduce.return): the interpreter and lowering stop the block there.
    terminator: bool = False
    # Which memories the op reads and writes (`MemoryEffect` members).
    memory_effects: frozenset = frozenset()
    # Every warp of the program (or partition) must reach the op together (barriers, wgmma
    # waits, cluster barriers), or its effect is the whole program's (prints, asserts): it
    # may not sit in a branch that only some warps take (`gl.warp_any`).
    needs_all_warps: bool = False
    # What the user wrote, for error messages (the explicit-layout language's spelling).
    user_name: Optional[str] = None
    # How kernel source spells the op, for the converter: a Python operator ("+") or the
    # `triton.language` builtin both languages share ("maximum"); a family spanning several
    # op names maps each name to its spelling.
    spelling: Any = None

    def is_pure(self, op: "Operation") -> bool:
        return _holds(self.pure, op)

    def is_cheap(self, op: "Operation") -> bool:
        return _holds(self.cheap, op)

    @classmethod
    def name_spelled(cls, spelling: str) -> str:
        """The op name of this family that kernel source spells `spelling` (builtins build
        ops by what the user wrote, the definition owns the names)."""
        names = [name for name, spelled in cls.spelling.items() if spelled == spelling]
        if len(names) != 1:
            raise LookupError(f"{cls.__name__} has {len(names)} ops spelled {spelling!r}")
        return names[0]

    def spelling_of(self, op: "Operation") -> Optional[str]:
        if isinstance(self.spelling, dict):
            return self.spelling.get(op.name)
        return self.spelling

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        names = cls.__dict__.get("names") or ((cls.name,) if cls.__dict__.get("name") else ())
        for n in names:
            if n in _OPDEFS and type(_OPDEFS[n]) is not cls:
                raise RuntimeError(f"op {n!r} defined twice: {type(_OPDEFS[n])} and {cls}")
            _OPDEFS[n] = cls()

    def verify(self, op: Operation) -> None:
        pass

    def print_attrs(self, op: Operation) -> str:
        return format_attrs(op.attrs)

    def interpret(self, op: Operation, frame) -> Optional[Sequence[Any]]:
        raise NotImplementedError(f"no interpreter rule for {op.name}")

    # Set by `lowering_rule` from the family's lowering module.
    lower_rule: Optional[Callable[[Operation, Any], Optional[Sequence[Any]]]] = None

    def lower(self, op: Operation, ctx) -> Optional[Sequence[Any]]:
        rule = type(self).lower_rule
        if rule is None:
            raise NotImplementedError(f"no lowering rule for {op.name}")
        return rule(op, ctx)


def _holds(trait, op: Operation) -> bool:
    return op.name in trait if isinstance(trait, frozenset) else bool(trait)


class MemoryEffect:
    """The memories an op touches (its `memory_effects` trait)."""

    READ_GLOBAL = "read global"
    WRITE_GLOBAL = "write global"
    READ_SHARED = "read shared"
    WRITE_SHARED = "write shared"


def lowering_rule(*opdef_classes):
    """Register the decorated `fn(op, ctx)` as the lowering rule of `opdef_classes`. An op
    family's `lowering.py` registers its rules this way, so the definition module never
    imports the lowering toolkit (llvmlite) and the lowering module names its ops by class."""

    def register(fn):
        for cls in opdef_classes:
            cls.lower_rule = staticmethod(fn)
        return fn

    return register


def lookup_opdef(name: str) -> Optional[OpDef]:
    return _OPDEFS.get(name)


def all_opdefs() -> Dict[str, OpDef]:
    """Every registered op name and its definition (the traits and architecture tests walk
    them)."""
    return dict(_OPDEFS)


def format_attrs(attrs: Dict[str, Any]) -> str:
    if not attrs:
        return ""
    items = []
    for k in sorted(attrs):
        v = attrs[k]
        if isinstance(v, str):
            v = f'"{v}"'
        elif isinstance(v, (list, tuple)):
            v = "[" + ", ".join(str(x) for x in v) + "]"
        items.append(f"{k} = {v}")
    return " {" + ", ".join(items) + "}"


class VerificationError(CompilationError):
    """Raised by verifiers; carries the op so messages can name its source line."""

    def __init__(self, message: str, op: Optional[Operation] = None):
        if op is not None and op.loc.line:
            message = f"{op.loc}: {op.name}: {message}"
        super().__init__(message)
        self.op = op
        # The message already names the line; `line` tells the frontend not to add it again.
        if op is not None and op.loc.line:
            self.file, self.line = op.loc.file, op.loc.line


def replace_all_uses(root_ops: List[Operation], old: Value, new: Value) -> None:
    """Replace every use of `old` by `new` in the ops (and nested ops) of `root_ops`."""
    for top in root_ops:
        for op in top.walk():
            for i, v in enumerate(op.operands):
                if v is old:
                    op.operands[i] = new


def clone_op(op: Operation, mapping: Dict[Value, Value]) -> Operation:
    """A copy of `op` and of everything nested in it, not yet in a block: operands read
    through `mapping` (values without an entry are shared with the original), fresh results
    and block arguments, which `mapping` records."""
    regions = []
    for region in op.regions:
        copy = Region([a.type for a in region.block.args])
        for old, new in zip(region.block.args, copy.block.args):
            new.name_hint = old.name_hint
            mapping[old] = new
        for inner in region.block.ops:
            nested = clone_op(inner, mapping)
            nested.parent = copy.block
            copy.block.ops.append(nested)
        regions.append(copy)
    new = Operation(op.name, [mapping.get(v, v) for v in op.operands],
                    [r.type for r in op.results], dict(op.attrs), regions, op.loc)
    for old, result in zip(op.results, new.results):
        result.name_hint = old.name_hint
        mapping[old] = result
    return new


def walk_block(block: Block) -> Iterator[Operation]:
    for op in block.ops:
        yield from op.walk()


Rule = Callable[[Operation], Optional[Operation]]
