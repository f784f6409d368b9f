"""The pass manager: a flat list of named passes run in order over a module.

    from shared_codegen.ir.passes import run_pipeline
    run_pipeline(module, [("cse", cse), ("lower_to_llvm", lower_to_llvm)])

A pass is `fn(module) -> None` (it rewrites in place). After each one the module is verified
(when `verify`) so a broken rewrite is reported under the name of the pass that broke it, and,
when a dump folder is given (the `dump_dir` argument, else `SC_DUMP_IR_DIR`), the printed IR is
written to `<dir>/<NN>-<pass name>.mlir`, with `00-input.mlir` holding what came in.

The same driver runs a frontend's whole stages list (`tile/stages.py`, `gluon/stages.py`), down
to the cubin, so a stage may return `Notes(text_fn)`: its dump is then the printed IR followed
by `text_fn()` as `//` comments, for what is not IR (the axis analysis' facts, the LLVM IR, the
PTX); `text_fn` only runs when dumping.

Rewrites inside a pass are small named rules, `rule(op) -> bool` (True when it changed
something), applied by `apply_rules` until none fires.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from shared_codegen.errors import CompilationError
from shared_codegen.ir.core import Block, Module, Operation, Value, VerificationError
from shared_codegen.ir.printer import print_module
from shared_codegen.ir.verifier import verify_module

Pass = Callable[[Module], None]
NamedPass = Tuple[str, Pass]
OpRule = Callable[[Operation], bool]


@dataclass(frozen=True)
class Notes:
    """What a stage decided or produced beyond the IR, for its dump: `text()` is called only
    when dumping."""

    text: Callable[[], str]


class PassError(CompilationError, RuntimeError):
    """A pass raised or left the module malformed; names the pass."""

    def __init__(self, pass_name: str, cause: Exception):
        super().__init__(f"after pass {pass_name!r}: {cause}", cause=cause)
        self.pass_name = pass_name


def dump_dir_from_env() -> Optional[str]:
    """`SC_DUMP_IR_DIR` through the config module (which declares it), else the raw env."""
    try:
        from shared_codegen import config
    except ImportError:  # pragma: no cover - config is part of the package
        return os.environ.get("SC_DUMP_IR_DIR") or None
    return config.get("SC_DUMP_IR_DIR") or None


def _file_name(index: int, name: str) -> str:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    return f"{index:02d}-{safe}.mlir"


def _dump(dump_dir: str, index: int, name: str, module: Module, result=None) -> None:
    os.makedirs(dump_dir, exist_ok=True)
    content = print_module(module)
    if isinstance(result, Notes):
        notes = result.text().rstrip("\n")
        content += "".join(f"// {line}\n" if line else "//\n" for line in notes.split("\n"))
    with open(os.path.join(dump_dir, _file_name(index, name)), "w") as f:
        f.write(content)


def run_pipeline(module: Module, passes: Sequence[NamedPass], dump_dir: Optional[str] = None,
                 verify: bool = True) -> Module:
    """Run `passes` in order on `module` (in place) and return it."""
    names = [name for name, _ in passes]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"pass names must be unique in a pipeline, repeated: {sorted(dupes)}")
    dump_dir = dump_dir or dump_dir_from_env()
    if dump_dir:
        _dump(dump_dir, 0, "input", module)
    for index, (name, fn) in enumerate(passes, start=1):
        try:
            result = fn(module)
            if verify:
                verify_module(module)
        except VerificationError as exc:
            if dump_dir:  # keep the broken IR next to the good ones for the bug report
                _dump(dump_dir, index, name + "-FAILED", module)
            raise PassError(name, exc) from exc
        if dump_dir:
            _dump(dump_dir, index, name, module, result)
    return module


# ---- rule application ------------------------------------------------------------------------

def _all_ops(module: Module) -> List[Operation]:
    return list(module.walk())


def apply_rules(module: Module, rules: Iterable[OpRule], max_rounds: int = 32) -> int:
    """Apply each rule to every op (post-order snapshot) until a round changes nothing.

    Returns how many times a rule fired. Rules may erase the op they are given; ops erased
    earlier in a round (no longer in a block) are skipped."""
    rules = list(rules)
    fired = 0
    for _ in range(max_rounds):
        changed = False
        for op in _all_ops(module):
            for rule in rules:
                if op.parent is None or op not in op.parent.ops:
                    break
                if rule(op):
                    fired += 1
                    changed = True
        if not changed:
            return fired
    return fired


def erase_op(op: Operation) -> None:
    """Remove `op` from its block (its results must have no uses left)."""
    op.parent.ops.remove(op)
    op.parent = None


def encloses(op: Operation, v: Value) -> bool:
    """Whether `v` is defined inside `op`'s regions (a block argument or an op's result at
    any depth): a value `op` cannot read from before it runs."""
    owner = v.owner
    if isinstance(owner, Block):  # an argument of a block: the op holding that block on
        node = owner.parent.parent if owner.parent is not None else None
    else:  # a result: the ops holding its op
        node = owner.parent_op
    while isinstance(node, Operation):
        if node is op:
            return True
        node = node.parent_op
    return False


def insert_before(anchor: Operation, op: Operation) -> Operation:
    block = anchor.parent
    block.ops.insert(block.ops.index(anchor), op)
    op.parent = block
    return op


def insert_after(anchor: Operation, op: Operation) -> Operation:
    block = anchor.parent
    block.ops.insert(block.ops.index(anchor) + 1, op)
    op.parent = block
    return op


def move_to_end(ops: Sequence[Operation], block) -> None:
    """Append `ops` to `block` in order, taking each out of the block it is in."""
    for op in list(ops):
        if op.parent is not None and op in op.parent.ops:
            op.parent.ops.remove(op)
        block.ops.append(op)
        op.parent = block


__all__ = ["run_pipeline", "apply_rules", "PassError", "erase_op", "encloses", "insert_before",
           "insert_after", "move_to_end", "dump_dir_from_env", "NamedPass", "Notes"]
