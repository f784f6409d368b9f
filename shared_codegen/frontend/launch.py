"""The launch path of `kernel[grid](...)`: pick the interpreter or the GPU, specialize, compile
on a miss, and launch.

The GPU fast path is one argument binding, one specialization key (a tuple built by per-type
handlers), one dict lookup, and the binder's pack + cuLaunchKernel.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from typing import Any, Dict

import numpy as np

from shared_codegen import config
from shared_codegen.errors import ArgumentError, CompilationError, OutOfResources
from shared_codegen.frontend.cluster_launch import MAX_CLUSTER_CTAS, check_num_ctas, cluster_grid
from shared_codegen.frontend.guards import guards_ok, make_check
from shared_codegen.frontend.jit import Specialization
from shared_codegen.frontend.relaunch import attach_relaunch
from shared_codegen.frontend.values import constexpr
from shared_codegen.ir.types import (BY_NAME, IRType, PointerType, TensorDescriptorType,
                                     from_host_dtype)
from shared_codegen.lowering.libdevice import check_extern_libs
from shared_codegen.runtime.specialize import (SpecializationError, _hashable_constexpr, key_of,
                                              register_handler)

DEFAULT_NUM_WARPS = 4
# Triton's default: what a launch or an autotune Config without `num_stages` asks for.
DEFAULT_NUM_STAGES = 3


def _numpy_key(arr) -> tuple:
    dt = from_host_dtype(arr.dtype)
    if dt is None:
        raise SpecializationError(f"numpy dtype {arr.dtype} is not supported by kernels")
    aligned = arr.__array_interface__["data"][0] % 16 == 0
    return ("*" + dt.name, "D" if aligned else "")


def _scalar_numpy_key(x) -> tuple:
    dt = from_host_dtype(np.asarray(x).dtype)
    if dt is None:
        return ("fp32", "")
    if dt.is_floating():
        return ("fp32" if dt.bits <= 32 else "fp64", "")
    return key_of(int(x))


def _register_numpy_handlers():
    register_handler(np.ndarray, _numpy_key)
    for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64, np.bool_):
        register_handler(t, _scalar_numpy_key)


_register_numpy_handlers()


def _is_host_array(arg) -> bool:
    if isinstance(arg, np.ndarray):
        return True
    if getattr(arg, "on_host", False) is True:  # a tensor descriptor over a host array
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(arg, torch.Tensor) and arg.device.type == "cpu"


def call_grid(jit_fn, grid, meta: Dict[str, Any]):
    """A grid function's grid. It gets the kernel's arguments by name (Triton's `META`); a
    name it asks for that is not one of them is reported with the names there are."""
    try:
        return grid(meta)
    except KeyError as exc:
        if not exc.args or exc.args[0] in meta:
            raise
        raise ArgumentError(f"the grid function of {jit_fn.__name__} asks for "
                            f"META[{exc.args[0]!r}], which is not a parameter of "
                            f"{jit_fn.__name__} (parameters: {', '.join(meta)})") from exc


def normalize_grid(jit_fn, grid, meta: Dict[str, Any]):
    if callable(grid):
        grid = call_grid(jit_fn, grid, meta)
    if isinstance(grid, int):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
        raise ArgumentError(f"grid of {jit_fn.__name__} must be a tuple of 1 to 3 ints, got "
                            f"{grid!r}" + (f" ({len(grid)} dimensions)"
                                           if isinstance(grid, (tuple, list)) else ""))
    out = []
    for i, g in enumerate(grid):
        g = getattr(g, "value", g)
        if not isinstance(g, (int, np.integer)) or isinstance(g, bool) or g < 0:
            raise ArgumentError(f"grid dimension {i} of {jit_fn.__name__} must be a "
                                f"non-negative int, got {g!r}")
        out.append(int(g))
    return tuple(out) + (1,) * (3 - len(out))


def specialization_key(jit_fn, values) -> tuple:
    """The specialization key of `values` (the arguments in parameter order), computed once
    per launch by the kernel's `Specializer` (runtime/specialize.py): here, or inlined in
    `_run_gpu`. Errors name the parameter."""
    try:
        return jit_fn.specializer.key(values)
    except SpecializationError as exc:
        raise _argument_error(jit_fn, values, exc) from None


def _argument_error(jit_fn, values, exc: SpecializationError) -> ArgumentError:
    # Name the parameter: the specializer only knows positions.
    for i, v in enumerate(values):
        try:
            if i in jit_fn.constexpr_positions:
                _hashable_constexpr(v)
            else:
                key_of(v)
        except SpecializationError as inner:
            return ArgumentError(f"argument `{jit_fn.arg_names[i]}` of {jit_fn.__name__}: "
                                 f"{inner}")
    return ArgumentError(str(exc))


def make_specialization(jit_fn, values, num_warps, target,
                        num_stages=None, num_ctas=1) -> Specialization:
    spec = Specialization.from_key(specialization_key(jit_fn, values), num_warps, target,
                                   DEFAULT_NUM_STAGES if num_stages is None else num_stages)
    spec.num_ctas = num_ctas
    return spec


def run_bound(jit_fn, values, options, grid, num_warps, stream, fast_key=None):
    """The full path for the fast launcher: `values` are already in parameter order."""
    options = dict(options)
    known = {"num_stages", "num_ctas", "interpret", "target", "warmup", "maxnreg",
             "cluster_dims", "extern_libs", "timeline", "launch_pdl"} | IGNORED_LAUNCH_OPTIONS
    unknown = [k for k in options if k not in known]
    if unknown:
        raise ArgumentError(f"{jit_fn.__name__}() got an unexpected keyword argument "
                            f"'{unknown[0]}'")
    num_ctas = check_num_ctas(jit_fn, options.get("num_ctas", 1), options.get("cluster_dims"))
    launch_pdl = check_launch_pdl(jit_fn, options.get("launch_pdl", False))
    warn_unapplied_options(jit_fn, options.get("maxnreg"))
    check_extern_libs(jit_fn.__name__, options.get("extern_libs"))
    values = [v.value if isinstance(v, constexpr) else v for v in values]
    return _dispatch(jit_fn, values, grid, num_warps, options.get("interpret"),
                     options.get("target"), stream, options.get("warmup", False), fast_key,
                     options.get("cluster_dims"), options.get("num_stages"),
                     instrumentation(jit_fn, options.get("debug"), options.get("timeline")),
                     num_ctas, launch_pdl)


# Launch keywords upstream tests pass that change nothing here: we never insert overflow
# checks. `debug` is read by `instrumentation` before the rest are dropped.
IGNORED_LAUNCH_OPTIONS = frozenset({"sanitize_overflow", "debug"})


def instrumentation(jit_fn, debug=None, timeline=None) -> tuple:
    """The instrumentation a launch asks for (Specialization.instrument): GPU debug mode from
    `debug=` at launch, else `@jit(debug=True)` or SC_DEVICE_DEBUG; the timeline from
    `timeline=` at launch, else SC_TIMELINE. Empty (an ordinary kernel) when neither."""
    if debug is None:
        debug = bool(jit_fn.debug) or bool(config.get("SC_DEVICE_DEBUG"))
    if timeline is None:
        timeline = bool(config.get("SC_TIMELINE"))
    for name, value in (("debug", debug), ("timeline", timeline)):
        if not isinstance(value, (bool, int)) or isinstance(value, int) and value not in (0, 1):
            raise ArgumentError(f"{jit_fn.__name__}: {name} must be True or False, got "
                                f"{value!r}")
    if not debug and not timeline:  # every ordinary launch: read no more settings
        return ()
    wait_ms = int(config.get("SC_DEVICE_DEBUG_WAIT_MS"))
    if debug and wait_ms <= 0:
        raise ArgumentError(f"SC_DEVICE_DEBUG_WAIT_MS must be a positive number of "
                            f"milliseconds, got {wait_ms}")
    capacity = int(config.get("SC_TIMELINE_EVENTS"))
    if timeline and capacity <= 0:
        raise ArgumentError(f"SC_TIMELINE_EVENTS must be a positive number of events, got "
                            f"{capacity}")
    return ((("debug", wait_ms),) if debug else ()) + ((("timeline", capacity),) if timeline
                                                       else ())


def run(jit_fn, args, kwargs, grid, num_warps, num_stages, interpret, target, stream, warmup,
        num_ctas=1, cluster_dims=None, maxnreg=None, launch_pdl=False):
    num_ctas = check_num_ctas(jit_fn, num_ctas, cluster_dims)
    launch_pdl = check_launch_pdl(jit_fn, launch_pdl)
    warn_unapplied_options(jit_fn, maxnreg)
    kwargs = dict(kwargs)
    instrument = instrumentation(jit_fn, kwargs.get("debug"), kwargs.pop("timeline", None))
    kwargs = fill_num_warps_param(jit_fn, args, kwargs, num_warps)
    if num_stages is not None and "num_stages" in jit_fn.arg_names and "num_stages" not in \
            kwargs and jit_fn.arg_names.index("num_stages") >= len(args):
        # A kernel parameter named like the launch option gets its value too, as in Triton
        # (tutorial 02's `softmax_kernel.warmup(..., num_stages=num_stages)`).
        kwargs["num_stages"] = num_stages
    if num_warps is None and "num_warps" in jit_fn.constexpr_names:
        num_warps = jit_fn.bind_args(args, kwargs)[jit_fn.arg_names.index("num_warps")]
    values = jit_fn.bind_args(args, kwargs)
    return _dispatch(jit_fn, values, grid, num_warps, interpret, target, stream, warmup,
                     cluster_dims=cluster_dims, num_stages=num_stages, instrument=instrument,
                     num_ctas=num_ctas, launch_pdl=launch_pdl)



def check_num_stages(jit_fn, num_stages) -> int:
    """The launch's `num_stages` (default 3, as Triton): the tile pipeliner's depth."""
    if num_stages is None:
        return DEFAULT_NUM_STAGES
    if type(num_stages) is not int or num_stages < 0:
        raise ArgumentError(f"{jit_fn.__name__}: num_stages must be an int >= 0, got "
                            f"{num_stages!r}")
    return max(1, num_stages)  # 0 and 1 both mean no pipelining


def check_launch_pdl(jit_fn, launch_pdl) -> bool:
    """The launch's `launch_pdl` (Triton 3.6's programmatic dependent launch option, default
    False): the kernel may start while the previous kernel on the stream still runs, and
    waits for it at `tl.extra.cuda.gdc_wait()`. Only a bool: a truthy stand-in (1, "yes")
    would silently change how the launch synchronizes."""
    if launch_pdl is True or launch_pdl is False:
        return launch_pdl
    if isinstance(launch_pdl, np.bool_):
        return bool(launch_pdl)
    raise ArgumentError(f"{jit_fn.__name__}: launch_pdl must be True or False, got "
                        f"{launch_pdl!r}")


def warn_unapplied_options(jit_fn, maxnreg) -> None:
    """Launch options Triton accepts that nothing here applies yet: say so instead of
    dropping them."""
    if maxnreg is not None:
        warnings.warn(f"{jit_fn.__name__}: maxnreg={maxnreg} is ignored: a per-thread "
                      f"register cap from the launch is not implemented yet (ptxas picks the "
                      f"count from the launch bound)", UserWarning, stacklevel=4)


def check_cluster_dims(jit_fn, cluster_dims, grid3):
    """The (x, y, z) cluster shape, checked against the grid; None for an ordinary launch."""
    if cluster_dims is None:
        return None
    dims = (cluster_dims,) if isinstance(cluster_dims, int) else tuple(cluster_dims)
    if not 1 <= len(dims) <= 3 or not all(type(d) is int and d >= 1 for d in dims):
        raise ArgumentError(f"{jit_fn.__name__}: cluster_dims must be 1 to 3 positive ints, got "
                            f"{cluster_dims!r}")
    dims = dims + (1,) * (3 - len(dims))
    if dims[0] * dims[1] * dims[2] > MAX_CLUSTER_CTAS:
        raise ArgumentError(f"{jit_fn.__name__}: cluster_dims={dims} has "
                            f"{dims[0] * dims[1] * dims[2]} CTAs; the portable cluster size is "
                            f"at most {MAX_CLUSTER_CTAS}")
    for axis, (g, c) in enumerate(zip(grid3, dims)):
        if g % c:
            raise ArgumentError(f"{jit_fn.__name__}: grid {tuple(grid3)} is not a multiple of "
                                f"cluster_dims {dims} (axis {axis}: {g} % {c} != 0)")
    return dims


def _dispatch(jit_fn, values, grid, num_warps, interpret, target, stream, warmup,
              fast_key=None, cluster_dims=None, num_stages=None, instrument=(), num_ctas=1,
              launch_pdl=False):
    num_warps = DEFAULT_NUM_WARPS if num_warps is None else num_warps
    num_stages = check_num_stages(jit_fn, num_stages)
    if not isinstance(num_warps, int) or num_warps < 1 or num_warps & (num_warps - 1):
        raise ArgumentError(f"{jit_fn.__name__}: num_warps must be a power of two >= 1, got "
                            f"{num_warps!r}")
    if interpret is None:
        interpret = bool(config.get("SC_INTERPRET")) or any(map(_is_host_array, values))
        if not interpret:
            from shared_codegen.runtime.driver import has_gpu

            interpret = not has_gpu()
    if interpret and warmup:
        return attach_relaunch(_compile_without_gpu(jit_fn, values, num_warps, target,
                                                    num_stages, num_ctas),
                               jit_fn, values, num_warps, num_stages, target, num_ctas,
                               launch_pdl)
    if interpret:
        # The interpreter checks bounds and deadlocks always; a timeline it records with a
        # logical clock (runtime/timeline.TimelineRecorder). `launch_pdl` changes nothing
        # there: launches run one after another, each to completion.
        return _run_interpreted(jit_fn, values, grid, num_warps, cluster_dims, num_stages,
                                timeline="timeline" in dict(instrument), num_ctas=num_ctas)
    return _run_gpu(jit_fn, values, grid, num_warps, target, stream, warmup, fast_key,
                    cluster_dims, num_stages, instrument, num_ctas, launch_pdl)


def _compile_without_gpu(jit_fn, values, num_warps, target, num_stages=DEFAULT_NUM_STAGES,
                         num_ctas=1):
    """`kernel.warmup(...)` where the kernel would be interpreted (host arrays, no GPU): like
    Triton, compile without running, for `target` (default SC_TARGET, else sm_90a), and
    return the CompiledKernel, whose `.asm` holds every stage."""
    from shared_codegen.frontend.compile import compile_spec
    from shared_codegen.interpreter.memory import host_array

    host_values = [v if i in jit_fn.constexpr_positions or host_array(v) is None
                   else host_array(v) for i, v in enumerate(values)]
    target = target or config.get("SC_TARGET") or "sm_90a"
    return compile_spec(jit_fn, make_specialization(jit_fn, host_values, num_warps, target,
                                                    num_stages, num_ctas))


# ---- interpreter ---------------------------------------------------------------------------

def _run_interpreted(jit_fn, values, grid, num_warps, cluster_dims=None,
                     num_stages=DEFAULT_NUM_STAGES, timeline=False, num_ctas=1):
    from shared_codegen.frontend.sanitize import check_arguments, needs_concurrent_programs
    from shared_codegen.interpreter.memory import Memory, host_array
    from shared_codegen.interpreter.run import run_kernel
    from shared_codegen.interpreter.world import current_collector

    meta = dict(zip(jit_fn.arg_names, values))
    grid3 = normalize_grid(jit_fn, grid, meta)
    # `cluster_dims` clusters independent programs (they share nothing the interpreter
    # models), so they run as usual once the shape is checked; `num_ctas` clusters run their
    # CTAs co-scheduled (interpreter/cluster.py).
    check_cluster_dims(jit_fn, cluster_dims, grid3)
    host_values = []
    for i, v in enumerate(values):
        if i in jit_fn.constexpr_positions:
            host_values.append(v)
            continue
        arr = host_array(v)
        if arr is None and (hasattr(v, "__cuda_array_interface__") or hasattr(v, "data_ptr")):
            raise ArgumentError(f"argument `{jit_fn.arg_names[i]}` of {jit_fn.__name__} lives on "
                                "the GPU; the CPU interpreter needs host arrays (numpy or CPU "
                                "torch tensors)")
        host_values.append(arr if arr is not None else v)
    spec = make_specialization(jit_fn, host_values, num_warps, "interpreter", num_stages,
                               num_ctas)
    # SC_TARGET picks the instructions (tl.dot) of the IR the interpreter runs.
    cache_key = ("interp", spec.key, num_warps, config.get("SC_TARGET"), num_stages, num_ctas)
    # Traced modules of this specialization, newest first; one is reused only while the
    # globals it folded in still hold (frontend/guards.py).
    module = _pick_variant(jit_fn, cache_key,
                           lambda m: guards_ok(getattr(m, "external_reads", ())))
    if module is None:
        # The IR after the language's passes (for the tile DSL: layouts assigned, conversions
        # inserted), the IR that is lowered, so a pass bug shows on the CPU too.
        from shared_codegen.frontend.compile import explicit_layout_module
        from shared_codegen.ir.verifier import verify_module

        module = explicit_layout_module(jit_fn, spec, verify=False)
        verify_module(module)
        _add_variant(jit_fn, cache_key, module)
    # Arguments the kernel writes but must not (read-only, aliased) are refused before any
    # program runs: the host array behind each kernel parameter (frontend/sanitize.py).
    params = [i for i, ty in enumerate(spec.arg_types) if ty is not None]
    check_arguments(module, jit_fn.__name__,
                    [host_values[i] if isinstance(spec.arg_types[i], PointerType) else
                     host_array(getattr(host_values[i], "base", None))
                     if isinstance(spec.arg_types[i], TensorDescriptorType) else None
                     for i in params], [jit_fn.arg_names[i] for i in params])
    # Inside `SimulatedWorld.launch`, every rank maps into the world's memory and hands its
    # launch over; the world runs all ranks' programs together (interpreter/world.py).
    world = current_collector()
    memory = world.memory if world is not None else Memory()
    if timeline:
        from shared_codegen.runtime.timeline import TimelineRecorder

        memory.timeline = TimelineRecorder()  # read by proton.record's interpreter rule
    kernel_args = []
    for i, v in enumerate(host_values):
        ty = spec.arg_types[i]
        if ty is None:
            continue
        if isinstance(ty, PointerType):
            kernel_args.append(np.int64(memory.map(jit_fn.arg_names[i], v)))
        elif isinstance(ty, TensorDescriptorType):
            # A host tensor descriptor maps its base array and gives the interpreter's view.
            kernel_args.append(v.interpreter_value(memory, jit_fn.arg_names[i]))
        else:
            kernel_args.append(np.asarray(v, dtype=ty.np)[()])
    if 0 in grid3:
        return None
    if world is not None:
        world.add(module, kernel_args, grid3)
        return None
    concurrent = getattr(module, "needs_concurrent_programs", None)
    if concurrent is None:
        concurrent = module.needs_concurrent_programs = needs_concurrent_programs(module.kernel)
    run_kernel(module, kernel_args, grid3, memory, concurrent)
    if timeline:
        jit_fn.last_timeline = memory.timeline.timeline(jit_fn.__name__)
    return None


# ---- GPU -----------------------------------------------------------------------------------

class _Variant:
    __slots__ = ("kernel", "function", "binder", "runtime_positions", "shared", "num_warps",
                 "check", "scratch", "scratch_align", "pointer_positions")


# Variants of one specialization kept for other values of the globals a kernel reads.
_MAX_GLOBAL_VARIANTS = 8


def _pick_variant(jit_fn, key, valid):
    """The variant `jit_fn._variants[key]` if its folded globals still hold, else an older one
    of the same specialization whose do (it becomes the current one), else None."""
    variant = jit_fn._variants.get(key)
    if variant is None or valid(variant):
        return variant
    older = jit_fn._older_variants.get(key, [])
    for i, v in enumerate(older):
        if valid(v):
            older[i] = variant
            jit_fn._variants[key] = v
            return v
    return None


def _add_variant(jit_fn, key, variant):
    previous = jit_fn._variants.get(key)
    if previous is not None:
        older = jit_fn._older_variants.setdefault(key, [])
        older.insert(0, previous)
        del older[_MAX_GLOBAL_VARIANTS:]
    jit_fn._variants[key] = variant


def _run_gpu(jit_fn, values, grid, num_warps, target, stream, warmup, fast_key=None,
             cluster_dims=None, num_stages=DEFAULT_NUM_STAGES, instrument=(), num_ctas=1,
             launch_pdl=False):
    from shared_codegen.runtime.launcher import current_stream

    # `specialization_key`, inlined: calls the fast path hands over (a callable grid, launch
    # options) come through here on every launch.
    try:
        spec_key = jit_fn.specializer.key(values)
    except SpecializationError as exc:
        raise _argument_error(jit_fn, values, exc) from None
    key = (spec_key, num_warps, target, num_stages) + ((instrument,) if instrument else ()) \
        + ((("num_ctas", num_ctas),) if num_ctas != 1 else ())
    variant = _pick_variant(jit_fn, key, lambda v: v.check is None or v.check())
    if variant is None:
        # (Called as before for ordinary kernels: tests replace _compile_variant.)
        variant = _compile_variant(jit_fn, spec_key, num_warps, target, num_stages,
                                   instrument=instrument, num_ctas=num_ctas) \
            if instrument or num_ctas != 1 else \
            _compile_variant(jit_fn, spec_key, num_warps, target, num_stages)
        _add_variant(jit_fn, key, variant)
    # Kernels that need global scratch (tensor maps they write) allocate it per launch, which
    # the fast path does not do; instrumented launches pass hidden arguments too. The fast
    # key holds the launch's num_stages as passed (None, 0..n), which fixes the depth
    # compiled here, so any depth may use the fast path. `launch_pdl` is not in the key: it
    # changes no code, and the fast launcher picks the launch call by it on every launch.
    scratch = getattr(variant, "scratch", 0)
    if fast_key is not None and target is None and not scratch and not instrument \
            and num_ctas == 1:
        # Later launches with the same fast key skip this whole function (fastpath.py). A
        # kernel that folded globals in is only served by a launcher that checks them.
        jit_fn._fast_guarded_variants[fast_key] = variant
        if variant.check is None:
            jit_fn._fast_variants[fast_key] = variant
        else:
            jit_fn._fast_variants.pop(fast_key, None)
            if not jit_fn._fast_guarded:
                jit_fn._fast_guarded = True
                jit_fn._fast_launch = None
    if warmup:
        return attach_relaunch(variant.kernel, jit_fn, values, num_warps, num_stages, target,
                               num_ctas, launch_pdl)
    if callable(grid):
        grid = call_grid(jit_fn, grid, dict(zip(jit_fn.arg_names, values)))
    if type(grid) is not tuple or not 1 <= len(grid) <= 3 or not all(
            type(g) is int and g >= 0 for g in grid):
        grid = normalize_grid(jit_fn, grid, dict(zip(jit_fn.arg_names, values)))
    runtime_args = [values[i] for i in variant.runtime_positions]
    boxes = variant.kernel.metadata.get("tma_boxes", {}) if num_ctas != 1 else {}
    for index, box in boxes.items():
        # Multicast loads fetch slices of the block: their maps have the slice's box.
        arg = runtime_args[int(index)]
        if not hasattr(arg, "with_box"):
            name = jit_fn.arg_names[variant.runtime_positions[int(index)]]
            raise ArgumentError(f"argument `{name}` of {jit_fn.__name__}: a multicast TMA load "
                                f"needs a TensorDescriptor (the launch encodes its map with "
                                f"the slice's box {box}), got {type(arg).__name__}")
        runtime_args[int(index)] = arg.with_box(box)
    stream = current_stream() if stream is None else stream
    if scratch:
        runtime_args.append(_global_scratch(jit_fn, variant, grid, stream))
    if num_ctas != 1:
        # One program per cluster: the grid counts clusters, CUDA's counts CTAs.
        grid, cluster_dims = cluster_grid(grid, num_ctas), (num_ctas, 1, 1)
    if instrument:
        return _run_instrumented(jit_fn, variant, grid, stream, runtime_args, cluster_dims,
                                 num_ctas, launch_pdl)
    _launch(jit_fn, variant, grid, stream, runtime_args, cluster_dims, num_ctas, launch_pdl)
    return variant.kernel


def _launch(jit_fn, variant, grid, stream, args, cluster_dims, num_ctas, launch_pdl=False):
    """Queue the launch, as a cluster launch when `cluster_dims` is set (checked against the
    grid and the target first), with programmatic dependent launch when `launch_pdl` is, and
    with a packing error named in the user's terms."""
    from shared_codegen.runtime.launcher import PackError

    try:
        if cluster_dims is None:
            launch = variant.binder.launch_pdl if launch_pdl else variant.binder.launch
            launch(variant.function, grid, variant.num_warps, variant.shared, stream, args)
            return
        cluster = check_cluster_dims(jit_fn, cluster_dims, tuple(grid) + (1,) * (3 - len(grid)))
        from shared_codegen.lowering.backend import parse_target

        if parse_target(variant.kernel.metadata["target"])[0] < 90:
            option = "cluster_dims" if num_ctas == 1 else f"num_ctas={num_ctas}"
            raise ArgumentError(f"{jit_fn.__name__}: {option} needs sm_90 or newer, the "
                                f"kernel targets {variant.kernel.metadata['target']}")
        variant.binder.launch_cluster(variant.function, grid, cluster, variant.num_warps,
                                      variant.shared, stream, args, pdl=launch_pdl)
    except PackError as error:
        raise pack_error(jit_fn, variant, error) from None


