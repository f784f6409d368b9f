"""Two-CTA tcgen05 MMA (`cta_group::2`, sm_100a): one MMA over a pair of CTAs of a cluster.

A kernel launched with an even `num_ctas` pairs its CTAs (2k, 2k + 1); the even one leads.
Every CTA of a pair holds its half of the operands at the same shared-memory offsets and its
half of the accumulator at the same tensor-memory columns:

    a    [128, K]      this CTA's 128 rows of A (the pair multiplies 256 rows)
    b    [K, N/2]      this CTA's half of B's columns
    acc  [128, N]      this CTA's 128 rows of D, TensorMemoryLayout(block=(128, N),
                       two_ctas=True)

Both CTAs call `tcgen05_mma(a, b, acc)`; the leader issues `tcgen05.mma.cta_group::2` (M = 256,
PTX ISA "tcgen05.mma"), which reads both CTAs' halves of A and B and writes both halves of D.
Its completion is committed to the barrier at the same offset in both CTAs
(`tcgen05.commit.cta_group::2 ... .multicast::cluster`, ctaMask = the pair), for the
`mbarriers=` of the MMA and for `tcgen05_commit`, which the other CTA's calls leave to the
leader. So each CTA waits on its own barrier and then reads its own accumulator half.

Before the leader issues, the other CTA's operands must be in place: the kernel says so with
an arrival on the leader's barrier (`mbarrier.arrive(bar, from_cta=...)` after its own loads
completed). The PTX rule that a kernel's tcgen05 instructions use one `cta_group` makes the
mode kernel-wide: tensor memory is allocated with `cta_group::2`, and a kernel mixing two-CTA
and one-CTA MMAs (or with `tcgen05_copy`) is refused.

Interpreter: the leader's MMA reads the peer's operands and writes the peer's accumulator
(`peer_tmem`), its commits land on both barriers, and tensor and shared memory it owns in
either CTA is race-checked until each CTA's wait observes the commit.
"""

from __future__ import annotations

import numpy as np

# frame.values key: whether the running kernel's MMAs are two-CTA (asked at every commit).
_PAIR_KEY = object()


def function_of(op):
    node = op
    while getattr(node, "parent", None) is not None:
        node = node.parent
    return node if hasattr(node, "body") else None


def is_pair_mma(op) -> bool:
    from shared_codegen.ops.tcgen05.definition import TCGen5MMAOp
    return isinstance(op.opdef, TCGen5MMAOp) and bool(op.operands[2].type.layout.two_ctas)


def pair_kernel(fn) -> bool:
    """Whether `fn`'s tcgen05 MMAs are two-CTA (`cta_group::2`)."""
    return fn is not None and any(is_pair_mma(o) for o in fn.walk())


def pair_program(frame, op) -> bool:
    """`pair_kernel` of the kernel `frame` runs, found once per program."""
    known = frame.values.get(_PAIR_KEY)
    if known is None:
        known = frame.values[_PAIR_KEY] = pair_kernel(function_of(op))
    return known


def check_one_cta_group(pair_op) -> None:
    """VerificationError at the offending op unless every tcgen05 op of `pair_op`'s kernel
    can be `cta_group::2` (PTX wants one cta_group per kernel)."""
    from shared_codegen.ir.core import VerificationError
    from shared_codegen.ops.tcgen05.copy import TCGen5CopyOp
    from shared_codegen.ops.tcgen05.definition import TCGen5MMAOp
    from shared_codegen.ops.tcgen05.scaled import TCGen5MMAScaledOp
    fn = function_of(pair_op)
    for o in fn.walk() if fn is not None else ():
        if isinstance(o.opdef, (TCGen5MMAOp, TCGen5MMAScaledOp)) and not is_pair_mma(o):
            raise VerificationError("this kernel has two-CTA tcgen05 MMAs (an acc in "
                                    "TensorMemoryLayout(two_ctas=True)); PTX wants one "
                                    "cta_group for all of a kernel's tcgen05 instructions, so "
                                    "every tcgen05_mma must be two-CTA", o)
        if isinstance(o.opdef, TCGen5CopyOp):
            raise VerificationError("tcgen05_copy in a kernel of two-CTA tcgen05 MMAs is not "
                                    "supported (its cta_group::2 form, copying into both CTAs "
                                    "of a pair, is not written yet)", o)


