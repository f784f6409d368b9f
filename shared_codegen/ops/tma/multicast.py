"""TMA multicast: one block loaded by the whole cluster, each CTA fetching a slice of it.

`tma.async_load(desc, coord, bar, smem, multicast=True)` in a kernel with `num_ctas = N`
(docs/clusters.md): every CTA of the cluster issues the same call; CTA r fetches rows
[r * M/N, (r+1) * M/N) of the [M, ...] block at `coord` (the rows are the block's first dim
longer than one: a [1, 1, M, D] block of a (B, H, N, D) tensor splits its M keys) and
writes them, with one message per box (`cp.async.bulk.tensor ... .multicast::cluster`, PTX
ISA 9.7.9.27.1.2, ctaMask = every CTA), into `smem` of every CTA of the cluster at the same
offsets, signalling `complete_tx` of its bytes on the barrier at `bar`'s offset in each of
them. So each CTA's `smem` receives the whole block and its barrier the whole block's bytes:
`mbarrier.expect(bar, desc.block_type.nbytes)` as for a plain load. Global memory is read
once per cluster instead of once per CTA.

The box of the descriptor's tensor map is the slice (M/N rows), not the block: the compiler
records it per descriptor parameter (`metadata["tma_boxes"]`) and the launch encodes the map
with it (`runtime/tensor_descriptor.TensorDescriptor.with_box`), as Triton's launcher encodes
maps from kernel metadata. A descriptor used by a multicast load is therefore used by
multicast loads only (a plain load or a store through it is refused when compiling).

Rules: M/N rows must start whole swizzle atoms (8 rows of the swizzle width; 16-byte rows
unswizzled), so each slice is a box TMA can write on its own. Every CTA must have allocated
`smem`, initialized the barrier and synchronized the cluster (`cluster.barrier()`) before any
CTA multicasts into them; the interpreter reports a multicast into a peer that has not, or
that has returned.
"""

from __future__ import annotations

import numpy as np

from shared_codegen.ops.shared_memory.definition import offset_map


def split_dim(block_shape) -> int:
    """The dim a multicast splits among the CTAs: the block's first dim longer than one
    (leading unit dims index a batch or a head, as in a [1, 1, M, D] block)."""
    return next((d for d, n in enumerate(block_shape) if int(n) > 1), 0)


def slice_rows(block_shape, num_ctas: int) -> int:
    return int(block_shape[split_dim(block_shape)]) // num_ctas


def check_multicast(desc_ty, smem_ty, num_ctas: int) -> None:
    """ValueError in the user's terms unless a block of `desc_ty` can be multicast over
    `num_ctas` CTAs into `smem_ty`."""
    block = list(desc_ty.block_shape)
    if num_ctas < 2:
        raise ValueError("multicast=True needs a cluster: launch the kernel with num_ctas > 1 "
                         "(this kernel has num_ctas=1)")
    if len(block) < 2:
        raise ValueError(f"multicast=True splits the block's rows among the CTAs; the block "
                         f"{block} has rank 1")
    dim = split_dim(block)
    rows = slice_rows(block, num_ctas)
    if rows * num_ctas != block[dim] or rows < 1:
        raise ValueError(f"multicast=True splits the block's {block[dim]} rows among the "
                         f"{num_ctas} CTAs of the cluster; {block[dim]} is not a multiple of "
                         f"{num_ctas}")
    if block[dim] > 256:
        raise ValueError(f"multicast=True with a block of {block[dim]} rows: TMA moves at most "
                         f"256 rows per box, and splitting a multicast block into several "
                         f"boxes is not supported; use a block of at most 256 rows")
    layout = desc_ty.layout
    atom_rows = 8 if layout.swizzle_byte_width else 1
    if rows % atom_rows:
        raise ValueError(f"multicast=True gives each of the {num_ctas} CTAs {rows} rows of the "
                         f"{block} block, which does not start a whole "
                         f"{layout.swizzle_byte_width}-byte swizzle atom (8 rows); use a "
                         f"block of at least {8 * num_ctas} rows")
    if len(block) > 1 and _row_offset_bytes(smem_ty, rows, dim) % 128:
        raise ValueError(f"multicast=True: the slices of {rows} rows of the {block} block are "
                         f"not 128-byte aligned in shared memory, which TMA needs")


def _row_offset_bytes(smem_ty, row: int, dim: int) -> int:
    """Byte offset of row `row` (a power-of-two multiple) of dim `dim` from the buffer's
    start."""
    bits = offset_map(smem_ty).dims[dim].bits
    offset = 0
    for j, v in enumerate(bits):
        if row >> j & 1:
            offset ^= v
    return offset * smem_ty.element.itemsize


