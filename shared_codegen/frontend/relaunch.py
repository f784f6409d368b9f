"""`compiled[grid](*args)`: launching the CompiledKernel that `kernel.warmup(...)` returned.

Triton's host code (tutorial 02) warms a kernel up to read its register and shared-memory use,
then launches the compiled kernel directly. Here that launch goes back through the kernel's
own launch path with the options it was compiled with (num_warps, num_stages, target), so it
reuses the compiled variant on the GPU and runs the interpreter without one.
"""

from __future__ import annotations

from shared_codegen.errors import ArgumentError


def attach_relaunch(kernel, jit_fn, values, num_warps, num_stages, target, num_ctas=1,
                    launch_pdl=False):
    """Make `kernel[grid](...)` launch `jit_fn` as compiled from `values` (all parameters);
    a `num_ctas` kernel launches as clusters again, a `launch_pdl` one with programmatic
    dependent launch (Triton 3.6 keeps `launch_pdl` in the compiled kernel's metadata)."""
    constants = {i: values[i] for i in jit_fn.constexpr_positions}

    def launch(*args, grid, stream=None):
        from shared_codegen.frontend.launch import _dispatch

        return _dispatch(jit_fn, _all_values(jit_fn, args, constants), grid, num_warps, None,
                         target, stream, False, num_stages=num_stages, num_ctas=num_ctas,
                         launch_pdl=launch_pdl)

    kernel.relaunch = launch
    return kernel


def _all_values(jit_fn, args, constants):
    """Every parameter's value: Triton 3.6 passes constexprs to a compiled kernel too (they
    must be the values it was compiled for); older callers pass only the runtime ones."""
    name = jit_fn.__name__
    n_all = len(jit_fn.arg_names)
    runtime = [i for i in range(n_all) if i not in constants]
    if len(args) == n_all:
        values = list(args)
        for i, compiled in constants.items():
            given = getattr(values[i], "value", values[i])
            if given != compiled:
                raise ArgumentError(f"compiled kernel {name}: constexpr "
                                    f"`{jit_fn.arg_names[i]}` was compiled as {compiled!r}, "
                                    f"got {given!r}; warm the kernel up again for new values")
            values[i] = compiled
        return values
    if len(args) == len(runtime):
        values = [None] * n_all
        for i, v in constants.items():
            values[i] = v
        for i, v in zip(runtime, args):
            values[i] = v
        return values
    raise ArgumentError(f"compiled kernel {name} takes {n_all} arguments (or its "
                        f"{len(runtime)} non-constexpr ones), got {len(args)}")
