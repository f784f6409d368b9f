"""The launch fast path: one generated Python function per kernel.

`kernel[grid](*args, **kw)` spends most of its time in Python, so like Triton we generate, once
per kernel, a function whose parameters are the kernel's own (defaults included). It builds a
flat key with one cheap expression per argument, looks the compiled variant up in a dict, and
launches through the variant's binder. A grid function is called first, with the arguments
by name, and its grid launched like a tuple. Anything unusual (a miss, host arrays, the
interpreter, unknown keywords) falls through to the full path in `launch.py`, which
compiles and then registers the variant under the same fast key.

Per-argument keys (must separate everything the full specialization separates):

    torch tensor      (dtype, 16-byte aligned, is_cuda)
    int               0..6 code: i32/i64/u64 x (==1 | %16==0 | other)
    float, bool, None the type itself
    registered types  their specialization key (`specialize.register_handler(fast_key=True)`)
    other             the type
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Callable, Dict

from shared_codegen.errors import KernelError
from shared_codegen.runtime.specialize import FAST_KEYED
from shared_codegen.tracebacks import user_facing

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def int_code(v: int) -> int:
    """Which specialization an int gets: size class and hint, as one small int."""
    if v == 1:
        return 0
    size = 0 if _INT32_MIN <= v <= _INT32_MAX else (1 if -(1 << 63) <= v < (1 << 63) else 2)
    return 1 + 2 * size + (v % 16 == 0)


def tensor_code(t):
    return (t.dtype, t.data_ptr() % 16 == 0, t.is_cuda)


def arg_code(a):
    """The fast key of one argument (generic version, used on the slow path)."""
    kind = type(a)
    if kind is int:
        return int_code(a)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        return tensor_code(a)
    keyed = FAST_KEYED.get(kind)
    return kind if keyed is None else keyed(a)


def build_fast_launcher(jit_fn, slow: Callable) -> Callable:
    """Generate `launch(<kernel params>, *, grid, num_warps=None, stream=None,
    num_stages=None, launch_pdl=False, **options)`; the key covers num_warps and num_stages,
    and `launch_pdl` picks the launch call."""
    if NUM_WARPS_PARAM in jit_fn.constexpr_names:
        return _num_warps_param_launcher(jit_fn, slow)
    params = jit_fn.params
    # The kernel's own parameter names, so constexprs passed by keyword bind as usual; the
    # generated function's other names carry a `_sc_` prefix to stay out of their way.
    names = [p.name for p in params]
    defaults: Dict[str, Any] = {}
    sig = []
    for i, p in enumerate(params):
        if p.default is not p.empty:
            defaults[f"_sc_d{i}"] = getattr(p.default, "value", p.default)
            sig.append(f"{names[i]}=_sc_d{i}")
        else:
            # A sentinel default lets a missing argument reach the full path, whose error
            # names the kernel and the parameter (Python's own would name `launch`).
            sig.append(f"{names[i]}=_sc_MISSING")
    key_parts = []
    for i, p in enumerate(params):
        n = names[i]
        if i in jit_fn.constexpr_positions:
            key_parts.append(n)  # constexpr values are part of the key
        elif i in jit_fn.do_not_specialize:
            key_parts.append(f"_sc_type({n})")
        else:
            # Ints and tensors dominate: test them first, inline.
            key_parts.append(f"(_sc_int_code({n}) if _sc_type({n}) is _sc_int else "
                             f"_sc_tensor_code({n}) if _sc_type({n}) is _sc_Tensor else "
                             f"_sc_arg_code({n}))")
    runtime = [names[i] for i in range(len(params)) if i not in jit_fn.constexpr_positions]
    reserved = {"grid", "num_warps", "stream"}
    clash = [n for n in names if n in reserved]
    if clash:
        raise TypeError(f"kernel parameter name `{clash[0]}` is reserved for launch options")
    # `num_stages` is a launch option the fast path keys on (kernels pass non-default depths,
    # e.g. tl.range pipelines); a kernel with its own `num_stages` parameter leaves it to the
    # options, which take the full path.
    stages = "num_stages" not in names
    runtime_tuple = "(" + "".join(f"{n}, " for n in runtime) + ")"
    args_tuple = "(" + "".join(f"{n}, " for n in names) + ")"
    required = [names[i] for i, p in enumerate(params) if p.default is p.empty]
    missing_test = "".join(f" or {n} is _sc_MISSING" for n in required)
    key_expr = "(" + ", ".join(key_parts + ["_sc_num_warps"] +
                               (["num_stages"] if stages else [])) + ",)"
    stages_param = "num_stages=None, " if stages else ""
    # The full path reads num_stages (and launch_pdl) from the options, as when they came in
    # `**options`.
    full_path_options = ("\n        if num_stages is not None:\n"
                     "            _sc_options['num_stages'] = num_stages") if stages else ""
    # `launch_pdl` (programmatic dependent launch) changes no code, only the launch call, so
    # it stays out of the key: True and False launch the same variant, through the binder's
    # `launch_pdl` or `launch`. Anything else takes the full path, which names the option in
    # its error. As with num_stages, a kernel parameter of that name leaves it to the options.
    pdl = "launch_pdl" not in names
    pdl_param = "launch_pdl=False, " if pdl else ""
    pdl_test = " or (launch_pdl is not False and launch_pdl is not True)" if pdl else ""
    full_path_options += ("\n        if launch_pdl is not False:\n"
                      "            _sc_options['launch_pdl'] = launch_pdl") if pdl else ""
    launch_call = ("_sc_v.binder.launch_pdl if launch_pdl else _sc_v.binder.launch" if pdl
                   else "_sc_v.binder.launch")
    # Kernels that folded globals in (frontend/guards.py) check them on every launch; the
    # others get the launcher without the test.
    guarded = jit_fn._fast_guarded
    guard_test = " or (_sc_v.check is not None and not _sc_v.check())" if guarded else ""
    # A grid function gets the arguments by name (Triton's META), as on the full path; its
    # grid then takes the fast path like a tuple (autotuned kernels launch this way).
    meta = "{" + ", ".join(f"{n!r}: _sc_unwrap({n})" if i in jit_fn.constexpr_positions
                           else f"{n!r}: {n}" for i, n in enumerate(names)) + "}"
    src = f"""
