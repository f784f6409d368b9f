"""`cp.async` from Gluon (sm_80+): copy global memory into a shared-memory descriptor without
passing through registers, in commit groups the kernel waits on.

    async_copy.async_copy_global_to_shared(smem.index(s), ptrs, mask=mask)
    async_copy.commit_group()
    ...
    async_copy.wait_group(NUM_STAGES - 2)   # the oldest stage has landed in `smem`
    gl.thread_barrier()                     # ... and other threads' copies too

Names and parameters follow `triton.experimental.gluon.language.nvidia.ampere.async_copy`
3.6. Semantics, the interpreter's race reports and the PTX are described in
`shared_codegen/ops/async_copy/definition.py`. `eviction_policy` and `volatile` are recorded on the
op but do not change the instruction (cp.async has no such qualifiers).
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin, tensor
from shared_codegen.ops.async_copy.definition import (EVICTION_POLICIES, AsyncCommitGroupOp,
                                                      AsyncCopyGlobalToLocalOp,
                                                      AsyncCopyMbarrierArriveOp, AsyncWaitOp,
                                                      check_async_copy, normalize_cache_modifier)
from shared_codegen.ops.mbarrier.definition import check_barrier

__all__ = ["async_copy_global_to_shared", "mbarrier_arrive", "commit_group", "wait_group"]


def _descriptor(smem):
    handle = getattr(smem, "handle", None)
    if handle is None or not hasattr(smem, "type"):
        raise TypeError(f"async_copy_global_to_shared: smem must be a shared memory "
                        f"descriptor (gl.allocate_shared_memory), got {smem!r}")
    return smem


@builtin
def async_copy_global_to_shared(smem, pointer, mask=None, cache_modifier="", eviction_policy="",
                                volatile=False, _semantic=None):
    """Start copying the elements `pointer` addresses into `smem` (same shape). Masked-off
    elements become zeros. The copy joins the group the next `commit_group()` closes, and is
    visible once `wait_group(n)` leaves at most `n` newer groups in flight."""
    smem = _descriptor(smem)
    if not isinstance(pointer, tensor) or not pointer.is_block():
        raise TypeError(f"async_copy_global_to_shared: pointer must be a tensor of pointers, "
                        f"got {pointer!r}")
    if mask is True:
        mask = None
    if mask is not None:
        if not isinstance(mask, tensor):
            raise TypeError(f"async_copy_global_to_shared: mask must be a tensor, got {mask!r}")
        pointer, mask = _semantic._broadcast_pair(pointer, mask, "the pointer and the mask")
    cache_modifier = normalize_cache_modifier(cache_modifier)
    eviction_policy = str(eviction_policy or "")
    if eviction_policy not in EVICTION_POLICIES:
        raise ValueError(f"eviction_policy must be one of {EVICTION_POLICIES[1:]}, got "
                         f"{eviction_policy!r}")
    check_async_copy(smem.type, pointer.type, None if mask is None else mask.type)
    AsyncCopyGlobalToLocalOp.build(_semantic.builder, pointer.handle, smem.handle,
                                   None if mask is None else mask.handle, cache_modifier,
                                   eviction_policy, bool(volatile))


@builtin
def mbarrier_arrive(mbarrier, increment_count=True, _semantic=None):
    """Arrive on `mbarrier` once every cp.async copy this thread issued before has completed
    (`cp.async.mbarrier.arrive`), committed or not; a wait on the barrier then sees their
    data. With `increment_count=True` the arrival is net zero (it only holds the phase open
    until the copies land, and the kernel arrives itself); with `False` (`.noinc`) every
    thread's arrival counts, so `mbarrier.init` needs one arrival per thread."""
    if not hasattr(mbarrier, "handle") or not hasattr(mbarrier, "type"):
        raise TypeError(f"mbarrier_arrive: mbarrier must be a shared memory descriptor, got "
                        f"{mbarrier!r}")
    try:
        check_barrier(mbarrier.type)
    except ValueError as exc:
        raise TypeError(f"mbarrier_arrive: {exc}") from None
    increment_count = getattr(increment_count, "value", increment_count)
    if not isinstance(increment_count, bool):
        raise TypeError(f"mbarrier_arrive: increment_count must be a compile-time bool, got "
                        f"{increment_count!r}")
    AsyncCopyMbarrierArriveOp.build(_semantic.builder, mbarrier.handle, increment_count)


@builtin
def commit_group(_semantic=None):
    """Close the copies issued since the last commit into one group (`cp.async.commit_group`)."""
    AsyncCommitGroupOp.build(_semantic.builder)


@builtin
def wait_group(num_outstanding=0, _semantic=None):
    """Wait until at most `num_outstanding` committed groups are still in flight
    (`cp.async.wait_group`); a compile-time int."""
    n = num_outstanding
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TypeError(f"wait_group: num_outstanding must be a non-negative compile-time int, "
                        f"got {n!r}")
    AsyncWaitOp.build(_semantic.builder, n)
