"""Regenerate the shared-memory and TMEM-register golden layouts from Triton 3.6.0 (needs
``pip install triton==3.6.0``; no GPU). The tests only read the JSON files written here.

    python tests/data/layouts/generate_golden_shared_tmem.py

Shared layouts: Triton 3.6's ``GluonOpBuilder.to_linear_layout`` aborts on them (it wraps the
result in a distributed ``LinearEncodingAttr``, whose verifier wants ``register`` first, not
``offset``). Instead we allocate a shared buffer of the layout in a scratch module and reshape
it to 1-D with ``create_memdesc_reshape``: Triton cannot express the flattened buffer in the
original family, so it infers a ``SharedLinearEncodingAttr`` holding its own linear layout
reshaped row-major (``reshapeLayout``), and ``get_gluon_layout_from_memdesc`` hands us those
``offset`` bases. Un-flattening each basis with ``divmod`` by the row length gives Triton's
2-D bases exactly (a row-major reshape of the out dims loses nothing).

TMEM register layouts: ``gluon_ir.compute_tmem_reg_layout`` (what Gluon's
``get_tmem_reg_layout`` calls) runs on the CPU; the ``32x32b_splitn`` variant goes through
Gluon's python wrapper ``_compute_tmem_reg_layout``, which post-processes that result.

Triton's C++ asserts abort the process on some invalid inputs, so cases run in worker
processes; a case that kills its worker is recorded as rejected, like one that raised.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DIMS = [8, 16, 32, 64, 128, 256]
DTYPES = {8: "int8", 16: "float16", 32: "float32"}


def shared_cases(seed=2):
    rng = random.Random(seed)
    cases = []
    for swizzle, bitwidth, transposed in itertools.product([0, 32, 64, 128], [8, 16, 32],
                                                           [False, True]):
        for shape in itertools.product(DIMS, DIMS):
            cases.append({"layout": {"kind": "NVMMASharedLayout",
                                     "swizzle_byte_width": swizzle,
                                     "element_bitwidth": bitwidth, "rank": 2,
                                     "transposed": transposed},
                          "dtype": DTYPES[bitwidth], "shape": list(shape)})
    for vec, per_phase, max_phase, order in itertools.product(
            [1, 2, 4, 8], [1, 2, 4], [1, 2, 4, 8], [[1, 0], [0, 1]]):
        for _ in range(5):
            cases.append({"layout": {"kind": "SwizzledSharedLayout", "vec": vec,
                                     "per_phase": per_phase, "max_phase": max_phase,
                                     "order": order},
                          "dtype": rng.choice(list(DTYPES.values())),
                          "shape": [rng.choice(DIMS), rng.choice(DIMS)]})
    # Clusters: the CTAs of cga_layout split (or, with [0, 0], share) the buffer.
    for cga, shape, swizzle, transposed in itertools.product(
            [[[0, 0]], [[1, 0]], [[0, 1]], [[0, 1], [1, 0]], [[1, 0], [2, 0]]],
            [[128, 128], [256, 64], [64, 256]], [0, 64, 128], [False, True]):
        cases.append({"layout": {"kind": "NVMMASharedLayout", "swizzle_byte_width": swizzle,
                                 "element_bitwidth": 16, "rank": 2, "transposed": transposed,
                                 "cga_layout": cga},
                      "dtype": "float16", "shape": shape})
    for cga, order in itertools.product([[[0, 0]], [[1, 0]], [[0, 1]], [[0, 1], [1, 0]]],
                                        [[1, 0], [0, 1]]):
        cases.append({"layout": {"kind": "SwizzledSharedLayout", "vec": 4, "per_phase": 2,
                                 "max_phase": 4, "order": order, "cga_layout": cga},
                      "dtype": "float16", "shape": [64, 64]})
    return cases


def tmem_cases():
    cases = []
    dtypes = [("float32", 1), ("float16", 1), ("float16", 2), ("int8", 1), ("int8", 4)]
    variants = ["32x32b", "16x64b", "16x128b", "16x256b", "32x32b_splitn"]
    for m, n, (dtype, col_stride), block_m, warps, variant in itertools.product(
            [64, 128, 256], DIMS, dtypes, [64, 128], [4, 8, 16], variants):
        if m == 256 and warps == 16 or dtype == "int8" and warps != 4:
            continue
        for block_n in sorted({n, min(n, 64)}):
            cases.append({"dtype": dtype, "shape": [m, n], "num_warps": warps,
                          "instr_variant": variant,
                          "layout": {"block": [block_m, block_n], "col_stride": col_stride}})
    # Multi-CTA parameters: CTA splits of the TMEM layout, two-CTA mode, and cga_layout
    # (Triton 3.6 aborts on a cga_layout with non-zero bases, so those cases record that).
    for (m, n), split, two_ctas, block_m, cga, variant in itertools.product(
            [(128, 128), (256, 64), (256, 256)], [[2, 1], [1, 2], [2, 2]], [False, True],
            [64, 128], [[], [[0, 0]], [[0, 0], [0, 0]], [[64, 0]]], variants):
        cases.append({"dtype": "float32", "shape": [m, n], "num_warps": 4,
                      "instr_variant": variant, "cga_layout": cga,
                      "layout": {"block": [block_m, 64], "col_stride": 1,
                                 "cta_split_num": split, "two_ctas": two_ctas}})
    return cases


def _gluon_layout(spec):
    import triton.experimental.gluon.language as gl
    args = {k: v for k, v in spec.items() if k != "kind"}
    return getattr(gl, spec["kind"])(**args)


class _SharedProbe:
    """A scratch module whose single function receives one ``local_alloc`` per case."""

    def __init__(self):
        from triton._C.libtriton import gluon_ir, ir
        self.context = ir.context()
        ir.load_dialects(self.context)
        self.builder = gluon_ir.GluonOpBuilder(self.context)
        self.module = self.builder.create_module()
        fn = self.builder.get_or_insert_function(self.module, "probe",
                                                 self.builder.get_function_ty([], []),
                                                 "public", False)
        self.module.push_back(fn)
        self.builder.set_insertion_point_to_start(fn.add_entry_block())

    def bases(self, case):
        import triton.experimental.gluon.language as gl
        b = self.builder
        shape = case["shape"]
        layout = _gluon_layout(case["layout"])
        ty = b.get_shared_mem_desc_ty(getattr(gl, case["dtype"]).to_ir(b), shape,
                                      layout._to_ir(b), shape)
        flat = b.create_memdesc_reshape(b.create_local_alloc(ty), [shape[0] * shape[1]])
        result = b.get_gluon_layout_from_memdesc(flat)
        if type(result).__name__ != "SharedLinearLayout":
            raise TypeError(f"reshape kept {result!r}, no linear form to read")
        return {"offset": [list(divmod(v[0], shape[1])) for v in result.offset_bases],
                "block": [list(divmod(v[0], shape[1])) for v in result.block_bases]}


def _tmem_bases(case):
    import triton.experimental.gluon.language as gl
    from triton.experimental.gluon.language._semantic import _compute_tmem_reg_layout
    from triton.experimental.gluon.language.nvidia.blackwell import TensorMemoryLayout
    spec = case["layout"]
    split = spec.get("cta_split_num")
    layout = TensorMemoryLayout(tuple(spec["block"]), spec["col_stride"],
                                tuple(split) if split else None, spec.get("two_ctas", False))
    result = _compute_tmem_reg_layout(getattr(gl, case["dtype"]), case["shape"], layout,
                                      case["num_warps"], case["instr_variant"],
                                      case.get("cga_layout", []))
    return [result.reg_bases, result.lane_bases, result.warp_bases, result.block_bases]


def run_worker(kind, path_in, path_out):
    """Convert each case of ``path_in``; append one JSON line per finished case."""
    probe = _SharedProbe() if kind == "shared" else None
    with open(path_in) as f:
        cases = json.load(f)
    with open(path_out, "a") as out:
        for index, case in enumerate(cases):
            out.write(json.dumps({"start": index}) + "\n")
            out.flush()
            try:
                record = {"bases": probe.bases(case) if probe else _tmem_bases(case)}
            except Exception as error:  # Triton's own rejection: keep its words
                record = {"error": f"{type(error).__name__}: {error}".strip()[:300]}
            record["done"] = index
            out.write(json.dumps(record) + "\n")
            out.flush()


def convert_all(kind, cases):
    """Run workers, restarting past each case that aborts its worker."""
    tmp_in = os.path.join(HERE, f".{kind}_cases.json")
    tmp_out = os.path.join(HERE, f".{kind}_results.jsonl")
    results = {}
    start = 0
    while start < len(cases):
        with open(tmp_in, "w") as f:
            json.dump(cases[start:], f)
        if os.path.exists(tmp_out):
            os.remove(tmp_out)
        run = subprocess.run([sys.executable, __file__, "--worker", kind, tmp_in, tmp_out],
                             stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        last_started = -1
        with open(tmp_out) as f:
            for line in f:
                record = json.loads(line)
                if "start" in record:
                    last_started = record["start"]
                else:
                    results[start + record.pop("done")] = record
        if last_started == -1 or start + last_started in results:
            break
        lines = [line for line in run.stderr.splitlines() if "ERROR" in line or
                 "Assertion" in line]
        results[start + last_started] = {
            "error": "abort: " + (lines[-1].strip()[:300] if lines else "no message")}
        start += last_started + 1
    for path in (tmp_in, tmp_out):
        if os.path.exists(path):
            os.remove(path)
    return results


def _write(name, source, cases, results):
    # An abort inside the 1-D reshape (an out-of-range basis for a flattened multi-CTA
    # buffer) says nothing about the layout: such cases are dropped, not kept as rejections.
    probe_failures = [i for i, r in results.items() if "Invalid basis" in r.get("error", "")]
    golden = [dict(case, **results[i]) for i, case in enumerate(cases)
              if i in results and i not in probe_failures]
    if probe_failures:
        print(f"{name}: dropped {len(probe_failures)} cases the reshape probe cannot read")
    with open(os.path.join(HERE, name), "w") as f:
        json.dump({"source": source, "cases": golden}, f, separators=(",", ":"))
    rejected = sum("error" in case for case in golden)
    print(f"{name}: {len(golden)} cases, {rejected} rejected by Triton")


def main():
    import triton
    assert triton.__version__ == "3.6.0", triton.__version__
    cases = shared_cases()
    _write("shared_golden.json",
           "triton 3.6.0: GluonOpBuilder local_alloc -> create_memdesc_reshape to 1-D -> "
           "get_gluon_layout_from_memdesc (SharedLinearLayout), offsets un-flattened "
           "row-major", cases, convert_all("shared", cases))
    cases = tmem_cases()
    _write("tmem_reg_golden.json",
           "triton 3.6.0: triton.experimental.gluon.language._semantic."
           "_compute_tmem_reg_layout (gluon_ir.compute_tmem_reg_layout)",
           cases, convert_all("tmem", cases))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        run_worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
