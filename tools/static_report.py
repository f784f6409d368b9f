#!/usr/bin/env python3
"""The static figures of a compiled kernel that a kernel author checks before any GPU run
(and the only ones there are without a Blackwell GPU): registers per `warp_specialize`
partition, spills, shared and tensor memory per CTA, tcgen05 instructions by kind, and how
many exp2 run on the MUFU unit versus the FMA pipe, counted from the SASS.

    from tools.static_report import static_report
    report = static_report(gluon.compile(kernel, signature, constexprs, target="sm_100a"),
                           partition_names=["correction", "softmax0", ...])
    print(report.markdown())

    python3 tools/static_report.py     # the Blackwell attention example, as in its README

Where each figure comes from:
- registers: `setmaxnreg` counts of the partitions (the warp_specialize op's attributes and
  the default partition's share, as the compiler plans them), and ptxas' own "Used N
  registers" (the entry count every warp starts with);
- spills: whole-program `ptxas -v` (nvJitLink compiles PTX as a separately linked unit and
  ignores setmaxnreg, C7504, so its counts describe another program; the launcher then
  uses the driver JIT, which sees the whole program as ptxas does);
- shared memory: the compiler's plan (`shared_bytes`); tensor memory: the columns of the
  kernel's one `tcgen05.alloc`;
- SASS: `nvdisasm` of the whole-program cubin (found as $SC_NVDISASM, on PATH, or in the
  `nvidia-cuda-nvdisasm` wheel of the `test` extra). tcgen05 instructions are counted by
  their SASS opcodes (UTC*MMA = tcgen05.mma, UTCBAR = tcgen05.commit, LDTM / STTM =
  tcgen05.ld / st, UTCCP = tcgen05.cp, UTCATOMSWS = tcgen05.alloc / dealloc); exp2 on MUFU
  are MUFU.EX2; exp2 on the FMA pipe are the instructions that add an integer into the
  exponent field of a polynomial's result (n * 2^23: IMAD by 0x800000, LEA or SHF by 23),
  the last step of every Cody-Waite exp2 emulation. All counts are static (instructions in
  the program text, not executions).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

NVDISASM_WHEEL_PATH = ("cu13", "bin", "nvdisasm")  # inside the `nvidia` namespace package

# SASS opcode (before the first dot) -> the tcgen05 PTX instruction it implements.
TCGEN05_SASS = (("UTCHMMA", "tcgen05.mma"), ("UTCQMMA", "tcgen05.mma"),
                ("UTCIMMA", "tcgen05.mma"), ("UTCOMMA", "tcgen05.mma"),
                ("UTCBAR", "tcgen05.commit"), ("LDTM", "tcgen05.ld"), ("STTM", "tcgen05.st"),
                ("UTCCP", "tcgen05.cp"), ("UTCATOMSWS", "tcgen05.alloc/dealloc"))
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)([.\w]*)"
                        r"\s*([^;]*);")
_EXPONENT_INSERT = re.compile(r"^(IMAD\s+R\d+, R\d+, 0x800000, R\d+|"
                              r"LEA(\.HI)?\s+R\d+, R\d+, R\d+, 0x17|"
                              r"SHF\.L\.U32\s+R\d+, R\d+, 0x17, RZ|"
                              r"IMAD\.SHL\.U32\s+R\d+, R\d+, 0x800000, RZ)\b")


class ToolMissing(RuntimeError):
    """A binary the report needs (ptxas, nvdisasm) is not installed."""


@dataclasses.dataclass
class Partition:
    name: str
    warps: int
    registers: int  # setmaxnreg: per thread


@dataclasses.dataclass
class StaticReport:
    kernel: str
    target: str
    partitions: List[Partition]
    entry_registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    tmem_columns: int
    ptx_tcgen05: Dict[str, int]   # PTX instruction (tcgen05.mma, ...) -> count
    sass_tcgen05: Dict[str, int]  # PTX instruction -> count of its SASS opcodes
    exp2_mufu: int
    exp2_fma: int
    sass_instructions: int

    def rows(self) -> List[Tuple[str, str]]:
        """(figure, value) pairs in reading order."""
        parts = ", ".join(f"{p.name} {p.warps}w x {p.registers}" for p in self.partitions)
        mufu, fma = self.exp2_mufu, self.exp2_fma
        share = f" ({100 * fma / (mufu + fma):.0f}% on FMA)" if mufu + fma else ""
        return [("registers per partition (setmaxnreg)", parts or "no warp_specialize"),
                ("ptxas registers at entry", str(self.entry_registers)),
                ("spills (whole-program ptxas)", f"{self.spill_stores} B stores, "
                                                 f"{self.spill_loads} B loads"),
                ("shared memory per CTA", f"{self.shared_bytes} B"),
                ("tensor memory per CTA", f"{self.tmem_columns} of 512 columns"),
                ("tcgen05 in PTX", _counts(self.ptx_tcgen05)),
                ("tcgen05 in SASS", _counts(self.sass_tcgen05)),
                ("exp2 in SASS: MUFU.EX2 / FMA-pipe polynomial", f"{mufu} / {fma}{share}"),
                ("SASS instructions (NOPs left out)", str(self.sass_instructions))]

    def markdown(self, title: Optional[str] = None) -> str:
        lines = [f"| {title or self.kernel} ({self.target}) | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in self.rows()]
        return "\n".join(lines)


def _counts(counts: Dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"


def find_nvdisasm() -> str:
    """The nvdisasm binary: $SC_NVDISASM, PATH, or the nvidia-cuda-nvdisasm wheel."""
    env = os.environ.get("SC_NVDISASM")
    if env:
        if not os.access(env, os.X_OK):
            raise ToolMissing(f"SC_NVDISASM={env} is not an executable file")
        return env
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import nvidia
        for root in nvidia.__path__:
            path = os.path.join(root, *NVDISASM_WHEEL_PATH)
            if os.access(path, os.X_OK):
                return path
    except ImportError:
        pass
    raise ToolMissing("nvdisasm not found: install the `nvidia-cuda-nvdisasm` wheel "
                      "(pip install -e '.[test]'), put nvdisasm on PATH, or set SC_NVDISASM")


def have_sass_tools() -> bool:
    """Whether ptxas (PATH) and nvdisasm are both here: what the SASS figures need."""
    try:
        find_nvdisasm()
    except ToolMissing:
        return False
    return shutil.which("ptxas") is not None


def whole_program_cubin(ptx: str, target: str) -> Tuple[bytes, str]:
    """(cubin, `ptxas -v` log) of the PTX as one program, setmaxnreg honoured."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        raise ToolMissing("ptxas not found on PATH (the CUDA toolkit's assembler): the "
                          "whole-program register and spill figures need it")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        run = subprocess.run([ptxas, f"-arch={target}", "-v", src, "-o", out],
                             capture_output=True, text=True)
        log = run.stdout + run.stderr
        if run.returncode:
            raise RuntimeError(f"ptxas failed:\n{log}")
        with open(out, "rb") as f:
            return f.read(), log


