"""Warp specialization: one op whose regions run concurrently on disjoint sets of warps.

    %r = ttg.warp_specialize %c0, %c1 {worker_num_warps = [1], worker_num_regs = [24], ...}
      default { ...; scf.yield %x }                 runs on the kernel's num_warps warps
      partition0(%a0, %a1) { ...; scf.yield }       runs on worker_num_warps[0] more warps

The default region runs on the warps that run the rest of the kernel; it may use any value
in scope and its `scf.yield` gives the op's results. Each worker region runs on its own warps
and is isolated from above: it sees only its block arguments, which are the op's operands
(`worker_arg_counts` says how many belong to each worker, in order). Captures are scalars,
pointers, shared memory descriptors and tensor descriptors; register tensors live in one
partition's registers and cannot cross (pass them through shared memory).

Registers (PTX ISA 9.7.17.1 setmaxnreg): `worker_num_regs[i]` is the per-thread register
count of worker i's warps, a multiple of 8 in [24, 256]. setmaxnreg acts on whole warpgroups
(4 warps), so `WarpPlan` places partitions warpgroup-aligned (the default partition first,
whole warpgroups; workers after it, largest first, padded to a whole warpgroup) and gives the
default partition the registers the workers leave. Named barriers: the default warps
synchronize with `bar.sync 1, 32*num_warps`, worker i with `bar.sync 2+i, 32*warps_i`;
`bar.sync 0` (the whole CTA) is kept for entering and leaving the op.

Interpreter: `shared_codegen/ops/warp_specialize/interpreter.py` (cooperative threads switching at
mbarrier waits). Lowering: `shared_codegen/ops/warp_specialize/lowering.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

from shared_codegen.ir.core import OpDef, Region, VerificationError, format_attrs
from shared_codegen.ir.types import (PointerType, ScalarType, SharedMemoryType,
                                     TensorDescriptorType, TensorMemoryType, TensorType)
from shared_codegen.layouts.relations import OWN_LAYOUTS

NAME = "ttg.warp_specialize"
MIN_REGS, MAX_REGS = 24, 256
REGISTERS_PER_CTA = 65536
MAX_THREADS = 1024
# Named barriers 0..15 (PTX ISA 9.7.13.1): 0 is the whole CTA, 1 the default warps, so at most
# 14 workers.
FIRST_WORKER_BARRIER = 2
MAX_WORKERS = 16 - FIRST_WORKER_BARRIER


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def check_partition_counts(worker_num_warps, worker_num_regs, names=None) -> None:
    """ValueError, in the user's terms, unless the per-worker warp and register counts are
    valid on their own (power-of-two warps, registers a multiple of 8 in [24, 256])."""
    nw, nr = list(worker_num_warps), list(worker_num_regs)
    if len(nw) != len(nr):
        raise ValueError(f"gl.warp_specialize got {len(nw)} worker warp counts but {len(nr)} "
                         f"register counts; give one of each per worker partition")
    if len(nw) > MAX_WORKERS:
        raise ValueError(f"gl.warp_specialize supports at most {MAX_WORKERS} worker "
                         f"partitions (one named barrier each), got {len(nw)}")
    for i, (w, r) in enumerate(zip(nw, nr)):
        who = f"worker partition {i}" + (f" (`{names[i]}`)" if names else "")
        if not _is_int(w) or w < 1 or w & (w - 1):
            raise ValueError(f"worker_num_warps[{i}] must be a power of two, got {w!r} "
                             f"({who})")
        if not _is_int(r) or r % 8 or not MIN_REGS <= r <= MAX_REGS:
            raise ValueError(f"worker_num_regs[{i}] must be a multiple of 8 in [{MIN_REGS}, "
                             f"{MAX_REGS}] (setmaxnreg), got {r!r} ({who})")


@dataclass(frozen=True)
class WarpPlan:
    """Where each partition's warps are and how many registers each warpgroup holds.

    - `starts[i]`: worker i's first warp (workers sorted largest first, after the default
      warps, so no partition straddles a warpgroup);
    - `total_warps`: what the kernel is launched with (padded to whole warpgroups);
    - `entry_regs`: the per-thread cap every warp starts with (`.maxnreg`): an even share of
      the CTA's registers;
    - `warpgroup_regs`: {warpgroup index: count} for the worker warpgroups (padding warps
      release down to 24);
    - `default_regs`: what the default warps take, the registers the workers leave."""

    num_warps: int
    worker_num_warps: Tuple[int, ...]
    worker_num_regs: Tuple[int, ...]
    starts: Tuple[int, ...]
    total_warps: int
    entry_regs: int
    default_regs: int
    warpgroup_regs: Tuple[Tuple[int, int], ...]

    @staticmethod
    def make(num_warps: int, worker_num_warps, worker_num_regs, names=None,
             min_total_warps: int = 0) -> "WarpPlan":
        """`min_total_warps`: launch at least this many warps (a kernel with several
        `warp_specialize` calls launches the largest's count; the others' extra warpgroups
        idle as padding)."""
        check_partition_counts(worker_num_warps, worker_num_regs, names)
        nw, nr = tuple(worker_num_warps), tuple(worker_num_regs)
        if num_warps % 4:
            raise ValueError(f"gl.warp_specialize needs num_warps to be a multiple of 4 (the "
                             f"default partition must be whole warpgroups, as setmaxnreg "
                             f"acts on warpgroups), got num_warps={num_warps}")
        order = sorted(range(len(nw)), key=lambda i: -nw[i])
        starts = [0] * len(nw)
        at = num_warps
        for i in order:
            starts[i] = at
            at += nw[i]
        total = max(-(-at // 4) * 4, min_total_warps)
        if total * 32 > MAX_THREADS:
            raise ValueError(f"gl.warp_specialize needs {total} warps ({num_warps} default + "
                             f"{sum(nw)} workers, padded to warpgroups), more than the "
                             f"{MAX_THREADS // 32} a CTA can have")
        groups: Dict[int, List[int]] = {}
        for i in range(len(nw)):
            for w in range(starts[i], starts[i] + nw[i]):
                groups.setdefault(w // 4, [])
                if i not in groups[w // 4]:
                    groups[w // 4].append(i)
        wg_regs = []
        for g in range(num_warps // 4, total // 4):
            members = groups.get(g, [])
            counts = sorted({nr[i] for i in members})
            if len(counts) > 1:
                who = ", ".join(f"{i}" + (f" (`{names[i]}`)" if names else "") + f": {nr[i]}"
                                for i in members)
                raise ValueError(f"worker partitions sharing warpgroup {g} (warps {4 * g}-"
                                 f"{4 * g + 3}) request different register counts ({who}); "
                                 f"setmaxnreg sets one count per warpgroup")
            wg_regs.append((g, counts[0] if counts else MIN_REGS))
        entry = min(MAX_REGS, REGISTERS_PER_CTA // (total * 32) // 8 * 8)
        # setmaxnreg only moves registers within what the CTA was launched with (`entry`
        # per thread); asking for more makes `setmaxnreg.inc` wait forever.
        pool = entry * total * 32
        left = pool - sum(r * 128 for _, r in wg_regs)
        default = min(MAX_REGS, left // (num_warps * 32) // 8 * 8)
        if default < MIN_REGS:
            raise ValueError(f"the workers' register counts ({list(nr)}) take "
                             f"{pool - left} of the CTA's {pool} registers ({entry} per "
                             f"thread at launch), leaving the {num_warps} default warps "
                             f"{max(default, 0)} per thread, under setmaxnreg's minimum of "
                             f"{MIN_REGS}")
        return WarpPlan(num_warps, nw, nr, tuple(starts), total, entry, default,
                        tuple(wg_regs))

    def barrier_id(self, worker: int) -> int:
        return FIRST_WORKER_BARRIER + worker


def check_capture(ty, what: str) -> None:
    """ValueError unless a value of type `ty` may be passed to a worker partition."""
    if isinstance(ty, (ScalarType, PointerType, SharedMemoryType, TensorDescriptorType,
                       TensorMemoryType)):
        return
    if isinstance(ty, TensorType):
        raise ValueError(f"{what} is a register tensor ({ty}); a worker partition runs on "
                         f"other warps and cannot see this partition's registers: store it "
                         f"to shared memory and pass the descriptor")
    raise ValueError(f"{what} of type {ty} cannot be passed to a worker partition")


def worker_operands(op) -> List[Sequence]:
    """Per worker, its slice of the op's operands."""
    out, at = [], 0
    for n in op.attrs["worker_arg_counts"]:
        out.append(op.operands[at:at + n])
        at += n
    return out


