"""`gl.warp_specialize`: fork the kernel into a default partition and worker partitions that
run concurrently on their own warps (Triton 3.6 Gluon's signature).

    gl.warp_specialize([(consumer, (smem, bars, out_ptr)),      # default partition
                        (producer, (desc, smem, bars))],        # worker partition 0
                       worker_num_warps=[1], worker_num_regs=[24])

The default partition runs on the kernel's `num_warps` warps and may take and return
tensors; each worker runs on `worker_num_warps[i]` extra warps with `worker_num_regs[i]`
registers per thread, and sees only its arguments (scalars, pointers, shared memory and
tensor descriptors: its warps never held the caller's registers). Inside a partition,
`gl.num_warps()` and layouts use the partition's warp count. The op, its checks, interpreter
rule and lowering: `shared_codegen/ops/warp_specialize/definition.py`.

Triton 3.4's form `warp_specialize(default_args, default_partition, worker_args,
worker_partitions, worker_num_warps, worker_num_regs)` is accepted too.
"""

from __future__ import annotations

from typing import List, Tuple

from shared_codegen.frontend.aggregates import is_aggregate
from shared_codegen.frontend.values import builtin, tensor, wrap
from shared_codegen.ir.core import Region
from shared_codegen.ops.control.definition import YieldOp
from shared_codegen.ops.warp_specialize.definition import WarpPlan, WarpSpecializeOp, check_capture


def _flatten(value, what: str, out: List[tensor], check: bool):
    """The runtime values inside `value` (tensors, nested tuples/lists), in order."""
    if isinstance(value, tensor):
        if check:
            check_capture(value.type, what)
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _flatten(v, f"{what}[{i}]", out, check)
    elif is_aggregate(value):  # its fields, in order, like a tuple's
        for name, v in vars(value).items():
            _flatten(v, f"{what}.{name}", out, check)
    return out


def _rebuild(value, handles: List):
    """`value` with its runtime values replaced, in order, by wrapped `handles`."""
    if isinstance(value, tensor):
        h = handles.pop(0)
        return wrap(h, value.type)
    if isinstance(value, tuple):
        return tuple(_rebuild(v, handles) for v in value)
    if isinstance(value, list):
        return [_rebuild(v, handles) for v in value]
    if is_aggregate(value):
        new = object.__new__(type(value))
        for name, v in vars(value).items():
            object.__setattr__(new, name, _rebuild(v, handles))
        return new
    return value


def _partitions(args, kwargs) -> Tuple[list, list, list]:
    """(functions_and_args, worker_num_warps, worker_num_regs) from either signature."""
    names36 = ("functions_and_args", "worker_num_warps", "worker_num_regs")
    legacy = ("default_args", "default_partition", "worker_args", "worker_partitions",
              "worker_num_warps", "worker_num_regs")
    if len(args) > 3 or "default_partition" in kwargs:
        bound = dict(zip(legacy, args), **kwargs)
        missing = [n for n in legacy if n not in bound]
        if missing:
            raise TypeError(f"gl.warp_specialize is missing {', '.join(missing)}")
        pairs = [(bound["default_partition"], bound["default_args"])]
        pairs += list(zip(bound["worker_partitions"], bound["worker_args"]))
        return pairs, bound["worker_num_warps"], bound["worker_num_regs"]
    bound = dict(zip(names36, args), **kwargs)
    bound.setdefault("worker_num_regs", None)  # optional since Triton 3.8
    missing = [n for n in names36 if n not in bound]
    if missing:
        raise TypeError(f"gl.warp_specialize is missing {', '.join(missing)} (Triton 3.6: "
                        f"warp_specialize(functions_and_args, worker_num_warps, "
                        f"worker_num_regs))")
    return list(bound["functions_and_args"]), bound["worker_num_warps"], \
        bound["worker_num_regs"]