def disassemble(cubin: bytes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        run = subprocess.run([find_nvdisasm(), "-c", path], capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"nvdisasm failed:\n{run.stderr}")
        return run.stdout


def count_sass(sass: str) -> Tuple[Dict[str, int], int, int, int]:
    """(tcgen05 counts by PTX instruction, MUFU.EX2, FMA-pipe exp2, instructions but NOPs)."""
    tcgen05: Dict[str, int] = collections.Counter()
    mufu = fma = total = 0
    kinds = dict(TCGEN05_SASS)
    for line in sass.splitlines():
        m = _SASS_LINE.search(line)
        if not m:
            continue
        op, mods, args = m.groups()
        if op == "NOP":  # alignment padding
            continue
        total += 1
        if op in kinds:
            tcgen05[kinds[op]] += 1
        elif op == "MUFU" and mods.startswith(".EX2"):
            mufu += 1
        elif _EXPONENT_INSERT.match(f"{op}{mods} {args.strip()}"):
            fma += 1
    return dict(tcgen05), mufu, fma, total


def sass_loops(sass: str) -> List[List[str]]:
    """The loops of an nvdisasm listing, innermost first in address order: for every branch
    back to an earlier label, the instructions from that label to the branch (predicates
    and operands kept, one instruction a string). Schedules are read from these: where
    ptxas put a wgmma wait, how many copies a loop makes."""
    lines: List[str] = []
    labels: Dict[str, int] = {}
    for line in sass.splitlines():
        label = re.match(r"\s*\.(L_x_\d+):", line)
        if label:
            labels[label.group(1)] = len(lines)
        ins = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if ins:
            lines.append(ins.group(1))
    loops = []
    for end, ins in enumerate(lines):
        target = re.search(r"BRA\s.*?(L_x_\d+)", ins)
        if target and labels.get(target.group(1), end) < end:
            loops.append(lines[labels[target.group(1)]:end + 1])
    return loops


def inflight_wgmma_operand_writes(loop: List[str]) -> List[str]:
    """The instructions of a loop (`sass_loops`) that write a register an issued
    register-A wgmma (HGMMA / QGMMA with its A operand in registers) still reads, before a
    `WARPGROUP.DEPBAR.LE gsb0, 0x0` has waited for it, in program order (the loop's top
    wait first). ptxas does not always keep those registers: with an 8-bit A operand whose
    wait sat in the next iteration it packed the next operand into them (the fp8 attention
    forward with `overlap`, examples/flash_attention/README.md), so the wgmma read the
    wrong values. A non-empty answer is such a race."""
    inflight, writes = set(), []
    for line in loop:
        mma = re.match(r"[HQ]GMMA\.\S+ R\d+, R(\d+), gdesc", line)
        if mma:  # the A operand: four registers from the one named
            inflight |= set(range(int(mma.group(1)), int(mma.group(1)) + 4))
        elif line.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"):
            inflight = set()
        else:
            dest = re.match(r"(?:@!?U?P\w+\s+)?[A-Z][A-Z0-9._]* R(\d+),", line)
            if dest and int(dest.group(1)) in inflight:
                writes.append(line)
    return writes


def count_ptx_tcgen05(ptx: str) -> Dict[str, int]:
    counts = collections.Counter(f"tcgen05.{m}" for m in re.findall(r"\btcgen05\.(\w+)", ptx))
    return dict(counts)


def partitions_of(ttgir: str, num_warps: int, names: Optional[Sequence[str]] = None
                  ) -> List[Partition]:
    """The default and worker partitions with their warps and setmaxnreg counts."""
    from shared_codegen.ops.warp_specialize.definition import WarpPlan
    regs = re.search(r"worker_num_regs = \[([\d, ]*)\]", ttgir)
    warps = re.search(r"worker_num_warps = \[([\d, ]*)\]", ttgir)
    if not regs or not warps:
        return []
    nr = [int(x) for x in regs.group(1).split(",") if x.strip()]
    nw = [int(x) for x in warps.group(1).split(",") if x.strip()]
    plan = WarpPlan.make(num_warps, nw, nr)
    names = list(names or [])
    if names and len(names) != len(nw) + 1:
        raise ValueError(f"partition_names: {len(names)} names for {len(nw) + 1} partitions "
                         f"(the default first)")
    names = names or ["default"] + [f"worker {i}" for i in range(len(nw))]
    return [Partition(names[0], num_warps, plan.default_regs)] + \
        [Partition(n, w, r) for n, w, r in zip(names[1:], nw, nr)]


def static_report(compiled, partition_names: Optional[Sequence[str]] = None) -> StaticReport:
    """The report of a `tile.compile` / `gluon.compile` result (see the module docstring)."""
    ptx, ttgir, meta = compiled.asm["ptx"], str(compiled.asm["ttgir"]), compiled.metadata
    target = meta["target"]
    cubin, log = whole_program_cubin(ptx, target)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    used = re.search(r"Used (\d+) registers", log)
    sass_tc, mufu, fma, total = count_sass(disassemble(cubin))
    alloc = re.findall(r"tcgen05\.alloc\.\S+ \[[^\]]+\], (\d+);", ptx)
    num_warps = int(re.search(r"num_warps = (\d+)", ttgir).group(1))
    return StaticReport(
        kernel=meta["name"], target=target,
        partitions=partitions_of(ttgir, num_warps, partition_names),
        entry_registers=int(used.group(1)) if used else 0,
        spill_stores=int(spills.group(1)) if spills else 0,
        spill_loads=int(spills.group(2)) if spills else 0,
        shared_bytes=int(meta.get("shared_bytes", 0)),
        tmem_columns=max((int(c) for c in alloc), default=0),
        ptx_tcgen05=count_ptx_tcgen05(ptx), sass_tcgen05=sass_tc, exp2_mufu=mufu,
        exp2_fma=fma, sass_instructions=total)


def _attention_reports():
    """The Blackwell attention example's configurations, as its README shows them."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "examples", "flash_attention"))
    sys.path.insert(0, os.path.join(here, "..", "examples"))
    sys.path.insert(0, os.path.join(here, ".."))
    import blackwell
    names = ["correction", "softmax 0", "softmax 1", "mma", "load", "epilogue"]
    for dtype, D, causal in (("float16", 128, True), ("float16", 128, False),
                             ("float16", 64, True), ("float8_e4m3fn", 128, True),
                             ("float8_e4m3fn", 64, False)):
        comp = blackwell.compile_for_sm100a(dtype, D, causal)
        title = f"blackwell.py {dtype} D={D} {'causal' if causal else 'non-causal'}"
        yield title, static_report(comp, names)


if __name__ == "__main__":
    for title, report in _attention_reports():
        print(report.markdown(title))
        print()
