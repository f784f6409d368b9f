"""The IR builder: an insertion point plus the current source location.

Op modules build through `Builder.create`; frontends move the insertion point into the
regions of control-flow ops and set `loc` as they walk the user's source.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Optional, Sequence

from shared_codegen.ir.core import UNKNOWN_LOC, Block, Location, Operation, Region, Value
from shared_codegen.ir.types import IRType


class Builder:
    def __init__(self, block: Optional[Block] = None, loc: Location = UNKNOWN_LOC):
        self.block = block
        self.loc = loc
        self.module = None  # set by the frontend; gives ops access to module attributes

    def create(self, name: str, operands: Sequence[Value], result_types: Sequence[IRType],
               attrs: Optional[Dict[str, Any]] = None, regions: Sequence[Region] = ()) -> Operation:
        op = Operation(name, operands, result_types, attrs, regions, self.loc)
        self.insert(op)
        return op

    def insert(self, op: Operation) -> Operation:
        if self.block is None:
            raise RuntimeError("builder has no insertion block")
        op.parent = self.block
        self.block.ops.append(op)
        return op

    @contextmanager
    def at_end_of(self, block: Block):
        saved = self.block
        self.block = block
        try:
            yield
        finally:
            self.block = saved

    @contextmanager
    def location(self, loc: Location):
        saved = self.loc
        self.loc = loc
        try:
            yield
        finally:
            self.loc = saved
