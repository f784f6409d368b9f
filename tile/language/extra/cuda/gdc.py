"""Grid dependency control, `tl.extra.cuda.gdc_wait` / `gdc_launch_dependents` (Triton 3.6's
`triton.language.extra.cuda.gdc`): the device half of programmatic dependent launch, whose
host half is the launch option `launch_pdl=True` (README, "Launch options").

    @tile.jit
    def consumer(x_ptr, y_ptr, n, BLOCK: tl.constexpr, USE_GDC: tl.constexpr):
        offs = ...                      # work that needs nothing from the previous kernel
        if USE_GDC:
            tl.extra.cuda.gdc_wait()    # the previous kernel's writes are visible after this
        x = tl.load(x_ptr + offs, ...)

    producer[grid](...); consumer[grid](..., USE_GDC=True, launch_pdl=True)

Both need sm_90 or newer: compiling them for an older target is an error naming the builtin
(`shared_codegen/ops/griddepcontrol/`). They take no tensors, so Gluon kernels call them too,
as upstream Gluon kernels call `triton.language.extra.cuda.gdc_wait`.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin
from shared_codegen.ops.griddepcontrol.definition import GdcLaunchDependentsOp, GdcWaitOp


@builtin
def gdc_wait(_semantic=None):
    """Wait until every grid this launch depends on has completed and its memory writes are
    visible (`griddepcontrol.wait`). Loads of what the previous kernel wrote go after it.
    Without `launch_pdl` there is nothing to wait for, and it returns at once."""
    GdcWaitOp.build(_semantic.builder)


@builtin
def gdc_launch_dependents(_semantic=None):
    """Let the next kernel on the stream, if launched with `launch_pdl=True`, start once every
    program of this one has called this or exited (`griddepcontrol.launch_dependents`). A
    scheduling hint only: it orders no memory (the dependent's `gdc_wait` does), and calls
    after the first do nothing."""
    GdcLaunchDependentsOp.build(_semantic.builder)


__all__ = ["gdc_wait", "gdc_launch_dependents"]
