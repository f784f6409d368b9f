"""Named regions of a kernel's timeline, with the names of Triton 3.6's Proton
(`import triton.profiler.language as pl`): usable in Gluon and tile kernels alike.

    import tile.profiler.language as pl

    @gluon.jit
    def kernel(...):
        pl.enter_scope("load")
        ...
        pl.exit_scope("load")

A region is recorded only when the launch asks for a timeline (`timeline=True` at launch or
SC_TIMELINE=1; gluon/timeline.py reads it back); otherwise the calls compile to nothing, so a
kernel's PTX is the same with and without them. Each warp records its own events (lane 0
writes), stamped with %globaltimer; the CPU interpreter records them with a logical clock.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin
from shared_codegen.ops.profile.definition import ProfileRecordOp


def _scope_name(name, what: str) -> str:
    name = getattr(name, "value", name)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what}(name): the region name must be a non-empty constexpr string, "
                        f"got {name!r}")
    return name


@builtin
def enter_scope(name, _semantic=None):
    """The start of region `name` on this warp's timeline."""
    ProfileRecordOp.build(_semantic.builder, True, _scope_name(name, "enter_scope"))


@builtin
def exit_scope(name, _semantic=None):
    """The end of region `name` on this warp's timeline."""
    ProfileRecordOp.build(_semantic.builder, False, _scope_name(name, "exit_scope"))


__all__ = ["enter_scope", "exit_scope"]