def _run_instrumented(jit_fn, variant, grid, stream, runtime_args, cluster_dims, num_ctas,
                      launch_pdl=False):
    """A launch of a debug or timeline variant: hidden arguments after the kernel's own, then
    a synchronize and the read-back (runtime/debug_mode.py, runtime/timeline.py)."""
    from shared_codegen.runtime import debug_mode, timeline

    metadata = variant.kernel.metadata
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    hidden = []
    if "debug" in metadata:
        hidden += debug_mode.debug_hidden_args(variant.kernel, runtime_args,
                                               variant.pointer_positions)
    events = None
    if "timeline" in metadata:
        events = timeline.EventBuffer(metadata["timeline"], grid3, stream)
        hidden.append(events.address)
    _launch(jit_fn, variant, grid, stream, runtime_args + hidden, cluster_dims, num_ctas,
            launch_pdl)
    if "debug" in metadata:
        debug_mode.check_record(jit_fn.__name__, metadata["debug"])
    if events is not None:
        jit_fn.last_timeline = events.read(jit_fn.__name__)
    return variant.kernel


def _global_scratch(jit_fn, variant, grid, stream):
    """The launch's global scratch (kernels that write tensor maps: `ops/tma/tensormap.py`):
    `variant.scratch` bytes per program from the allocator of `tile.set_allocator`, as Triton
    asks its allocator. The buffer is released after the launch is queued; a stream-ordered
    allocator (torch's) keeps it until the kernel is done."""
    from shared_codegen.runtime.allocation import get_allocator

    programs = 1
    for g in grid:
        programs *= g
    size = programs * variant.scratch
    buffer = get_allocator()(size, variant.scratch_align, stream)
    if not hasattr(buffer, "data_ptr"):
        raise ArgumentError(f"{jit_fn.__name__}: the allocator given to set_allocator must "
                            f"return a buffer with data_ptr() (a CUDA torch tensor), got "
                            f"{type(buffer).__name__}")
    if buffer.data_ptr() % variant.scratch_align:
        raise ArgumentError(f"{jit_fn.__name__}: the allocator returned an address "
                            f"{buffer.data_ptr():#x} that is not {variant.scratch_align}-byte "
                            f"aligned")
    return buffer


