"""`@tile.jit` and `tile.compile`: the tile DSL's entry into the shared frontend."""

from __future__ import annotations

from shared_codegen.frontend.jit import JITFunction, Language


def _semantic_class():
    from tile.language.semantic import TileSemantic

    return TileSemantic


def _stages():
    from tile.stages import TILE_STAGES

    return list(TILE_STAGES)


class _LazySemantic:
    """Defers importing tile.language until a kernel is traced (keeps `import tile` light)."""

    def __call__(self, builder):
        return _semantic_class()(builder)


TILE = Language("tile", _LazySemantic(), _stages, fp_fusion=True)


def jit(fn=None, *, do_not_specialize=(), debug=False, noinline=False, repr=None,
        launch_metadata=None):
    """Compile a Python function as a tile kernel (Triton's `@triton.jit`)."""

    def decorate(f):
        return JITFunction(f, TILE, do_not_specialize=do_not_specialize, debug=debug,
                           noinline=noinline)

    return decorate(fn) if fn is not None else decorate


def compile(kernel: JITFunction, signature, constexprs=None, target="sm_90a", num_warps=4,
            num_stages=3, debug=False, timeline=False):
    """Compile `kernel` for `target` without a GPU; returns a CompiledKernel whose `.asm`
    holds the stages 'ir', 'ttgir', 'llir', 'ptx' and 'cubin'. `num_stages`: the software
    pipelining depth of loops that feed tl.dot (Triton's default 3; 1 turns it off). `debug` /
    `timeline`: the instrumented variant (docs/debug_mode.md, docs/timeline.md)."""
    from shared_codegen.errors import KernelError
    from shared_codegen.frontend.launch import compile_for_target
    from shared_codegen.tracebacks import user_facing

    try:
        return compile_for_target(kernel, signature, constexprs, target, num_warps, num_stages,
                                  debug=debug, timeline=timeline)
    except KernelError as error:
        # The traceback ends at the kernel line, without the compiler's frames.
        raise user_facing(error, kernel)
