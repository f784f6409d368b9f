"""Device side of the GPU debug mode (`debug=True` at launch, SC_DEVICE_DEBUG=1): bounds checks
on global loads, stores and atomics, and mbarrier waits with a time budget. Nothing here runs unless a
debug variant is compiled, so a kernel compiled without debug gets no instruction of it.

A debug variant takes hidden parameters after the kernel's own (the launcher passes them,
shared_codegen/runtime/debug_mode.py): the address of a 64-byte record in global memory, then
the byte extent of every pointer argument, in parameter order. The record's layout (u32
words; `RECORD_WORDS` below):

    0 claimed (0 -> 1 by the first failing thread, atom.cas)   1 kind (KIND_*)
    2 site (index into the kernel's `debug_sites` metadata)     3-5 program id x, y, z
    6 thread (tid.x)                                            7 phase of the wait
    8-9 offset in bytes from the argument's start (OOB), or the barrier's shared address
    10-11 the argument's extent in bytes                        12 pointer argument, or -1

A failing access is not performed (its predicate is cleared, a load gives `other` or 0) and
the thread goes on: an exiting thread could leave a named barrier (`bar.sync id, count`)
waiting forever. A wait that runs out of budget records and `exit`s: its threads are the ones
that would hang, and every other wait of the kernel then runs out of budget in turn. No path
traps: a trap poisons the CUDA context, and the process must be able to launch again.
Only the first failure is recorded (the atom.cas); the host reads it after the launch.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np
from llvmlite import ir

from shared_codegen.ir.types import PointerType, TensorType, scalar_of

KIND_LOAD, KIND_STORE, KIND_WAIT, KIND_ATOMIC = 1, 2, 3, 4
RECORD_WORDS = 16
NO_ARGUMENT = 0xFFFFFFFF
I64 = ir.IntType(64)


class DebugChecks:
    """The debug instrumentation of one kernel being lowered: its hidden parameters, the sites
    it instrumented (kernel file, line, what and where), and the wait budget."""

    def __init__(self, record: ir.Value, pointer_args, wait_ns: int):
        self.record = record
        # (kernel argument Value, its name, its lowered base pointer, its extent in bytes)
        self.pointer_args = pointer_args
        self.wait_ns = int(wait_ns)
        self.sites: List[dict] = []

    def site(self, ctx, op, what: str, argument: Optional[str], **access) -> int:
        loc = getattr(op, "loc", None)
        site = {"what": what, "file": getattr(loc, "file", None) or "",
                "line": int(getattr(loc, "line", 0) or 0), "argument": argument,
                "partition": ctx.partition_name, **access}
        # The register groups of one access share a site.
        if site not in self.sites:
            self.sites.append(site)
        return self.sites.index(site)

    def info(self) -> dict:
        """What the host needs to decode a record (the kernel's `debug` metadata)."""
        return {"sites": self.sites, "pointer_args": [name for _, name, _, _ in
                                                      self.pointer_args],
                "wait_ms": self.wait_ns // 1_000_000}

    # ---- global accesses -------------------------------------------------------------------
    def checked(self, ctx, op, what: str, ptr_value, address: ir.Value, elem, vec: int,
                pred: Optional[ir.Value]) -> ir.Value:
        """The predicate an access of `vec` elements of `elem` at `address` runs under: the
        access's own (`pred`, None for unmasked) and-ed with "inside the argument". A thread
        whose access is outside writes the record first."""
        b = ctx.builder
        elem_bytes = 8 if isinstance(elem, PointerType) else max(8, elem.bits) // 8
        nbytes = vec * elem_bytes
        addr = b.ptrtoint(address, I64)
        origin = self._origin(ptr_value)
        if origin is not None:
            _, name, base, extent = origin
            offset = b.sub(addr, b.ptrtoint(base, I64))
            inside = b.icmp_unsigned("<", b.add(offset, ir.Constant(I64, nbytes - 1)), extent)
            arg_index = [a[1] for a in self.pointer_args].index(name)
        else:
            # A pointer whose argument the IR does not show (carried through a loop): inside
            # any pointer argument passes; the record then holds the address itself.
            inside, offset, extent, name, arg_index = None, addr, ir.Constant(I64, 0), None, \
                NO_ARGUMENT
            for _, _, base, ext in self.pointer_args:
                rel = b.sub(addr, b.ptrtoint(base, I64))
                ok = b.icmp_unsigned("<", b.add(rel, ir.Constant(I64, nbytes - 1)), ext)
                inside = ok if inside is None else b.or_(inside, ok)
            if inside is None:
                inside = ir.Constant(ir.IntType(1), 1)
        dtype = "pointer" if isinstance(elem, PointerType) else np.dtype(elem.np).name
        site = self.site(ctx, op, what, name, dtype=dtype, elem_bytes=elem_bytes, vec=vec)
        outside = b.not_(inside)
        bad = outside if pred is None else b.and_(pred, outside)
        kind = {"load": KIND_LOAD, "store": KIND_STORE, "atomic": KIND_ATOMIC}[what]
        ctx.inline_asm("{\n.reg .pred win;\n.reg .b32 old, t;\n@!$0 bra done;\n"
                       + _claim_and_fill(kind, site, "$1", phase=None, arg=arg_index)
                       + "st.global.u64 [$1+32], $2;\nst.global.u64 [$1+40], $3;\n"
                       "done:\n}", "b,l,l,l,~{memory}", ir.VoidType(),
                       [bad, self.record, offset, extent], side_effects=True)
        return inside if pred is None else b.and_(pred, inside)

    def _origin(self, value):
        """The pointer argument `value` was computed from (through addptr, splat, broadcast
        and layout changes), or None."""
        for _ in range(64):
            for entry in self.pointer_args:
                if entry[0] is value:
                    return entry
            op = getattr(value, "defining_op", None)
            if op is None:
                return None
            sources = [v for v in op.operands if _is_pointer(v.type)]
            if len(sources) != 1:
                return None
            value = sources[0]
        return None

    # ---- mbarrier waits --------------------------------------------------------------------
    def bounded_wait(self, ctx, op, probe: str, bar_address: ir.Value, phase: ir.Value,
                     pred: Optional[ir.Value]) -> None:
        """`probe` (`mbarrier.try_wait.parity`, or `test_wait` before sm_90) in a loop bounded
        by %globaltimer: past the budget the thread records (barrier address, phase) and
        exits."""
        site = self.site(ctx, op, "wait", None)
        args = [bar_address, phase, self.record]
        constraints = "l,r,l"
        skip = ""
        if pred is not None:
            args.append(pred)
            constraints += ",b"
            skip = "@!$3 bra ok;\n"
        text = ("{\n.reg .pred done, late, win;\n.reg .b64 t0, t1;\n.reg .b32 old, t;\n" + skip
                + "mov.u64 t0, %globaltimer;\nwait:\n"
                f"{probe} done, [$0], $1;\n@done bra ok;\n"
                "mov.u64 t1, %globaltimer;\nsub.u64 t1, t1, t0;\n"
                f"setp.lt.u64 late, t1, {self.wait_ns};\n@late bra wait;\n"
                + _claim_and_fill(KIND_WAIT, site, "$2", phase="$1", arg=NO_ARGUMENT, lost="quit")
                + "st.global.u64 [$2+32], $0;\n"
                "quit:\nexit;\nok:\n}")
        ctx.inline_asm(text, constraints + ",~{memory}", ir.VoidType(), args,
                       side_effects=True)


def _claim_and_fill(kind: int, site: int, record: str, phase: Optional[str], arg: int,
                    lost: str = "done") -> str:
    """PTX that claims the record (first failure wins; a loser jumps to `lost`) and writes
    the fields every kind has."""
    lines = [f"atom.global.cas.b32 old, [{record}], 0, 1;", "setp.eq.u32 win, old, 0;",
             f"@!win bra {lost};", f"st.global.u32 [{record}+4], {kind};",
             f"st.global.u32 [{record}+8], {site};"]
    for i, axis in enumerate("xyz"):
        lines += [f"mov.u32 t, %ctaid.{axis};", f"st.global.u32 [{record}+{12 + 4 * i}], t;"]
    lines += ["mov.u32 t, %tid.x;", f"st.global.u32 [{record}+24], t;"]
    if phase is not None:
        lines.append(f"st.global.u32 [{record}+28], {phase};")
    lines.append(f"st.global.u32 [{record}+48], {arg};")
    return "\n".join(lines) + "\n"


def _is_pointer(ty) -> bool:
    if isinstance(ty, TensorType):
        ty = scalar_of(ty)
    return isinstance(ty, PointerType)


def setup(ctx, fn, hidden_args, wait_ms: int) -> DebugChecks:
    """Attach the instrumentation to `ctx`: `hidden_args` are the kernel's hidden LLVM
    parameters (the record, then one extent per pointer argument, in parameter order)."""
    record, extents = hidden_args[0], hidden_args[1:]
    pointer_args = []
    for arg, extent in zip([a for a in fn.args if isinstance(a.type, PointerType)], extents):
        pointer_args.append((arg, arg.name_hint or f"arg{arg.index}", ctx.get(arg), extent))
    ctx.debug = DebugChecks(record, pointer_args, wait_ms * 1_000_000)
    return ctx.debug


def hidden_param_count(fn) -> int:
    return 1 + sum(isinstance(a.type, PointerType) for a in fn.args)


__all__ = ["DebugChecks", "setup", "hidden_param_count", "KIND_LOAD", "KIND_STORE",
           "KIND_WAIT", "KIND_ATOMIC", "RECORD_WORDS", "NO_ARGUMENT"]