def launch({", ".join(sig)}{", " if sig else ""}*_sc_extra, grid, num_warps=None, stream=None,
           {stages_param}{pdl_param}**_sc_options):
    _sc_num_warps = num_warps
    if (_sc_type(grid) is not _sc_tuple and _sc_callable(grid)
            and not (_sc_options or _sc_extra{missing_test})):
        try:
            grid = _sc_call_grid(_sc_kernel, grid, {meta})
        except _sc_KernelError as _sc_error:
            raise _sc_user_facing(_sc_error, _sc_kernel)
    if (_sc_options or _sc_extra or _sc_type(grid) is not _sc_tuple or _sc_len(grid) > 3
            {missing_test}{pdl_test}):{full_path_options}
        try:
            return _sc_slow_call({args_tuple} + _sc_extra, _sc_options, grid, num_warps, stream)
        except _sc_KernelError as _sc_error:
            raise _sc_user_facing(_sc_error, _sc_kernel)
    _sc_key = {key_expr}
    try:
        _sc_v = _sc_variants.get(_sc_key)
    except TypeError:  # an unhashable constexpr: the full path names the argument
        _sc_v = _sc_key = None
    if _sc_v is None{guard_test}:{full_path_options}
        try:
            return _sc_slow({args_tuple}, _sc_options, grid, num_warps, stream,
                            fast_key=_sc_key)
        except _sc_KernelError as _sc_error:
            raise _sc_user_facing(_sc_error, _sc_kernel)
    try:
        ({launch_call})(_sc_v.function, grid, _sc_v.num_warps, _sc_v.shared,
                        _sc_current_stream() if stream is None else stream, {runtime_tuple})
    except _sc_PackError as _sc_error:  # names the argument (frontend/launch.py)
        raise _sc_user_facing(_sc_pack_error(_sc_kernel, _sc_v, _sc_error), _sc_kernel)
    return _sc_v.kernel