def partition_warps(fn, num_warps: int) -> Dict[int, int]:
    """{id(op): warps running it} for ops inside worker regions (others run on num_warps)."""
    out: Dict[int, int] = {}
    for op in fn.walk():
        if op.name != NAME:
            continue
        for region, warps in zip(op.regions[1:], op.attrs["worker_num_warps"]):
            for inner_top in region.block.ops:
                for inner in inner_top.walk():
                    out[id(inner)] = warps
    return out


def partition_names(op) -> List[str]:
    names = list(op.attrs.get("partition_names") or ())
    return names + [""] * (len(op.regions) - len(names))


class WarpSpecializeOp(OpDef):
    name = NAME
    layout_rule = OWN_LAYOUTS
    needs_all_warps = True

    @staticmethod
    def build(b, captures_per_worker, result_types, worker_num_warps, worker_num_regs,
              names=()):
        """The op with an empty default region and one region per worker whose block
        arguments mirror that worker's captures; the caller fills the regions."""
        operands = [v for caps in captures_per_worker for v in caps]
        regions = [Region()] + [Region([v.type for v in caps]) for caps in captures_per_worker]
        attrs = {"worker_num_warps": tuple(int(w) for w in worker_num_warps),
                 "worker_num_regs": tuple(int(r) for r in worker_num_regs),
                 "worker_arg_counts": tuple(len(c) for c in captures_per_worker),
                 "partition_names": tuple(names)}
        return b.create(NAME, operands, list(result_types), attrs, regions)

    def print_attrs(self, op):
        shown = {k: op.attrs[k] for k in ("worker_num_warps", "worker_num_regs")}
        plan = op.attrs.get("warp_plan")  # recorded by the warp_specialization_planning stage
        if plan is not None:
            shown.update(total_warps=plan.total_warps, starts=plan.starts,
                         entry_regs=plan.entry_regs, default_regs=plan.default_regs,
                         warpgroup_regs=[f"{g}:{r}" for g, r in plan.warpgroup_regs])
        return format_attrs(shown)

    def verify(self, op):
        counts = op.attrs.get("worker_arg_counts", ())
        nw, nr = op.attrs.get("worker_num_warps", ()), op.attrs.get("worker_num_regs", ())
        if not len(counts) == len(nw) == len(op.regions) - 1:
            raise VerificationError(f"{len(op.regions) - 1} worker regions but "
                                    f"{len(nw)} warp counts and {len(counts)} capture counts",
                                    op)
        if sum(counts) != len(op.operands):
            raise VerificationError(f"capture counts {list(counts)} do not add up to the "
                                    f"{len(op.operands)} operands", op)
        try:
            check_partition_counts(nw, nr, partition_names(op)[1:])
            for i, caps in enumerate(worker_operands(op)):
                for j, v in enumerate(caps):
                    check_capture(v.type, f"argument {j} of worker partition {i}")
        except ValueError as exc:
            raise VerificationError(str(exc), op) from None
        term = op.regions[0].block.terminator
        if term is None or term.name != "scf.yield" or \
                [v.type for v in term.operands] != [r.type for r in op.results]:
            raise VerificationError("the default region must end with scf.yield of the op's "
                                    "result types", op)
        for i, (region, caps) in enumerate(zip(op.regions[1:], worker_operands(op))):
            block = region.block
            if [a.type for a in block.args] != [v.type for v in caps]:
                raise VerificationError(f"worker region {i}'s arguments do not match its "
                                        f"captures", op)
            term = block.terminator
            if term is None or term.name != "scf.yield" or term.operands:
                raise VerificationError(f"worker region {i} must end with an empty "
                                        f"scf.yield", op)
            _check_isolated(op, i, block)
        for region in op.regions:
            for top in region.block.ops:
                for inner in top.walk():
                    if inner.name == NAME:
                        raise VerificationError("gl.warp_specialize cannot be nested inside "
                                                "a partition", inner)

    def interpret(self, op, frame):
        from shared_codegen.ops.warp_specialize.interpreter import run_warp_specialize
        return run_warp_specialize(op, frame)


def _check_isolated(op, index: int, block) -> None:
    """A worker region may only use values defined inside it (its warps never ran the
    code that computed anything else)."""
    defined = {id(a) for a in block.args}
    for top in block.ops:
        for inner in top.walk():
            for v in inner.operands:
                if id(v) not in defined:
                    raise VerificationError(
                        f"worker partition {index} uses {v.name_hint or 'a value'} ({v.type}) "
                        f"defined outside it; pass it as an argument", inner)
            defined.update(id(r) for r in inner.results)
            for region in inner.regions:
                defined.update(id(a) for a in region.block.args)


__all__ = ["WarpSpecializeOp", "WarpPlan", "check_partition_counts", "check_capture",
           "worker_operands", "partition_warps", "partition_names", "NAME"]