def check_pair_shapes(a, b, d) -> tuple:
    """(M, K, N) of a two-CTA MMA from one CTA's halves; ValueError in the user's terms."""
    from shared_codegen.ir.types import SharedMemoryType
    if not isinstance(a, SharedMemoryType):
        raise ValueError("a two-CTA tcgen05_mma reads a from shared memory (the TS form, a in "
                         "tensor memory, is one-CTA only here)")
    if len(a.shape) != 2 or len(b.shape) != 2 or len(d.shape) != 2:
        raise ValueError(f"tcgen05_mma takes [M, K] x [K, N] -> [M, N], got {list(a.shape)} x "
                         f"{list(b.shape)} -> {list(d.shape)}")
    (m, k), (k2, half) = a.shape, b.shape
    if k != k2 or tuple(d.shape) != (m, 2 * half):
        raise ValueError(f"a two-CTA tcgen05_mma takes this CTA's halves: a [M, K], b [K, N/2] "
                         f"and acc [M, N]; got {list(a.shape)} x {list(b.shape)} -> "
                         f"{list(d.shape)}")
    if m != 128 or d.layout.block[0] != 128:
        raise ValueError(f"a two-CTA tcgen05_mma computes 128 rows per CTA (M = 256 for the "
                         f"pair): a and acc must have 128 rows and block[0] = 128, got acc "
                         f"{list(d.shape)} with block {list(d.layout.block)}")
    n = 2 * half
    if n % 16 or not 32 <= n <= 256:
        raise ValueError(f"a two-CTA tcgen05_mma takes N (both CTAs' columns of b) in [32, 256] "
                         f"in steps of 16 (PTX ISA Table 39, M = 256), got N = {n}")
    return m, k, n


def leader_and_peer(frame, op):
    """(peer rank) for the leader of a pair; None for the other CTA, whose calls the leader
    carries out. Reports a kernel without clusters."""
    cluster = frame.cluster
    if cluster is None or cluster.size % 2:
        frame.error(op, "a two-CTA tcgen05 op needs CTA pairs: launch with num_ctas = 2, 4 "
                        "or 8")
    if frame.cta_rank % 2:
        return None
    return frame.cta_rank + 1


def peer_tmem(frame, view, rank: int):
    """CTA `rank`'s tensor memory at the same lanes and columns as `view` (every CTA plans
    the same columns)."""
    from shared_codegen.ops.tensor_memory.interpreter import TmemState, TmemView
    return TmemView(TmemState.of(frame.cluster.frame_of(rank)), view.lanes, view.offs)


def pair_operands(frame, op, a_v, b_v, peer, read_smem):
    """Both CTAs' halves: A [256, K] (leader's rows first) and B [K, N]; `read_smem(view,
    ty)` reads one CTA's view (checked), returning (data, byte indices)."""
    from shared_codegen.ops.tma.multicast import peer_view
    halves, reads = [], []
    for v in (a_v, b_v):
        mine = frame[v]
        theirs = peer_view(frame, op, mine, peer, "a two-CTA tcgen05_mma reads shared memory "
                                                  "of")
        pair = []
        for view in (mine, theirs):
            data, idx = read_smem(view, v.type)
            pair.append(data)
            reads.append((view.buffer, idx))
        halves.append(pair)
    (a0, a1), (b0, b1) = halves
    return np.concatenate([a0, a1], axis=0), np.concatenate([b0, b1], axis=1), reads


__all__ = ["pair_kernel", "pair_program", "is_pair_mma", "check_one_cta_group", "check_pair_shapes", "leader_and_peer", "peer_tmem",
           "pair_operands", "function_of"]