"""
    from shared_codegen.frontend.launch import call_grid, pack_error
    from shared_codegen.runtime.launcher import PackError, current_stream

    torch = sys.modules.get("torch")
    Tensor = torch.Tensor if torch is not None else _NoTensor
    # Python builtins under `_sc_` names: a kernel parameter may be called `type` or `len`.
    namespace = {"_sc_type": type, "_sc_int": int, "_sc_tuple": tuple, "_sc_len": len,
                 "_sc_int_code": int_code, "_sc_tensor_code": tensor_code,
                 "_sc_arg_code": arg_code, "_sc_Tensor": Tensor,
                 "_sc_variants": jit_fn._fast_guarded_variants if guarded else jit_fn._fast_variants,
                 "_sc_slow": slow,
                 "_sc_current_stream": current_stream, "_sc_MISSING": _MISSING,
                 "_sc_slow_call": _slow_call(jit_fn, slow), **defaults,
                 "_sc_KernelError": KernelError, "_sc_user_facing": user_facing,
                 "_sc_kernel": jit_fn, "_sc_PackError": PackError,
                 "_sc_pack_error": pack_error, "_sc_callable": callable,
                 "_sc_call_grid": call_grid, "_sc_unwrap": _unwrap_constexpr}
    exec(compile(src, f"<launcher of {jit_fn.__name__}>", "exec"), namespace)
    launch = namespace["launch"]
    # Python's own binding errors name the function: `add_kernel() got multiple values for
    # argument 'BLOCK'`, not `launch() ...`.
    launch.__name__ = launch.__qualname__ = jit_fn.__name__
    launch.__code__ = launch.__code__.replace(co_name=jit_fn.__name__)
    return launch


_MISSING = object()


def _unwrap_constexpr(value):
    """A constexpr argument's value, as the full path hands it to the grid function."""
    from shared_codegen.frontend.values import constexpr
    return value.value if isinstance(value, constexpr) else value


def _slow_call(jit_fn, slow):
    """The full path for calls the fast path does not take: re-binds the arguments (giving the
    usual errors for missing or extra ones) before dispatching."""

    def call(values, options, grid, num_warps, stream):
        n = len(jit_fn.params)
        if len(values) > n:
            jit_fn.bind_args(tuple(values), {})  # raises "takes n arguments but m were given"
        named = {name: v for name, v in zip(jit_fn.arg_names, values) if v is not _MISSING}
        if len(named) < n:
            jit_fn.bind_args((), named)  # raises "missing k required arguments: ..."
        return slow(tuple(values), options, grid, num_warps, stream)

    return call


class _NoTensor:
    """Stands in for torch.Tensor when torch is not imported (nothing is ever of this type)."""


# Gluon kernels may declare `num_warps: gl.constexpr` (Triton 3.6 does this for them): the
# launch option `num_warps=` then also fills the parameter, so the two can never disagree.
NUM_WARPS_PARAM = "num_warps"


def _num_warps_param_launcher(jit_fn, slow) -> Callable:
    """The launcher of a kernel with a `num_warps` constexpr parameter. Such launches take
    the full path: the generated fast launcher cannot have `num_warps` both as the kernel's
    parameter and as the launch option."""
    from shared_codegen.frontend.launch import DEFAULT_NUM_WARPS

    index = jit_fn.arg_names.index(NUM_WARPS_PARAM)

    def launch(*args, grid, stream=None, **kwargs):
        params = {k: v for k, v in kwargs.items() if k in jit_fn._index}
        options = {k: v for k, v in kwargs.items() if k not in jit_fn._index}
        if index < len(args):
            num_warps = args[index]
        elif NUM_WARPS_PARAM in params:
            num_warps = params[NUM_WARPS_PARAM]
        else:
            default = jit_fn._defaults[index]
            num_warps = DEFAULT_NUM_WARPS if default is inspect.Parameter.empty else \
                getattr(default, "value", default)
            params[NUM_WARPS_PARAM] = num_warps
        num_warps = getattr(num_warps, "value", num_warps)
        try:
            values = jit_fn.bind_args(args, params)
            return slow(tuple(values), options, grid, num_warps, stream)
        except KernelError as error:
            raise user_facing(error, jit_fn)

    return launch
