"""Run a module's kernel on the CPU, program by program, whole tiles at a time.

Each op's interpreter rule lives with the op (`shared_codegen/ops/<family>/definition.py`); this module only
walks blocks, keeps the SSA environment and reports errors with the kernel's source line and
the program id.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any, Dict, List, Sequence

import numpy as np

from shared_codegen.errors import interpreter_error_class
from shared_codegen.interpreter.memory import InterpreterError, Memory
from shared_codegen.ir.core import Block, Module, Operation, Value


# frame.values key of the checks to run when a program returns (strict mode registers them:
# ops/mbarrier/definition.py); each is called with the program's frame.
PROGRAM_END_KEY = object()


def _program_end(frame) -> None:
    for check in frame.values.get(PROGRAM_END_KEY, ()):
        check(frame)


class Unready:
    """Base of values an asynchronous op has not delivered yet (an in-flight wgmma's
    accumulator). `frame[v]` calls `read(frame)`, which returns the value once it is ready and
    otherwise reports a race at `frame.op`, the op being interpreted. Ops that may legally
    pass such a value on (waits, chained MMAs, yields) read `frame.values` directly."""

    __slots__ = ()

    def read(self, frame):
        raise NotImplementedError


class Frame:
    """The state of one program while it runs: SSA values, ids, memory. Inside
    `gl.warp_specialize`, each partition runs on a `fork` of the program's frame (see
    ops/warp_specialize/interpreter.py); `partition` is then that partition (else None)."""

    partition = None
    # The grid's cooperative program (interpreter/grid.py) when programs run concurrently.
    program = None
    # The simulated GPU this program runs on when a world of ranks runs (interpreter/world.py).
    rank = None
    # The cluster this CTA belongs to (interpreter/cluster.py; kernels with num_ctas > 1)
    # and its rank there.
    cluster = None
    cta_rank = 0
    # The grid the launch asked for when fewer programs run it (a persistent kernel).
    requested_grid = None

    def __init__(self, memory: Memory, grid, out=None, num_warps: int = 4):
        self.memory = memory
        self.grid = grid
        self.num_warps = num_warps
        self.program_id = (0, 0, 0)
        self.values: Dict[Value, Any] = {}
        self.op: Operation = None  # the op being interpreted (for Unready reports)
        self._out = out or sys.stdout

    def fork(self, partition) -> "Frame":
        """A frame for one partition: the same program, values and memory, its own `op`."""
        child = Frame(self.memory, self.grid, self._out, self.num_warps)
        child.program_id = self.program_id
        child.values = self.values
        child.partition = partition
        child.program = self.program
        child.rank = self.rank
        child.cluster, child.cta_rank = self.cluster, self.cta_rank
        child.requested_grid = self.requested_grid
        return child

    def __getitem__(self, v: Value):
        try:
            x = self.values[v]
        except KeyError:
            raise InterpreterError(f"value {v!r} used before it was computed") from None
        if isinstance(x, Unready):
            return x.read(self)
        return x

    def raw(self, v: Value):
        """`frame[v]` without the Unready check: for ops that only pass values on."""
        try:
            return self.values[v]
        except KeyError:
            raise InterpreterError(f"value {v!r} used before it was computed") from None

    def run_block(self, block: Block, args: Sequence[Any], keep_condition=False) -> List[Any]:
        values = self.values
        for a, x in zip(block.args, args):
            values[a] = x
        for op in block.ops:
            if op.opdef.terminator:
                return [values[v] for v in op.operands]
            self.op = op
            results = op.opdef.interpret(op, self)
            if results:
                for r, x in zip(op.results, results):
                    values[r] = x
        return []

    def error(self, op: Operation, message: str):
        loc = op.loc
        where = f"{loc.file}:{loc.line}" if loc.line else "<kernel>"
        pid = ", ".join(str(int(p)) for p in self.program_id)
        rank = "" if self.rank is None else f"rank {self.rank}, "
        cta = f", CTA {self.cta_rank}" if self.cluster is not None else ""
        text = f"{where}: {message} ({rank}program id ({pid}){cta})"
        if loc.source_line:
            text += f"\n    {loc.source_line.strip()}"
        # "race: ..." raises a RaceError, "deadlock: ..." a DeadlockError (errors.py).
        error = interpreter_error_class(message)(text)
        if loc.line:
            error.file, error.line = loc.file, loc.line
        raise error

    def output(self, text: str):
        print(text, file=self._out)


def run_kernel(module: Module, arg_values: Sequence[Any], grid, memory: Memory,
               concurrent: bool = False) -> None:
    """Run the module's kernel for every program id in `grid` (a 3-tuple): one after another,
    or, when `concurrent` (the programs wait on each other) or SC_INTERPRET_CONCURRENT is
    set, interleaved at atomics and volatile loads (interpreter/grid.py)."""
    from shared_codegen import config
    from shared_codegen.interpreter.grid import ConcurrentGrid

    fn = module.kernel
    num_warps = int(module.attrs.get("num_warps", 4))
    body = fn.body.block
    requested = None
    if module.attrs.get("persistent_programs") and grid[1] == grid[2] == 1 and grid[0] > 2:
        # A persistent kernel (tile/passes/persistent.py): two programs walk the requested
        # ids, as the GPU's launcher caps the grid at what fits on the device.
        requested, grid = tuple(grid), (2, 1, 1)
    program_ids = ((x, y, z) for z, y, x in
                   itertools.product(range(grid[2]), range(grid[1]), range(grid[0])))
    num_ctas = int(module.attrs.get("num_ctas", 1))
    if num_ctas > 1:
        # The CTAs of each cluster run co-scheduled; clusters one after another.
        from shared_codegen.interpreter.cluster import run_clusters
        if concurrent:
            raise InterpreterError(
                f"{fn.name}: the interpreter runs the clusters of a num_ctas={num_ctas} launch "
                f"one after another, so a kernel whose programs wait on each other (a spin "
                f"loop on an atomic or volatile load) cannot run here")

        def make_cta(pid, _rank):
            frame = Frame(memory, tuple(grid), num_warps=num_warps)
            frame.program_id = pid
            return frame

        def run_cta(frame):
            frame.run_block(body, list(arg_values))
            _program_end(frame)

        old = np.seterr(all="ignore")
        try:
            run_clusters(list(program_ids), num_ctas, make_cta, run_cta)
        finally:
            np.seterr(**old)
        return
    if grid[0] * grid[1] * grid[2] > 1 and (concurrent or config.get("SC_INTERPRET_CONCURRENT")):
        def make_frame(pid, _):
            frame = Frame(memory, tuple(grid), num_warps=num_warps)
            frame.program_id = pid
            frame.requested_grid = requested
            return frame

        def run_program(frame):
            frame.run_block(body, list(arg_values))
            _program_end(frame)

        ConcurrentGrid(list(program_ids), make_frame, run_program).run()
        return
    frame = Frame(memory, tuple(grid), num_warps=num_warps)
    frame.requested_grid = requested
    old = np.seterr(all="ignore")
    try:
        for pid in program_ids:
            frame.program_id = pid
            frame.values = {}
            frame.run_block(body, list(arg_values))
            _program_end(frame)
    finally:
        np.seterr(**old)