def even_register_share(num_warps, worker_num_warps) -> list:
    """Triton 3.8 lets `worker_num_regs` be omitted: every worker then keeps the per-thread
    share of the SM's 64K registers that all warps start with, so no warpgroup gives
    registers away (a multiple of 8 in [24, 256], as setmaxnreg needs)."""
    warps = num_warps + sum(int(w) for w in worker_num_warps)
    warps = -(-warps // 4) * 4
    share = min(256, (65536 // (warps * 32)) // 8 * 8)
    return [max(24, share)] * len(worker_num_warps)


def _check_pairs(pairs) -> None:
    if not pairs:
        raise ValueError("gl.warp_specialize needs at least the default partition")
    for i, pair in enumerate(pairs):
        who = "the default partition" if i == 0 else f"worker partition {i - 1}"
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"{who}: expected a (function, args) pair, got {pair!r}")
        fn, fargs = pair
        if not getattr(fn, "is_jit_function", False):
            raise TypeError(f"{who}: partition functions must be @gluon.jit functions, got "
                            f"{getattr(fn, '__name__', fn)!r}")
        if not isinstance(fargs, (tuple, list)):
            raise TypeError(f"{who}: function arguments must be a tuple, got "
                            f"{type(fargs).__name__}")


@builtin
def warp_specialize(*args, _semantic=None, **kwargs):
    """Run `functions_and_args[0]` on this kernel's warps and each later (function, args) on
    its own `worker_num_warps[i]` warps with `worker_num_regs[i]` registers, concurrently;
    returns what the default partition returns."""
    pairs, worker_num_warps, worker_num_regs = _partitions(args, kwargs)
    pairs = [tuple(p) for p in pairs]
    _check_pairs(pairs)
    worker_num_warps = list(worker_num_warps)
    if worker_num_regs is None:
        worker_num_regs = even_register_share(_semantic.num_warps, worker_num_warps)
    worker_num_regs = list(worker_num_regs)
    if len(worker_num_warps) != len(pairs) - 1:
        raise ValueError(f"gl.warp_specialize got {len(pairs) - 1} worker partitions but "
                         f"{len(worker_num_warps)} warp counts")
    if getattr(_semantic, "in_partition", False):
        raise ValueError("gl.warp_specialize cannot be called inside a partition")
    names = [fn.__name__ for fn, _ in pairs]
    WarpPlan.make(_semantic.num_warps, worker_num_warps, worker_num_regs, names[1:])
    codegen, builder = _semantic.codegen, _semantic.builder
    captures = [_flatten(fargs, f"the arguments of worker partition {i} (`{names[i + 1]}`)",
                         [], True)
                for i, (_, fargs) in enumerate(pairs[1:])]

    # The default partition first: its results give the op's result types.
    default = Region()
    _semantic.in_partition = True
    try:
        with builder.at_end_of(default.block):
            result = codegen.call_function(pairs[0][0], list(pairs[0][1]), {})
            results = _flatten(result, "the default partition's result", [], False)
            YieldOp.build(builder, [r.handle for r in results])
        op = WarpSpecializeOp.build(builder, [[v.handle for v in caps] for caps in captures],
                                    [r.handle.type for r in results], worker_num_warps,
                                    worker_num_regs, names)
        op.regions[0] = default
        default.parent = op
        saved_warps = _semantic.num_warps
        for i, ((fn, fargs), caps) in enumerate(zip(pairs[1:], captures)):
            block = op.regions[i + 1].block
            handles = list(block.args)
            for h, v in zip(handles, caps):
                h.name_hint = getattr(v.handle, "name_hint", "")
            _semantic.num_warps = worker_num_warps[i]
            try:
                with builder.at_end_of(block):
                    codegen.call_function(fn, [_rebuild(a, handles) for a in fargs], {})
                    YieldOp.build(builder, [])
            finally:
                _semantic.num_warps = saved_warps
    finally:
        _semantic.in_partition = False
    if result is None:
        return None
    return _rebuild(result, list(op.results))


__all__ = ["warp_specialize"]
