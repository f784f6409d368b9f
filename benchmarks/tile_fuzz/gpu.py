"""`fuzz_tile.py --gpu`: each program on our GPU path, in our interpreter and on Triton 3.6
(the same source with `import triton`), each checked against the numpy reference.

Programs are drawn up front, then split over worker processes (spawned, one CUDA context
each) so that compiles run in parallel; every worker compiles a program once per backend and
runs it at two ragged extents.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

import numpy as np

from . import harness
from .program import out_shape
from .reference import NP

TORCH_DTYPES = {"int1": "bool", "int8": "int8", "int16": "int16", "int32": "int32",
                "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
                "uint64": "uint64", "float16": "float16", "bfloat16": "bfloat16",
                "float32": "float32", "float64": "float64"}


def to_device(torch, array: np.ndarray, dtype: str):
    """A CUDA tensor with `array`'s bytes (through uint8, so bf16 and wide unsigned types
    need no numpy support in torch)."""
    target = getattr(torch, TORCH_DTYPES[dtype])
    if dtype == "int1":
        return torch.from_numpy(array.astype(np.bool_)).cuda()
    raw = torch.from_numpy(np.ascontiguousarray(array).reshape(-1).view(np.uint8)).cuda()
    return raw.view(target).reshape(array.shape)


def to_host(tensor, dtype: str) -> np.ndarray:
    import torch

    if dtype == "int1":
        return tensor.cpu().numpy()
    raw = tensor.contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
    return raw.view(NP[dtype]).reshape(tuple(tensor.shape))


def _launch(kernel, program, torch, inputs, m, n):
    args = [to_device(torch, a, load.dtype) for a, load in zip(inputs, program.loads)]
    # zeros through bytes: torch fills few kernels for uint16/32/64 on CUDA
    out = to_device(torch, np.zeros(out_shape(program, m, n), NP[program.out_dtype]),
                    program.out_dtype)
    kernel[(program.grid,)](*args, out, m, n, program.int_arg, program.float_arg,
                            BLOCK_M=program.block_m, BLOCK_N=program.block_n,
                            num_warps=program.num_warps)
    torch.cuda.synchronize()
    return to_host(out, program.out_dtype)


def _error(error: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(error), error)).strip()


def check_one(program, runs, folder, torch, triton_ok: bool) -> list:
    """[(backend, kind, detail, extents, seed)] for what disagreed; plus counts."""
    findings = []
    stats = {"runs": 0, "checked": 0, "identical_to_triton": 0, "compared_to_triton": 0}
    backends = {}
    try:
        backends["interpreter"] = harness.load_kernel(program.source(), folder)
        backends["ours_gpu"] = backends["interpreter"]
    except Exception as error:  # noqa: BLE001
        return [("ours", "load", _error(error), None, None)], stats
    if triton_ok:
        try:
            backends["triton"] = harness.load_kernel(program.source("triton"), folder)
        except Exception as error:  # noqa: BLE001
            findings.append(("triton", "load", _error(error), None, None))
    for (m, n), seed in runs:
        inputs = harness.make_inputs(program, m, n, seed)
        expected = harness.crop(harness.reference(program, inputs), program, m, n)
        outputs = {}
        for name, kernel in backends.items():
            try:
                if name == "interpreter":
                    outputs[name] = harness.run_interpreter(program, kernel, inputs, m, n)
                else:
                    outputs[name] = _launch(kernel, program, torch, inputs, m, n)
            except Exception:  # noqa: BLE001
                findings.append((name, "error", traceback.format_exc(), (m, n), seed))
                continue
            verdict = harness.compare(outputs[name], *expected, program.out_dtype)
            stats["checked"] += verdict.checked
            if not verdict.ok:
                findings.append((name, "mismatch", verdict.detail, (m, n), seed))
        stats["runs"] += 1
        if "ours_gpu" in outputs and "triton" in outputs:
            stats["compared_to_triton"] += 1
            a, b = outputs["ours_gpu"], outputs["triton"]
            same = np.array_equal(a, b, equal_nan=a.dtype.kind == "f") if a.dtype.kind in \
                "fc" else np.array_equal(a, b)
            stats["identical_to_triton"] += int(same)
    return findings, stats


def worker(job):
    """Runs in a spawned process: (programs with their runs, folder) -> findings, stats."""
    items, folder, bench_dir = job
    sys.path.insert(0, bench_dir)
    import torch

    try:
        import triton  # noqa: F401

        triton_ok = True
    except ImportError:
        triton_ok = False
    results = []
    for index, program, runs in items:
        findings, stats = check_one(program, runs, folder, torch, triton_ok)
        results.append((index, findings, stats))
    return results, triton_ok


def run_gpu(args) -> dict:
    import multiprocessing as mp

    from hypothesis import HealthCheck, Phase, given, seed as hyp_seed, settings
    from hypothesis import strategies as st

    from .strategies import programs
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from fuzz_tile import Report

    try:
        import torch
    except ImportError:
        print("--gpu needs torch and a CUDA GPU; nothing run")
        return {"mode": "gpu", "programs": 0, "failures": [], "skipped": "no torch"}
    if not torch.cuda.is_available():
        print("--gpu needs a CUDA GPU; nothing run")
        return {"mode": "gpu", "programs": 0, "failures": [], "skipped": "no GPU"}
    report = Report(args.out, "gpu")
    start = time.time()
    drawn = []

    @hyp_seed(args.seed)
    @settings(max_examples=args.n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(program=programs(max_ops=args.max_ops), data=st.data())
    def draw(program, data):
        m = 1 if program.rank == 1 else data.draw(st.integers(1, program.block_m))
        n = data.draw(st.integers(1, program.block_n))
        full = (program.block_m if program.rank == 2 else 1, program.block_n)
        seeds = [data.draw(st.integers(0, 2**31 - 1)) for _ in range(2)]
        drawn.append((len(drawn), program, [((m, n), seeds[0]), (full, seeds[1])]))

    draw()
    workers = max(1, min(args.workers, len(drawn)))
    chunks = [drawn[i::workers] for i in range(workers)]
    bench_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    jobs = [(chunk, report.kernels, bench_dir) for chunk in chunks]
    with mp.get_context("spawn").Pool(workers) as pool:
        outcomes = pool.map(worker, jobs)
    triton_ok = all(ok for _, ok in outcomes)
    totals = {"runs": 0, "checked": 0, "identical_to_triton": 0, "compared_to_triton": 0}
    programs_by_index = {index: program for index, program, _ in drawn}
    for results, _ in outcomes:
        for index, findings, stats in sorted(results, key=lambda r: r[0]):
            report.tried += 1
            for key in totals:
                totals[key] += stats[key]
            for backend, kind, detail, extents, seed in findings:
                report.fail(f"{backend}_{kind}", programs_by_index[index], detail, extents, seed)
    report.runs, report.checked = totals["runs"], totals["checked"]
    summary = report.write(time.time() - start)
    summary.update({"triton_present": triton_ok, "workers": workers,
                    "bit_identical_to_triton": f"{totals['identical_to_triton']} of "
                                               f"{totals['compared_to_triton']} runs"})
    with open(os.path.join(args.out, "report.json"), "w") as f:
        import json

        json.dump(summary, f, indent=1)
    return summary
