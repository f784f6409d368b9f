"""Regenerate the golden linear layouts from Triton 3.6.0 (needs ``pip install triton==3.6.0``;
no GPU). The tests only read the JSON files written here.

    python tests/data/layouts/generate_golden.py

Distributed layouts go through Gluon's own conversion (``GluonOpBuilder.to_linear_layout``,
what ``gl.to_linear_layout`` calls). Triton 3.6's C++ asserts abort the process on invalid
parameter combinations, so cases run in worker processes and a case that kills its worker is
dropped (and reported). The algebra cases come from Triton's ``LinearLayout`` python binding.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
WARPS = [1, 2, 4, 8, 16]


def _split32(rng, rank):
    parts = [1] * rank
    for _ in range(5):
        parts[rng.randrange(rank)] *= 2
    return parts


def _split(rng, rank, total):
    parts = [1] * rank
    for _ in range(int(math.log2(total))):
        parts[rng.randrange(rank)] *= 2
    return parts


def _blocked(rng, rank, num_warps):
    return {"kind": "BlockedLayout",
            "size_per_thread": [rng.choice([1, 1, 2, 4, 8]) for _ in range(rank)],
            "threads_per_warp": _split32(rng, rank),
            "warps_per_cta": _split(rng, rank, num_warps),
            "order": rng.sample(range(rank), rank)}


def _mma(rng, rank, version):
    if version == 2:
        warps = rng.choice(WARPS)
        return {"kind": "NVMMADistributedLayout", "version": [2, 0],
                "warps_per_cta": _split(rng, rank, warps),
                "instr_shape": [1] * (rank - 2) + [16, 8]}
    warps = rng.choice([4, 8, 16])
    warps_per_cta = [4, 1]
    for _ in range(int(math.log2(warps // 4))):
        warps_per_cta[rng.randrange(2)] *= 2
    return {"kind": "NVMMADistributedLayout", "version": [3, 0],
            "warps_per_cta": warps_per_cta,
            "instr_shape": [16, rng.choice([8, 16, 32, 64, 128, 256]), 16]}


def _shape(rng, rank):
    return [rng.choice(SHAPES) for _ in range(rank)]


def distributed_cases(seed=0, count=2600):
    rng = random.Random(seed)
    cases = []
    while len(cases) < count:
        kind = rng.choice(["blocked", "blocked", "slice", "mma2", "mma3", "dot2", "dot3",
                           "dotfma"])
        if kind == "blocked":
            rank = rng.choice([1, 2, 3])
            layout = _blocked(rng, rank, rng.choice(WARPS))
        elif kind == "slice":
            parent_rank = rng.choice([2, 3])
            parent = rng.choice([_blocked(rng, parent_rank, rng.choice(WARPS)),
                                 _mma(rng, parent_rank, 2)])
            if parent_rank == 2 and rng.random() < 0.3:
                parent = _mma(rng, 2, 3)
            layout = {"kind": "SliceLayout", "dim": rng.randrange(parent_rank),
                      "parent": parent}
            rank = parent_rank - 1
        elif kind in ("mma2", "mma3"):
            rank = 2 if kind == "mma3" else rng.choice([2, 3])
            layout = _mma(rng, rank, 3 if kind == "mma3" else 2)
        elif kind in ("dot2", "dot3"):
            rank = 2 if kind == "dot3" else rng.choice([2, 3])
            parent = _mma(rng, rank, 3 if kind == "dot3" else 2)
            layout = {"kind": "DotOperandLayout",
                      "operand_index": 0 if kind == "dot3" else rng.randrange(2),
                      "parent": parent, "k_width": rng.choice([1, 2, 4, 8])}
        else:
            rank = rng.choice([2, 3])
            layout = {"kind": "DotOperandLayout", "operand_index": rng.randrange(2),
                      "parent": _blocked(rng, rank, rng.choice(WARPS)), "k_width": 0}
        cases.append({"layout": layout, "shape": _shape(rng, rank)})
    return cases


def _to_gluon(spec):
    import triton.experimental.gluon.language as gl
    kind = spec["kind"]
    args = {k: v for k, v in spec.items() if k != "kind"}
    if "parent" in args:
        args["parent"] = _to_gluon(args["parent"])
    return getattr(gl, kind)(**args)


def run_worker(path_in, path_out):
    """Convert each case of ``path_in``; append one JSON line per finished case."""
    from triton._C.libtriton import gluon_ir, ir
    context = ir.context()
    ir.load_dialects(context)
    builder = gluon_ir.GluonOpBuilder(context)
    with open(path_in) as f:
        cases = json.load(f)
    with open(path_out, "a") as out:
        for index, case in enumerate(cases):
            out.write(json.dumps({"start": index}) + "\n")
            out.flush()
            layout = _to_gluon(case["layout"])
            result = builder.to_linear_layout(layout._to_ir(builder), case["shape"])
            out.write(json.dumps({"done": index, "bases": [
                result.reg_bases, result.lane_bases, result.warp_bases, result.block_bases],
                "shape": list(result.shape)}) + "\n")
            out.flush()


def convert_all(cases, worker_flag="--worker"):
    """Run the workers, restarting after each crash past the crashing case."""
    tmp_in = os.path.join(HERE, ".cases.json")
    tmp_out = os.path.join(HERE, ".results.jsonl")
    results = {}
    start = 0
    crashed = []
    while start < len(cases):
        with open(tmp_in, "w") as f:
            json.dump(cases[start:], f)
        if os.path.exists(tmp_out):
            os.remove(tmp_out)
        subprocess.run([sys.executable, __file__, worker_flag, tmp_in, tmp_out],
                       stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        last_started = -1
        with open(tmp_out) as f:
            for line in f:
                record = json.loads(line)
                if "start" in record:
                    last_started = record["start"]
                else:
                    results[start + record["done"]] = record
        if last_started == -1 or start + last_started in results:
            break
        crashed.append(start + last_started)
        start += last_started + 1
    for path in (tmp_in, tmp_out):
        if os.path.exists(path):
            os.remove(path)
    return results, crashed


def algebra_cases(seed=1, count=300):
    """Random pairs for product, compose-free algebra checked against Triton's binding."""
    from triton._C.libtriton.linear_layout import LinearLayout as TritonLL
    rng = random.Random(seed)
    cases = []
    names = ["register", "lane", "warp"]
    while len(cases) < count:
        outs = [["dim0", 2 ** rng.randrange(0, 4)], ["dim1", 2 ** rng.randrange(0, 4)]]
        out_bits = sum(int(math.log2(s)) for _, s in outs)

        def random_bases(in_counts):
            return [[name, [[rng.randrange(size) if rng.random() < 0.7 else 0
                             for _, size in outs] for _ in range(n)]]
                    for name, n in in_counts]

        outer_counts = [[n, rng.randrange(0, 4)] for n in names]
        outer_counts[0][1] += max(0, out_bits - sum(c for _, c in outer_counts))
        outer = random_bases(outer_counts)
        outer_ll = TritonLL.from_bases(outer, [n for n, _ in outs], [s for _, s in outs],
                                       False)
        if not outer_ll.is_surjective():
            continue
        inner = random_bases([[n, rng.randrange(0, 4)]
                              for n in rng.sample(names, rng.randrange(1, 4))])
        if rng.random() < 0.3:  # share some dims so the identity-dim rule is exercised
            inner = [[n, [list(v) for v in vs]] for n, vs in outer]
            inner[0][1] = [[rng.randrange(s) for _, s in outs] for _ in inner[0][1]]
        cases.append({"inner": inner, "outer": outer, "out_dims": outs})
    return cases