def slice_box(desc_ty, num_ctas: int):
    """The box of the descriptor's map for a multicast load: the slice's rows by the usual
    box along the other dims."""
    from shared_codegen.ops.tma.definition import box_shape
    box = list(box_shape(desc_ty))
    box[split_dim(desc_ty.block_shape)] = slice_rows(desc_ty.block_shape, num_ctas)
    return box


# ---- interpreter -----------------------------------------------------------------------------

def peer_view(frame, op, view, rank: int, what: str):
    """CTA `rank`'s copy of the shared memory `view` shows in this CTA: the same offsets in
    its buffer of the same allocation. Reports a peer that has not allocated it yet or has
    returned."""
    from shared_codegen.ops.shared_memory.interpreter import SharedView
    cluster = frame.cluster
    if rank == frame.cta_rank:
        return view
    buf = view.buffer
    if cluster.has_returned(rank):
        frame.error(op, f"{what} CTA {rank} of the cluster, which has already returned "
                        f"(end the kernel with cluster.barrier() so no CTA leaves while others "
                        f"still write its shared memory)")
    alloc = getattr(buf, "alloc_op", None)
    peer = cluster.frame_of(rank).values.get(alloc.result) if alloc is not None else None
    if peer is None:
        frame.error(op, f"{what} CTA {rank} of the cluster before that CTA allocated the "
                        f"shared memory (allocated at {buf.where}): synchronize the cluster "
                        f"(cluster.barrier()) after allocating and initializing, before the "
                        f"first multicast or remote arrival")
    return SharedView(peer.buffer, view.offsets)


def interpret_multicast(op, frame, engine, tmap, ty, coords, view, bar_view):
    """The multicast load of CTA `frame.cta_rank`: its slice of the block, into every CTA."""
    from shared_codegen.interpreter.happens_before import current as current_hb
    from shared_codegen.ops.mbarrier.definition import _where, barrier_state
    from shared_codegen.ops.tma.definition import _Load, _byte_index, _pending

    cluster = frame.cluster
    if cluster is None:
        frame.error(op, "multicast=True needs a cluster (num_ctas > 1)")
    dim = split_dim(ty.block_shape)
    rows = slice_rows(ty.block_shape, cluster.size)
    first = frame.cta_rank * rows
    shape = list(ty.block_shape)
    shape[dim] = rows
    start = list(coords)
    start[dim] += first
    addr, inside = tmap.box(start, shape)
    part = (slice(None),) * dim + (slice(first, first + rows),)
    values = frame.memory.load(addr, inside, tmap.fill, ty.element, frame, op)
    dtype = np.dtype(ty.element.np)
    raw = np.ascontiguousarray(np.asarray(values, dtype=dtype)).view(np.uint8).reshape(-1)
    where = _where(op)
    for rank in range(cluster.size):
        dest = peer_view(frame, op, view, rank, "multicast TMA load into")
        bar = peer_view(frame, op, bar_view, rank, "multicast TMA load signalling")
        peer = cluster.frame_of(rank)
        state = barrier_state(peer, op, bar)
        if not state.valid:
            frame.error(op, f"multicast TMA load signalling {state.describe()} in CTA {rank} "
                            f"of the cluster, which is not initialized there: initialize the "
                            f"barrier in every CTA and synchronize the cluster "
                            f"(cluster.barrier()) before the first multicast")
        buf = dest.buffer
        idx = _byte_index(type(dest)(buf, dest.offsets[part]), dtype.itemsize)
        pending = _pending(buf)
        pending.check(idx, frame, op, f"this multicast TMA load targets (in CTA {rank})")
        load = _Load(engine, state, dest, idx, raw, cluster.new_id(), where)
        hb = current_hb(frame) if rank == frame.cta_rank else None
        if hb is not None:  # partitions of this CTA: as a plain TMA load (happens_before.py)
            hb.access(frame, op, buf, idx, write=True, what="this TMA load writes",
                      noun="TMA write", engine="TMA load")
            load.hb = (hb, *hb.now(frame), op)
        pending.owner[idx] = load.id
        pending.describe(load.id, where, f"multicast TMA load (from CTA {frame.cta_rank})",
                         "writing", f"wait on {state.describe()} until it observes the phase "
                                    f"the load completes")
        engine.loads.append(load)
        state.in_flight.append(load)


__all__ = ["check_multicast", "slice_box", "slice_rows", "split_dim", "peer_view", "interpret_multicast"]