def pack_error(jit_fn, variant, error) -> ArgumentError:
    """The binder's PackError (runtime/launcher.py) in the user's terms: which argument of
    which kernel, and what it was given."""
    if error.index >= len(variant.runtime_positions):  # the hidden global scratch pointer
        return ArgumentError(f"{jit_fn.__name__}: cannot pass the allocator's buffer "
                             f"{error.value!r} as the kernel's global scratch: {error.reason}")
    position = variant.runtime_positions[error.index]
    return ArgumentError(f"argument `{jit_fn.arg_names[position]}` of {jit_fn.__name__}: "
                         f"cannot pass {error.value!r} as a {error.kind} parameter: "
                         f"{error.reason}")


def _compile_variant(jit_fn, spec_key, num_warps, target, num_stages=DEFAULT_NUM_STAGES,
                     instrument=(), num_ctas=1, persistent=True):
    from shared_codegen.frontend.compile import compile_spec, wrap_internal_error
    from shared_codegen.runtime.driver import target_from_device
    from shared_codegen.runtime.launcher import PersistentBinder, get_binder

    target = target or config.get("SC_TARGET") or target_from_device()
    spec = Specialization.from_key(spec_key, num_warps, target, num_stages)
    spec.instrument = tuple(instrument)
    spec.num_ctas = num_ctas
    spec.persistent = persistent
    try:
        kernel = compile_spec(jit_fn, spec)
    except OutOfResources:
        raise
    except CompilationError as exc:
        if exc.file is not None:  # it names the kernel line already
            raise
        raise wrap_internal_error(jit_fn, exc) from exc
    except Exception as exc:  # a compiler bug: say so, with the kernel's name and file
        raise wrap_internal_error(jit_fn, exc) from exc
    variant = _Variant()
    variant.kernel = kernel
    variant.function = kernel.function()
    variant.binder = get_binder(kernel.param_kinds)
    if kernel.metadata.get("persistent_programs"):  # tile/passes/persistent.py
        # Grids that fit on the GPU at once run the one-program-per-tile build, compiled on
        # the first such launch.
        variant.binder = PersistentBinder(variant.binder, lambda: _compile_variant(
            jit_fn, spec_key, num_warps, target, num_stages, persistent=False))
    variant.runtime_positions = [i for i, t in enumerate(spec.arg_types) if t is not None]
    variant.pointer_positions = [k for k, i in enumerate(variant.runtime_positions)
                                 if isinstance(spec.arg_types[i], PointerType)]
    variant.shared = kernel.shared
    variant.num_warps = kernel.num_warps
    variant.check = make_check(kernel.guards)
    variant.scratch = int(kernel.metadata.get("global_scratch_bytes", 0))
    variant.scratch_align = int(kernel.metadata.get("global_scratch_align", 1))
    return variant


