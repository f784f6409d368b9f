"""`gluon.language.nvidia.ampere.mbarrier` (Triton 3.6): the mbarrier builtins without the
TMA transaction count (`expect` is Hopper's). They are the Hopper module's own functions, so
a barrier initialized through one module can be waited on through the other."""

from gluon.language.nvidia.hopper.mbarrier import (MBarrierLayout, allocate_mbarrier, arrive, init,
                                                   invalidate, wait)

from shared_codegen.layouts import SwizzledSharedLayout  # noqa: F401 (upstream's namespace)

__all__ = ["MBarrierLayout", "arrive", "init", "invalidate", "wait", "allocate_mbarrier"]
