"""`@gluon.jit` and `gluon.compile`: the explicit-layout language's entry into the shared
frontend.

A Gluon kernel is traced by the shared code generator with `GluonSemantic`; its IR already
has a layout on every tensor (or an `AutoLayout()` placeholder), so the language's own passes
are only `gluon.passes.GLUON_PIPELINE` (resolve AutoLayout, verify layouts), the head of
`gluon/stages.py`. Compiling and the CPU interpreter run them once each, on the traced IR,
so both reject the same kernels with the same messages; `GluonJITFunction.make_ir` runs them
too, for callers that want the module the interpreter runs.
"""

from __future__ import annotations

from shared_codegen.frontend.codegen import constexpr_function
from shared_codegen.frontend.jit import JITFunction, Language


class _LazySemantic:
    """Defers importing gluon.language (and tile.language under it) until a kernel is traced,
    so `import gluon.layouts` stays light."""

    def __call__(self, builder):
        from gluon.language._semantic import GluonSemantic

        return GluonSemantic(builder)


def _stages():
    from gluon.stages import GLUON_STAGES

    return list(GLUON_STAGES)


GLUON = Language("gluon", _LazySemantic(), _stages, fp_fusion=True)


class GluonJITFunction(JITFunction):
    def make_ir(self, spec):
        """The traced module after the language's passes (AutoLayout resolved)."""
        from shared_codegen.ir.passes import run_pipeline

        module = super().make_ir(spec)
        # verify=False: the shared verifier runs on the result where the IR is used.
        return run_pipeline(module, GLUON.passes(), dump_dir=None, verify=False)


def jit(fn=None, *, do_not_specialize=(), debug=False, noinline=False, repr=None,
        launch_metadata=None):
    """Compile a Python function as a Gluon kernel (`@gluon.jit`)."""

    def decorate(f):
        return GluonJITFunction(f, GLUON, do_not_specialize=do_not_specialize, debug=debug,
                                noinline=noinline)

    return decorate(fn) if fn is not None else decorate


def compile(kernel: JITFunction, signature, constexprs=None, target="sm_90a", num_warps=4,
            debug=False, timeline=False, num_ctas=1):
    """Compile a Gluon kernel for `target` without a GPU (like `tile.compile`): `signature`
    maps runtime parameters to type strings ("*fp32", "i32", "*fp16:16", ...). Returns a
    CompiledKernel whose `.asm` holds 'ir', 'ttgir', 'llir', 'ptx' and 'cubin'. `num_ctas`
    compiles the cluster variant a launch with `num_ctas=` runs (docs/clusters.md)."""
    from shared_codegen.errors import KernelError
    from shared_codegen.frontend.launch import compile_for_target
    from shared_codegen.tracebacks import user_facing

    try:
        return compile_for_target(kernel, signature, constexprs, target, num_warps,
                                  debug=debug, timeline=timeline, num_ctas=num_ctas)
    except KernelError as error:
        # The traceback ends at the kernel line, without the compiler's frames.
        raise user_facing(error, kernel)


__all__ = ["jit", "compile", "constexpr_function", "GluonJITFunction", "GLUON"]
