"""`gluon.language.nvidia.hopper.mbarrier`: shared-memory barriers (sm_90), with the names and
parameters of `triton.experimental.gluon.language.nvidia.hopper.mbarrier` 3.6.

    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, desc.block_type.nbytes)
    tma.async_copy_global_to_shared(desc, [m, k], bar, smem)
    mbarrier.wait(bar, phase=0)
    mbarrier.invalidate(bar)

Semantics, interpreter checks and PTX: `shared_codegen/ops/mbarrier/definition.py`.
"""

from __future__ import annotations

from gluon.language._newer_names import allocate_mbarrier  # noqa: F401 (Triton 3.8)
from gluon.language._smem import _checked
from gluon.language.nvidia.hopper._common import i32_arg, int_arg, pred_arg, smem_arg
from shared_codegen.frontend.values import builtin, unwrap
from shared_codegen.ops.mbarrier.definition import (ArriveBarrierOp, BarrierExpectOp, InitBarrierOp,
                                                    InvalBarrierOp, MBarrierLayout, WaitBarrierOp,
                                                    check_barrier, check_count)

__all__ = ["MBarrierLayout", "init", "expect", "arrive", "wait", "invalidate",
           "allocate_mbarrier"]


def _barrier(value, name):
    bar = smem_arg(value, name, "mbarrier")
    try:
        check_barrier(bar.type)
    except ValueError as exc:
        raise TypeError(f"{name}: {exc}") from None
    return bar


@builtin
def init(mbarrier, count, _semantic=None):
    """Start phase 0 with `count` pending arrivals (`mbarrier.init`)."""
    bar = _barrier(mbarrier, "mbarrier.init")
    count = check_count(int_arg(count, "mbarrier.init", "count"), "count")
    _checked(InitBarrierOp.build(_semantic.builder, bar.handle, count))


@builtin
def expect(mbarrier, bytes, pred=True, _semantic=None):
    """Expect `bytes` more transaction bytes in the current phase and arrive once
    (`mbarrier.arrive.expect_tx`); the TMA loads signalling the barrier deliver them."""
    bar = _barrier(mbarrier, "mbarrier.expect")
    nbytes = check_count(int_arg(bytes, "mbarrier.expect", "bytes"), "bytes", low=0)
    _checked(BarrierExpectOp.build(_semantic.builder, bar.handle, nbytes,
                                   pred_arg(pred, _semantic, "mbarrier.expect")))


@builtin
def arrive(mbarrier, *, count=1, pred=True, from_cta=None, multicast_cta=0, per_warp=False,
           _semantic=None):
    """Arrive `count` times on the current phase (`mbarrier.arrive`). `from_cta` (Triton
    3.8+, kernels with `num_ctas > 1`): the mask of CTA-id bits kept when routing the
    arrival, in [0, num_ctas - 1]: CTA r arrives on the barrier of CTA `r & from_cta`
    (0: every CTA arrives on CTA 0's; the default, num_ctas - 1: on its own).
    `multicast_cta` (Triton 3.9 spells it on `gl.nvidia.rubin.mbarrier.arrive`): arrive on
    the barrier of every CTA c of this one's class, `c & ~multicast_cta == rank &
    ~multicast_cta` (itself included): e.g. a consumer releasing a buffer that every CTA of
    the cluster multicasts into. Lowered on sm_90 as one remote arrival per CTA.

    By default one thread arrives for all the threads running this code, after they have
    met at a barrier (each of them must be done with what the arrival releases). With
    `per_warp=True` every warp arrives `count` times on its own, as soon as it gets here,
    and no warp waits for the others: initialize the barrier with the warps' arrivals
    (count x warps of this code, e.g. 4 for a warpgroup), as FlashAttention-3's consumers
    arrive warp by warp at the named barrier that hands the turn to the other warpgroup."""
    from gluon.language._core import cluster_size

    bar = _barrier(mbarrier, "mbarrier.arrive")
    count = check_count(int_arg(count, "mbarrier.arrive", "count"), "count")
    from_cta = unwrap(from_cta)
    if from_cta is not None:
        num_ctas = cluster_size(_semantic)
        if isinstance(from_cta, bool) or not isinstance(from_cta, int) or \
                not 0 <= from_cta <= num_ctas - 1:
            raise ValueError(f"mbarrier.arrive: from_cta must be a compile-time int in "
                             f"[0, num_ctas - 1] = [0, {num_ctas - 1}], got {from_cta!r}")
    multicast_cta = unwrap(multicast_cta)
    if isinstance(multicast_cta, bool) or not isinstance(multicast_cta, int):
        raise TypeError(f"mbarrier.arrive: multicast_cta must be a compile-time int, got "
                        f"{multicast_cta!r}")
    if multicast_cta:
        num_ctas = cluster_size(_semantic)
        if not 0 < multicast_cta <= num_ctas - 1:
            raise ValueError(f"mbarrier.arrive: multicast_cta must be in [1, num_ctas - 1] = "
                             f"[1, {num_ctas - 1}] (0: no multicast), got {multicast_cta}")
        if from_cta is not None and from_cta != num_ctas - 1:
            raise ValueError(f"mbarrier.arrive: from_cta={from_cta} routes the arrival to "
                             f"another CTA and cannot be combined with multicast_cta")
    per_warp = unwrap(per_warp)
    if not isinstance(per_warp, bool):
        raise TypeError(f"mbarrier.arrive: per_warp must be a compile-time bool, got "
                        f"{per_warp!r}")
    _checked(ArriveBarrierOp.build(_semantic.builder, bar.handle, count,
                                   pred_arg(pred, _semantic, "mbarrier.arrive"), from_cta,
                                   multicast_cta, per_warp))


@builtin
def wait(mbarrier, phase, pred=True, deps=(), _semantic=None):
    """Block until the phase with parity `phase` (0 or 1; a runtime value may be passed) has
    completed (`mbarrier.try_wait.parity`). `deps` are the shared memory descriptors the
    barrier guards; they stay allocated at least until here."""
    bar = _barrier(mbarrier, "mbarrier.wait")
    deps = [smem_arg(d, "mbarrier.wait", "each of deps").handle for d in deps or ()]
    _checked(WaitBarrierOp.build(_semantic.builder, bar.handle,
                                 i32_arg(phase, _semantic, "mbarrier.wait", "phase"),
                                 pred_arg(pred, _semantic, "mbarrier.wait"), deps))


@builtin
def invalidate(mbarrier, _semantic=None):
    """End the barrier's life (`mbarrier.inval`); its word may then be reused."""
    bar = _barrier(mbarrier, "mbarrier.invalidate")
    _checked(InvalBarrierOp.build(_semantic.builder, bar.handle))