def compile_for_target(jit_fn, signature: Dict[str, str], constexprs: Dict[str, Any] = None,
                       target: str = "sm_90a", num_warps: int = DEFAULT_NUM_WARPS,
                       num_stages: int = DEFAULT_NUM_STAGES, debug: bool = False,
                       timeline: bool = False, num_ctas: int = 1):
    """Compile without a GPU. `signature` maps runtime parameters to Triton-style type strings
    ("*fp32", "i32", "fp16", ...), optionally with a ":16" suffix for 16-byte divisibility;
    `constexprs` gives the constexpr parameters' values. `debug` / `timeline` compile the
    instrumented variant a launch with that option runs (SC_DEVICE_DEBUG / SC_TIMELINE are
    launch settings and do not apply here)."""
    from shared_codegen.frontend.compile import compile_spec

    spec = specialization_for_signature(jit_fn, signature, constexprs or {}, num_warps, target,
                                        check_num_stages(jit_fn, num_stages))
    spec.instrument = instrumentation(jit_fn, bool(debug), bool(timeline))
    spec.num_ctas = check_num_ctas(jit_fn, num_ctas, None)
    return compile_spec(jit_fn, spec)


def fill_num_warps_param(jit_fn, args, kwargs, num_warps):
    """`kwargs` with a kernel's `num_warps` constexpr parameter set from the launch option
    (see fastpath.NUM_WARPS_PARAM), and launch keywords that change nothing dropped."""
    kwargs = {k: v for k, v in kwargs.items() if k not in IGNORED_LAUNCH_OPTIONS}
    if "extern_libs" in kwargs and "extern_libs" not in jit_fn.arg_names:
        check_extern_libs(jit_fn.__name__, kwargs.pop("extern_libs"))
    if "num_warps" in jit_fn.constexpr_names and "num_warps" not in kwargs and \
            jit_fn.arg_names.index("num_warps") >= len(args):
        kwargs["num_warps"] = DEFAULT_NUM_WARPS if num_warps is None else num_warps
    return kwargs