def _triton_bases(layout):
    return [[name, [list(v) for v in vectors]] for name, vectors in layout.bases]


def algebra_results(cases):
    """Run each case through Triton in a worker (invert_and_compose can abort)."""
    from triton._C.libtriton.linear_layout import LinearLayout as TritonLL
    results = []
    for case in cases:
        outs = case["out_dims"]
        make = lambda bases, surj=False: TritonLL.from_bases(  # noqa: E731
            bases, [n for n, _ in outs], [s for _, s in outs], surj)
        inner, outer = make(case["inner"]), make(case["outer"], True)
        product = inner * outer
        record = dict(case)
        record["product"] = {"bases": _triton_bases(product),
                             "out_dims": [list(d) for d in product.out_dims]}
        record["pseudo_invert"] = _triton_bases(outer.pseudoinvert())
        results.append(record)
    return results


def invert_and_compose_worker(path_in, path_out):
    from triton._C.libtriton.linear_layout import LinearLayout as TritonLL
    with open(path_in) as f:
        cases = json.load(f)
    with open(path_out, "a") as out:
        for index, case in enumerate(cases):
            out.write(json.dumps({"start": index}) + "\n")
            out.flush()
            outs = case["out_dims"]
            make = lambda bases, surj=False: TritonLL.from_bases(  # noqa: E731
                bases, [n for n, _ in outs], [s for _, s in outs], surj)
            result = make(case["inner"]).invert_and_compose(make(case["outer"], True))
            out.write(json.dumps({"done": index, "bases": _triton_bases(result),
                                  "out_dims": [list(d) for d in result.out_dims]}) + "\n")
            out.flush()


def main():
    import triton
    assert triton.__version__ == "3.6.0", triton.__version__
    cases = distributed_cases()
    results, crashed = convert_all(cases)
    golden = []
    for index, case in enumerate(cases):
        if index in results:
            golden.append({"layout": case["layout"], "shape": case["shape"],
                           "bases": results[index]["bases"]})
    with open(os.path.join(HERE, "distributed_golden.json"), "w") as f:
        json.dump({"source": "triton 3.6.0 GluonOpBuilder.to_linear_layout",
                   "cases": golden}, f, separators=(",", ":"))
    print(f"distributed: {len(golden)} cases, {len(crashed)} rejected by Triton")

    algebra = algebra_results(algebra_cases())
    inv_results, inv_crashed = convert_all(algebra, "--inv-worker")
    for index, record in enumerate(algebra):
        if index in inv_results:
            record["invert_and_compose"] = {"bases": inv_results[index]["bases"],
                                            "out_dims": inv_results[index]["out_dims"]}
    with open(os.path.join(HERE, "algebra_golden.json"), "w") as f:
        json.dump({"source": "triton 3.6.0 triton._C.libtriton.linear_layout.LinearLayout",
                   "cases": algebra}, f, separators=(",", ":"))
    print(f"algebra: {len(algebra)} cases, {len(inv_crashed)} invert_and_compose rejected")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        run_worker(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "--inv-worker":
        invert_and_compose_worker(sys.argv[2], sys.argv[3])
    else:
        main()
