"""Differential fuzzing of the tile DSL: Hypothesis-generated programs (elementwise chains,
casts, math, reductions, scans, masks on ragged extents, broadcasting, every dtype) run

  --cpu   in our CPU interpreter, against the numpy reference (tile_fuzz/), and
  --gpu   on our GPU path, in the interpreter and on Triton 3.6 (the same source with
          `import triton` instead of `import tile`, when torch and triton are installed),
          each against the reference.

It reports how many programs were tried and what disagreed, and saves each failing program's
source (with its inputs' seed and extents) under --out. A program is compiled once and run at
two ragged extents. Example:

  python benchmarks/fuzz_tile.py --cpu -n 1000 --seed 1 --out /tmp/fuzz
  python benchmarks/fuzz_tile.py --gpu -n 1000 --out fuzz_report
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tile_fuzz import harness  # noqa: E402
from tile_fuzz.strategies import programs  # noqa: E402


class Report:
    """Counts and failures of one run, written as report.json and one .py per failure."""

    def __init__(self, out: str, mode: str):
        self.out, self.mode = out, mode
        self.tried = self.runs = self.checked = self.skipped = 0
        self.failures: list = []
        self.by_kind: dict = {}
        os.makedirs(os.path.join(out, "failing"), exist_ok=True)
        self.kernels = os.path.join(out, "kernels")
        os.makedirs(self.kernels, exist_ok=True)

    def fail(self, kind: str, program, detail: str, extents=None, seed=None):
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        index = len(self.failures)
        path = os.path.join(self.out, "failing", f"{index:04d}_{kind}.py")
        with open(path, "w") as f:
            f.write(program.source())
            f.write(f"\n# {kind}: extents (M, N) = {extents}, input seed {seed}\n")
            for line in detail.splitlines()[-30:]:
                f.write(f"# {line}\n")
            f.write(f"PROGRAM = {program!r}\n")
        self.failures.append({"kind": kind, "file": path, "extents": extents, "seed": seed,
                              "detail": detail.splitlines()[-1][:400] if detail else ""})

    def write(self, seconds: float):
        summary = {"mode": self.mode, "programs": self.tried, "runs": self.runs,
                   "elements_checked": self.checked, "elements_skipped": self.skipped,
                   "disagreements": len(self.failures), "by_kind": self.by_kind,
                   "seconds": round(seconds, 1), "failures": self.failures}
        with open(os.path.join(self.out, "report.json"), "w") as f:
            json.dump(summary, f, indent=1)
        return summary


def _error_text(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(error), error)).strip()


def cpu_one(report: Report, program, extents_list, seed: int, compile_every: int,
            targets=("sm_90a",)):
    report.tried += 1
    try:
        kernel = harness.load_kernel(program.source(), report.kernels)
    except Exception as error:  # noqa: BLE001 - every failure is a finding
        report.fail("load", program, _error_text(error))
        return
    for (m, n) in extents_list:
        report.runs += 1
        try:
            verdict = harness.check_interpreter(program, kernel, m, n, seed)
        except Exception:  # noqa: BLE001
            report.fail("interpreter_error", program, traceback.format_exc(), (m, n), seed)
            return
        report.checked += verdict.checked
        report.skipped += verdict.skipped
        if not verdict.ok:
            report.fail("interpreter_mismatch", program, verdict.detail, (m, n), seed)
            return
    if compile_every and report.tried % compile_every == 0:
        import tile

        target = targets[(report.tried // compile_every) % len(targets)]
        try:
            asm = tile.compile(kernel, signature=program.signature(),
                               constexprs=program.constexprs(), target=target,
                               num_warps=program.num_warps).asm
            if ".entry" not in asm["ptx"] or not asm["cubin"]:
                report.fail("compile", program, f"{target}: no PTX entry or cubin")
        except Exception as error:  # noqa: BLE001
            if not _expected_refusal(program, target, error):
                report.fail("compile", program, f"{target}:\n{traceback.format_exc()}")


def _expected_refusal(program, target: str, error: Exception) -> bool:
    """Triton 3.6 refuses float8e4nv before sm_89 too (no conversion instructions)."""
    old_target = int("".join(c for c in target.split("_")[1] if c.isdigit())) < 89
    return (old_target and any(n.dtype == "float8e4nv" for n in program.nodes)
            and "not supported on CUDA arch < 89" in str(error))


def run_cpu(args) -> dict:
    report = Report(args.out, "cpu")
    start = time.time()

    @hyp_seed(args.seed)
    @settings(max_examples=args.n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(program=programs(max_ops=args.max_ops), data=st.data())
    def one(program, data):
        m1 = 1 if program.rank == 1 else data.draw(st.integers(1, program.block_m))
        n1 = data.draw(st.integers(1, program.block_n))
        full = (program.block_m if program.rank == 2 else 1, program.block_n)
        seed = data.draw(st.integers(0, 2**31 - 1))
        cpu_one(report, program, [(m1, n1), full], seed, args.compile_every,
                tuple(args.targets.split(",")))
        if args.progress and report.tried % args.progress == 0:
            print(f"{report.tried} programs, {len(report.failures)} disagreements, "
                  f"{time.time() - start:.0f} s", flush=True)

    one()
    return report.write(time.time() - start)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--cpu", action="store_true", help="interpreter vs numpy")
    mode.add_argument("--gpu", action="store_true", help="GPU vs interpreter vs Triton 3.6")
    parser.add_argument("-n", type=int, default=1000, help="programs to try")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="fuzz_report", help="folder for the report")
    parser.add_argument("--max-ops", type=int, default=6)
    parser.add_argument("--compile-every", type=int, default=0,
                        help="--cpu: also compile every k-th program for sm_90a")
    parser.add_argument("--targets", default="sm_90a,sm_80",
                        help="--cpu: targets the --compile-every checks cycle through")
    parser.add_argument("--progress", type=int, default=0)
    parser.add_argument("--workers", type=int, default=max(1, min(12, (os.cpu_count() or 2) - 2)),
                        help="--gpu: processes compiling and running in parallel")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    if args.gpu:
        from tile_fuzz.gpu import run_gpu

        summary = run_gpu(args)
    else:
        summary = run_cpu(args)
    brief = {k: v for k, v in summary.items() if k != "failures"}
    print(json.dumps(brief))
    for failure in summary["failures"][:20]:
        print(f"  {failure['kind']}: {failure['file']}: {failure['detail'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
