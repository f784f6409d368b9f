"""Explicit-layout IR -> LLVM IR: one kernel function per module, built with llvmlite.ir.

    kernel = lower_module(module)          # shared_codegen.ir.Module, layouts assigned
    ptx = backend.llvm_to_ptx(kernel.llvm_ir, "sm_90a")

The driver only sets up the function (parameters, launch bounds, alignment facts) and walks
the body; each op's `OpDef.lower(op, ctx)` emits its code (see context.py for the contract).
What it needs decided first (axis analysis, warp-specialization plan, shared-memory offsets,
the descriptors' alias sets) comes from the planning stages of `shared_codegen/stages.py`
through `module.stage_results` and op attributes; a module that did not go through them (a
hand-built one) goes through `shared_codegen.stages.plan_and_lower`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from llvmlite import ir

from shared_codegen.ir.core import Function, Module
from shared_codegen.ir.types import PointerType, ScalarType, TensorDescriptorType, TensorType
from shared_codegen.lowering.context import I8, VOID, LoweringContext, LoweringError, llvm_type
from shared_codegen.lowering.resources import check_target_shared_memory


@dataclass(frozen=True)
class LoweredKernel:
    """What lowering hands the backend and the launcher."""

    name: str
    llvm_ir: str
    shared_bytes: int
    param_kinds: Tuple[str, ...]  # launcher kinds: "ptr", "i32", "fp32", ...
    num_warps: int  # warps to launch (num_warps + warp-specialized workers, padded)
    target: str = "sm_90a"
    # Bytes of global scratch per program (a hidden last "ptr" parameter the launcher fills
    # from tile.set_allocator's allocator) and their alignment; ops/tma/tensormap.py.
    global_scratch_bytes: int = 0
    global_scratch_align: int = 1
    # The PTX ISA version some op needs beyond the target's minimum (module attribute
    # `min_ptx_version`, e.g. tensormap.replace, or `ctx.ptx_floor` set by a lowering rule).
    ptx_version: Optional[Tuple[int, int]] = None
    # Decoding facts of instrumented variants (lowering/debug_checks.py, timeline.py).
    debug_info: Optional[dict] = None
    timeline_info: Optional[dict] = None


MAX_MAXNREG = 255  # the largest per-thread register cap ptxas accepts


def param_kind(ty) -> str:
    if isinstance(ty, PointerType):
        return "ptr"
    if isinstance(ty, ScalarType):
        return ty.name
    if isinstance(ty, TensorDescriptorType):
        return ty.param_kind
    raise LoweringError(f"a kernel parameter of type {ty} cannot be passed from the host")


def _param_llvm_type(ty) -> ir.Type:
    # The launcher packs a bool into one byte, and PTX has no 1-bit parameters: take an i8.
    if isinstance(ty, ScalarType) and ty.bits == 1:
        return I8
    if isinstance(ty, TensorDescriptorType):
        # A pointer with a pointee type: llvmlite spells `byval(<type>)` from it. The map
        # comes first; base, shape and strides follow (TensorDescriptorType.param_bytes).
        return ir.PointerType(ir.ArrayType(I8, ty.param_bytes))
    return llvm_type(ty)


def _tensor_map_param(llmod, lfn, index: int, larg) -> None:
    """A descriptor parameter: the CUtensorMap (and the fields after it) passed by value in
    the kernel's parameter space (`.param .align 64 .b8 p[176]` for rank 2).
    `cp.async.bulk.tensor` reads it through a generic address, which is only legal for a
    `nvvm.grid_constant` parameter: without it NVPTX would copy the struct to local memory,
    and TMA cannot read a tensor map from there (CUDA programming guide, "Using TMA to
    transfer multi-dimensional arrays")."""
    larg.add_attribute("byval")
    larg.attributes.align = 64
    # LLVM 22 upgrades the annotation (1-based parameter index) to the parameter attribute.
    md = llmod.add_metadata([lfn, ir.MetaDataString(llmod, "grid_constant"),
                             llmod.add_metadata([ir.Constant(ir.IntType(32), index + 1)])])
    llmod.add_named_metadata("nvvm.annotations", md)


def _apply_shared_memory_plan(ctx, module: Module) -> None:
    """Give the context the offsets `shared_memory_allocation` recorded on each
    `ttg.local_alloc`, the alias sets of `barrier_insertion` and the scratch base."""
    total = module.stage_results["static_shared_bytes"]
    if not total and not module.stage_results["shared_aliases"]:
        return
    ctx.shared_offsets = dict(module.stage_results["shared_offsets"])
    ctx.shared_aliases = module.stage_results["shared_aliases"]
    ctx.static_shared_bytes = total
    ctx.shared_bytes = max(ctx.shared_bytes, total)


def _require_clusters(llmod, lfn, fn, target: str, num_ctas: int) -> None:
    """A num_ctas kernel: sm_90+, and `.reqnctapercluster num_ctas, 1, 1` (the `cluster_dim`
    annotations), so the driver refuses a launch with another cluster shape."""
    from shared_codegen.lowering.backend import parse_target
    if parse_target(target)[0] < 90:
        raise LoweringError(f"kernel `{fn.name}`: num_ctas={num_ctas} needs thread-block "
                            f"clusters (sm_90 or newer); the target is {target}")
    for axis, size in zip("xyz", (num_ctas, 1, 1)):
        md = llmod.add_metadata([lfn, ir.MetaDataString(llmod, f"cluster_dim_{axis}"),
                                 ir.Constant(ir.IntType(32), size)])
        llmod.add_named_metadata("nvvm.annotations", md)


def _tma_boxes(ctx, fn: Function) -> dict:
    """{kernel parameter index: box} for descriptors whose tensor map the launch must encode
    with another box than the block (multicast slices, ops/tma/multicast.py)."""
    boxes = {}
    for value, box in (getattr(ctx, "tma_boxes", None) or {}).items():
        if value not in fn.args:
            raise LoweringError(f"a multicast TMA load needs its descriptor to be a kernel "
                                f"parameter (the launch encodes its map), got "
                                f"`{value.name_hint or value}`")
        boxes[fn.args.index(value)] = list(box)
    return boxes


def lower_module(module: Module, target: Optional[str] = None) -> LoweredKernel:
    """Lower the kernel of `module` to an LLVM module with one `ptx_kernel` function."""
    fn = module.kernel
    num_warps = int(module.attrs.get("num_warps", 4))
    threads_per_warp = int(module.attrs.get("threads_per_warp", 32))
    target = target or module.attrs.get("target", "sm_90a")
    for a in fn.args:
        if isinstance(a.type, TensorType):
            raise LoweringError(f"kernel argument {a.name_hint or a.index} is a tensor; "
                                f"kernels take pointers and scalars")

    if "shared_aliases" not in module.stage_results:
        raise LoweringError(f"kernel `{fn.name}` reached lowering without its planning stages; "
                            f"use shared_codegen.stages.plan_and_lower for a module built by "
                            f"hand")
    # Warp specialization launches extra warps and fixes a starting register cap.
    warp_spec = module.stage_results["warp_specialization"]
    launch_warps = warp_spec.total_warps if warp_spec else num_warps

    instrument = module.stage_results.get("instrument") or {}
    hidden_kinds = _hidden_param_kinds(fn, instrument)
    llmod = ir.Module(name=fn.name)
    scratch_align = int(module.attrs.get("global_scratch_align", 1))
    scratch_bytes = -(-int(module.attrs.get("global_scratch_bytes", 0)) // scratch_align) * \
        scratch_align
    param_types = [_param_llvm_type(a.type) for a in fn.args]
    if scratch_bytes:
        param_types.append(ir.PointerType(addrspace=1))
    # A persistent kernel (tile/passes/persistent.py) takes the grid its launch asked for.
    persistent = bool(module.attrs.get("persistent_programs"))
    if persistent:
        param_types.append(ir.IntType(32))
    # Instrumented variants: their hidden parameters come last.
    ftype = ir.FunctionType(VOID, param_types + [ir.IntType(64)] * len(hidden_kinds))
    lfn = ir.Function(llmod, ftype, fn.name)
    lfn.calling_convention = "ptx_kernel"
    divisibility = fn.attrs.get("arg_divisibility", {}) or {}
    for i, (arg, larg) in enumerate(zip(fn.args, lfn.args)):
        larg.name = arg.name_hint or f"arg{i}"
        # Specialization found the pointer 16-byte aligned; telling LLVM lets it (and our
        # vectorizer through the axis analysis) use 16-byte accesses.
        if isinstance(arg.type, PointerType) and divisibility.get(i) == 16:
            larg.attributes.align = 16
        if isinstance(arg.type, TensorDescriptorType):
            _tensor_map_param(llmod, lfn, i, larg)
    # Launch bound: `.maxntid` lets ptxas budget registers for exactly this many threads.
    # LLVM 22 upgrades the `maxntidx` annotation into its "nvvm.maxntid" attribute.
    md = llmod.add_metadata([lfn, ir.MetaDataString(llmod, "maxntidx"),
                             ir.Constant(ir.IntType(32), launch_warps * threads_per_warp)])
    llmod.add_named_metadata("nvvm.annotations", md)
    if warp_spec is not None:
        # `.maxnreg`: the cap every warp starts from, which setmaxnreg moves per warpgroup
        # (PTX ISA 9.7.17.1); ptxas takes at most 255 ("Too many maxnreg" above).
        md = llmod.add_metadata([lfn, ir.MetaDataString(llmod, "maxnreg"),
                                 ir.Constant(ir.IntType(32),
                                             min(warp_spec.plan.entry_regs, MAX_MAXNREG))])
        llmod.add_named_metadata("nvvm.annotations", md)

    ctx = LoweringContext(llmod, lfn, num_warps=num_warps, threads_per_warp=threads_per_warp,
                          target=target,
                          axis_info=module.stage_results["axis_info"],
                          fp_fusion=bool(module.attrs.get("enable_fp_fusion")))
    # CTAs per program (a cluster each, docs/clusters.md): program ids become cluster ids.
    ctx.num_ctas = int(module.attrs.get("num_ctas", 1))
    if ctx.num_ctas > 1:
        _require_clusters(llmod, lfn, fn, target, ctx.num_ctas)
    for arg, larg in zip(fn.args, lfn.args):
        value = larg
        if isinstance(arg.type, ScalarType) and arg.type.bits == 1:
            value = ctx.entry_builder.icmp_unsigned("!=", larg, ir.Constant(I8, 0))
        ctx.set(arg, value)
    if scratch_bytes:
        scratch_arg = lfn.args[len(fn.args)]
        scratch_arg.name = "global_scratch"
        ctx.global_scratch, ctx.global_scratch_bytes = scratch_arg, scratch_bytes
    _apply_shared_memory_plan(ctx, module)
    after_scratch = len(fn.args) + (1 if scratch_bytes else 0)
    if persistent:
        ctx.launch_grid = lfn.args[after_scratch]
        ctx.launch_grid.name = "launch_grid"
    hidden = list(lfn.args[after_scratch + persistent:])
    for i, larg in enumerate(hidden):
        larg.name = f"sc_hidden{i}"
    if "debug" in instrument:
        from shared_codegen.lowering import debug_checks

        debug_checks.setup(ctx, fn, hidden[:debug_checks.hidden_param_count(fn)],
                           instrument["debug"])
        hidden = hidden[debug_checks.hidden_param_count(fn):]
    if "timeline" in instrument:
        from shared_codegen.lowering import timeline

        timeline.setup(ctx, hidden[0], launch_warps, instrument["timeline"],
                       timeline.partitions_of(module, num_warps))
    # Tensor memory (tensor_memory_allocation stage): allocated by every warp's entry, before
    # warp specialization splits them, and freed at the end of the default path.
    tensor_memory = module.stage_results.get("tensor_memory")
    if tensor_memory is not None:
        tensor_memory.enter(ctx)
    if warp_spec is not None:
        warp_spec.enter(ctx)
    ctx.lower_block(fn.body.block, list(ctx.get(a) for a in fn.args))
    if not ctx.builder.block.is_terminated:
        if warp_spec is not None:
            warp_spec.exit(ctx)  # several warp_specialize calls: the workers may return now
        if tensor_memory is not None:
            tensor_memory.exit(ctx)
        ctx.builder.ret_void()
    check_shared_limit(ctx, fn, target)
    module.stage_results["barriers"] = ctx.barriers
    module.stage_results["tma_boxes"] = _tma_boxes(ctx, fn)
    kinds = tuple(param_kind(a.type) for a in fn.args) + (("ptr",) if scratch_bytes else ()) \
        + (("i32",) if persistent else ())
    ptx_version = module.attrs.get("min_ptx_version")
    if getattr(ctx, "ptx_floor", None):  # a lowering rule's need (mbarrier on sm_80)
        ptx_version = max(tuple(ptx_version or (0, 0)), ctx.ptx_floor)
    return LoweredKernel(name=fn.name, llvm_ir=str(llmod), shared_bytes=ctx.shared_bytes,
                         param_kinds=kinds + hidden_kinds, num_warps=launch_warps,
                         target=target, global_scratch_bytes=scratch_bytes,
                         global_scratch_align=scratch_align,
                         ptx_version=tuple(ptx_version) if ptx_version else None,
                         debug_info=ctx.debug.info() if ctx.debug is not None else None,
                         timeline_info=ctx.timeline.info() if ctx.timeline is not None
                         else None)


def _hidden_param_kinds(fn: Function, instrument: dict) -> Tuple[str, ...]:
    """Launcher kinds of the parameters an instrumented variant takes after the kernel's own:
    debug mode's record address and pointer extents, the timeline's buffer address."""
    kinds: Tuple[str, ...] = ()
    if "debug" in instrument:
        kinds += ("ptr",) + ("u64",) * sum(isinstance(a.type, PointerType) for a in fn.args)
    if "timeline" in instrument:
        kinds += ("ptr",)
    return kinds




def check_shared_limit(ctx, fn: Function, target: str) -> None:
    """The allocations plus the scratch of conversions and reductions, against the target."""
    check_target_shared_memory(fn.name, ctx.shared_bytes, target,
                               f"{ctx.static_shared_bytes} allocated, the rest scratch")

__all__ = ["LoweredKernel", "lower_module", "param_kind"]
