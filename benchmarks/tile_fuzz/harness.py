"""Running a fuzzed program: inputs, the numpy reference, a kernel loaded from its source
text, and the comparison that says whether an output agrees."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field

import numpy as np

from . import evaluate as E
from .program import Program, is_float, load_shape, out_shape
from .reductions import dot, reduce, scan, sort_or_flip
from .reference import NP, Value, broadcast, f64
from .reference import _cast_value as cast_value
from .typing_rules import binary_result, literal_dtype


def make_inputs(program: Program, m: int, n: int, seed: int) -> list:
    """One array per load, shaped by the extents: small or full-range integers, floats on a
    grid (so exact ties and integers occur) or uniform, now and then zeros and infinities."""
    rng = np.random.default_rng(seed)
    arrays = []
    for load in program.loads:
        shape = load_shape(program, load.kind, m, n)
        dtype = load.dtype
        mode = rng.integers(0, 4)
        if not is_float(dtype):
            info = np.iinfo(NP[dtype])
            if mode == 0:
                lo, hi = int(info.min), int(info.max)
            else:
                lo, hi = max(int(info.min), -20), min(int(info.max), 20)
            data = rng.integers(lo, hi, size=shape, endpoint=True, dtype=NP[dtype])
        else:
            data = rng.uniform(-4.0, 4.0, size=shape)
            if mode == 0:
                data = np.round(data * 4) / 4  # quarter grid: exact ties, integers
            elif mode == 1:
                special = rng.random(shape) < 0.1
                data = np.where(special, rng.choice([0.0, -0.0, np.inf, -np.inf, 1e4], shape),
                                data)
            data = data.astype(NP[dtype])
        arrays.append(np.ascontiguousarray(data))
    return arrays


def reference(program: Program, inputs: list) -> Value:
    """The stored value of every program, stacked (program p reads slice p of the inputs)."""
    per_program = [reference_of_one(program, [a[p] for a in inputs])
                   for p in range(program.grid)]
    first = per_program[0]
    return Value(*(np.stack([getattr(v, f) for v in per_program]) for f in
                   ("val", "err", "unsure")), first.dtype, first.kind)


def reference_of_one(program: Program, inputs: list) -> Value:
    values: list = []
    load_index = 0
    for node in program.nodes:
        if node.op == "load":
            values.append(E.load(program, node, inputs[load_index]))
            load_index += 1
            continue
        if node.op == "arg":
            value = program.int_arg if node.attr[0] == "s_int" else program.float_arg
            arr = np.array(value, dtype=NP[node.dtype])
            values.append(Value(arr, np.zeros(()), np.zeros((), bool), node.dtype, "scalar"))
            continue
        args = [broadcast(values[a], node.kind, program)
                if node.op not in ("reduce", "scan", "dot", "trans", "sort", "flip") else values[a]
                for a in node.args]
        if node.op == "binary":
            sym, literal = node.attr
            if literal is not None:
                args.append(E._const(literal, literal_dtype(literal), args[0]))
            ct, out = binary_result(sym, args[0].dtype, args[1].dtype, literal is not None)
            values.append(E.binary(sym, args[0], args[1], ct, out))
        elif node.op == "unary":
            values.append(E.unary(node.attr[0], args[0]))
        elif node.op == "cast":
            values.append(cast_value(args[0], node.dtype))
        elif node.op == "where":
            values.append(E.where(args[0], args[1], args[2], node.dtype))
        elif node.op == "fma":
            values.append(E.fma(*args, node.dtype))
        elif node.op == "clamp":
            values.append(E.clamp(args[0], *node.attr, node.dtype))
        elif node.op == "reduce":
            values.append(reduce(node.attr[0], node.attr[1], args[0], node.kind))
        elif node.op in ("sort", "flip"):
            values.append(sort_or_flip(node.op, node.attr, args[0]))
        elif node.op == "scan":
            values.append(scan(*node.attr, args[0]))
        elif node.op == "trans":
            v = args[0]
            values.append(type(v)(v.val.T, v.err.T, v.unsure.T, v.dtype, v.kind))
        elif node.op == "loop":
            sym, trips = node.attr
            acc = args[0]
            for _ in range(trips):
                acc = E.binary(sym, acc, args[1], node.dtype, node.dtype)
            values.append(acc)
        elif node.op == "dot":
            values.append(dot(args[0], args[1], node.dtype))
        else:
            raise ValueError(f"the reference has no rule for {node.op}")
        got = values[-1]
        assert got.dtype == node.dtype, (node, got.dtype)
    return values[program.output]


def crop(value: Value, program: Program, m: int, n: int):
    """The stored part of the output value: (values, err, unsure) at extents (m, n)."""
    kind = program.out_kind
    sl = (slice(None),) + {"2d": (slice(0, m), slice(0, n)), "row": (slice(0, n),),
                           "col": (slice(0, m),), "scalar": ()}[kind]
    arrays = [np.asarray(a)[sl] for a in (value.val, value.err, value.unsure)]
    return [a.reshape(out_shape(program, m, n)) for a in arrays]


@dataclass
class Verdict:
    ok: bool
    checked: int = 0
    skipped: int = 0
    detail: str = ""
    worst: list = field(default_factory=list)


def compare(actual: np.ndarray, expected, err, unsure, dtype: str) -> Verdict:
    """Elementwise: equal where err is 0 (NaN matches NaN), within err elsewhere; unsure
    elements skipped."""
    actual = np.asarray(actual).reshape(expected.shape)
    if is_float(dtype):
        a, e = f64(actual), f64(expected)
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        with np.errstate(invalid="ignore", over="ignore"):
            within = np.abs(a - e) <= err * 1.0001
        good = same | (within & (err > 0))
    else:
        good = np.asarray(actual) == np.asarray(expected)
    good = good | unsure
    checked = int((~unsure).sum())
    if good.all():
        return Verdict(True, checked, int(unsure.sum()))
    bad = np.argwhere(~good)
    worst = [(tuple(int(i) for i in idx), _item(actual[tuple(idx)]),
              _item(expected[tuple(idx)]), float(err[tuple(idx)])) for idx in bad[:5]]
    detail = (f"{len(bad)} of {actual.size} elements differ; first (index, got, expected, "
              f"bound): {worst}")
    return Verdict(False, checked, int(unsure.sum()), detail, worst)


def _item(x):
    x = np.asarray(x)
    return x.item() if x.dtype.kind in "biuf" else float(x.astype(np.float64))


def load_kernel(source: str, folder: str):
    """The `kernel` of `source`, written to a file named by its hash (kernels read their own
    source, and a file that stays lets a failure be rerun)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    name = f"fuzz_{digest}"
    if name in sys.modules:
        return sys.modules[name].kernel
    path = os.path.join(folder, name + ".py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.kernel


def run_interpreter(program: Program, kernel, inputs: list, m: int, n: int) -> np.ndarray:
    out = np.zeros(out_shape(program, m, n), dtype=NP[program.out_dtype])
    kernel[(program.grid,)](*inputs, out, m, n, program.int_arg, program.float_arg,
                            BLOCK_M=program.block_m, BLOCK_N=program.block_n,
                            num_warps=program.num_warps)
    return out


def check_interpreter(program: Program, kernel, m: int, n: int, seed: int) -> Verdict:
    inputs = make_inputs(program, m, n, seed)
    expected = crop(reference(program, inputs), program, m, n)
    actual = run_interpreter(program, kernel, inputs, m, n)
    return compare(actual, *expected, program.out_dtype)