def specialization_for_signature(jit_fn, signature: Dict[str, str], constexprs: Dict[str, Any],
                                 num_warps: int, target: str,
                                 num_stages: int = DEFAULT_NUM_STAGES) -> Specialization:
    if "num_warps" in jit_fn.constexpr_names and "num_warps" in constexprs:
        num_warps = constexprs["num_warps"]
    constexprs = fill_num_warps_param(jit_fn, (), constexprs, num_warps)
    kernel = jit_fn.__name__
    for what, given in (("signature", signature), ("constexprs", constexprs)):
        strangers = [n for n in given if n not in jit_fn._index]
        if strangers:
            raise ArgumentError(f"{kernel}: {what} names `{strangers[0]}`, which is not a "
                                f"parameter of {kernel} (parameters: "
                                f"{', '.join(jit_fn.arg_names)})")
    key = []
    for i, name in enumerate(jit_fn.arg_names):
        if name in constexprs or i in jit_fn.constexpr_positions:
            if name not in constexprs:
                default = jit_fn._defaults[i]
                if default is inspect.Parameter.empty:
                    raise ArgumentError(f"{jit_fn.__name__}: constexpr parameter `{name}` "
                                        f"needs a value")
                constexprs[name] = getattr(default, "value", default)
            key.append(("constexpr", constexprs[name]))
            continue
        if name not in signature:
            raise ArgumentError(f"{jit_fn.__name__}: signature is missing parameter `{name}`")
        text = signature[name]
        if not isinstance(text, str):
            # An IR type (TensorDescriptorType), or a host object specialized like an argument
            # (a gluon.nvidia.hopper.TensorDescriptor).
            key.append((text, "") if isinstance(text, IRType) else key_of(text))
            continue
        hint = "D" if text.endswith(":16") else ""
        text = text.split(":")[0]
        if text.lstrip("*") not in BY_NAME:
            raise ArgumentError(f"{jit_fn.__name__}: parameter `{name}`: unknown type {text!r}")
        key.append((text, hint))
    return Specialization.from_key(tuple(key), num_warps, target, num_stages)
