"""Paged decode attention ("flash decoding") in the tile DSL.

    o = paged_decode(q, k_cache, v_cache, block_table, seq_lens)

One step of autoregressive decoding against a KV cache kept in fixed-size blocks, as
inference servers (vLLM's PagedAttention) store it:

- q: (batch, H, D), one new token per sequence, or (batch, T, H, D) for T tokens at once
  (speculative decoding; token t sees the keys up to position seq_len - T + t);
- k_cache, v_cache: (num_blocks, block_size, H_kv, D); block_size 16, 32, 64 or 128;
- block_table: int32 (batch, max_blocks), the cache block holding each sequence's j-th
  block_size keys;
- seq_lens: int32 (batch,), the keys each sequence has (the new tokens included);
- returns (batch, H, D) (or (batch, T, H, D)) in q's dtype, fp16 or bf16; D in 64, 128, 256.

How the work is laid out:

- **GQA in the M dimension.** One program serves one KV head: the H / H_kv query heads that
  share it (times T tokens) are the rows of the Q tile, padded to 16 (the smallest MMA M)
  and masked, so every K/V byte is read once per KV head and feeds `tl.dot`.
- **Tiles of BLOCK_N keys, not of cache blocks.** A tile's rows are gathered through the
  block table (position -> block, slot), so small cache blocks still give 64-key tiles.
- **Split-KV.** When batch x H_kv programs are too few to fill the GPU, each sequence's
  tiles are cut into NUM_SPLITS contiguous ranges; every range writes its normalised
  partial output and log-sum-exp, and a second small kernel merges them by their LSE
  (launched with programmatic dependent launch on sm_90+: it may start during the split
  kernel's tail, and waits for it with gdc_wait before its loads).
- **Three latencies become two.** A range's block-table entries depend on seq_len (which
  fixes the range) and its tiles on them. Each program guesses its range from the table's
  width and loads those entries beside seq_len (and Q), so the real loads hit the caches.
- **CUDA graphs.** The grid is (batch x H_kv, NUM_SPLITS): it depends on shapes only, never
  on seq_lens. Ranges past a sequence's end write an LSE of -inf and exit; the merge kernel
  skips them by that LSE, without reading seq_lens.

The file is written against Triton's names only (`import tile as triton`): with
PAGED_DECODE_FRONTEND=triton it imports Triton 3.6 instead, and the same kernels run there
(benchmarks/paged_decode.py times both).
"""

from __future__ import annotations

import math
import os

import numpy as np

if os.environ.get("PAGED_DECODE_FRONTEND") == "triton":
    import triton
    import triton.language as tl
else:
    import tile as triton
    import tile.language as tl

BLOCK_SIZES = (16, 32, 64, 128)
HEAD_DIMS = (64, 128, 256)
DTYPES = ("float16", "bfloat16")
MAX_ROWS = 128       # query heads per KV head x tokens: the rows of one Q tile
MAX_SPLITS = 256
DEFAULT_SM_COUNT = 132  # the H100's, for the split heuristic when running on numpy


@triton.jit
def _paged_decode_split(
        Q, K_cache, V_cache, Block_table, Seq_lens, Out, Part_o, Part_lse,
        qk_scale, H_kv, max_blocks,
        stride_qb, stride_qt, stride_qh,
        stride_kb, stride_ks, stride_kh,
        stride_vb, stride_vs, stride_vh,
        stride_tb,
        stride_ob, stride_ot, stride_oh,
        T: tl.constexpr, GROUP: tl.constexpr, BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr,
        BLOCK_SIZE: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
        USE_PDL: tl.constexpr = False, TABLE_PREFETCH: tl.constexpr = False,
        DEFER_ROW_SUM: tl.constexpr = False):
    """One (sequence, KV head, key range): online softmax over the range's tiles."""
    if USE_PDL:
        # The merge kernel (launched with launch_pdl) may be scheduled now: its gdc_wait
        # still waits for this whole grid, but its launch and prologue overlap this one.
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    split = tl.program_id(1)
    batch = pid // H_kv
    kv_head = pid % H_kv
    batch64 = batch.to(tl.int64)
    table = Block_table + batch64 * stride_tb
    seq_len = tl.load(Seq_lens + batch)
    if TABLE_PREFETCH:
        # The range's block-table entries are loaded after seq_len (the range depends on
        # it), and its K/V tiles after them: three memory latencies before the first tile.
        # Guess the range from the table's width instead (servers size it to the batch's
        # longest sequence), and load the two cache lines of entries it starts with while
        # seq_len is in flight, so the pipeline's loads of them hit the caches. Folding
        # both into seq_len keeps the loads (max(seq_len, min(entry, 0)) is seq_len for
        # any seq_len >= 0) and makes the pipeline wait for both, not just the first.
        guess_tiles = tl.cdiv(tl.cdiv(max_blocks * BLOCK_SIZE, BLOCK_N), NUM_SPLITS)
        lo = tl.minimum(split * guess_tiles * BLOCK_N // BLOCK_SIZE, max_blocks - 1)
        hi = tl.minimum(lo + 31, max_blocks - 1)
        entry = tl.minimum(tl.load(table + lo), tl.load(table + hi))
        seq_len = tl.maximum(seq_len, tl.minimum(entry, 0))
    num_tiles = tl.cdiv(seq_len, BLOCK_N)
    tiles_per_split = tl.cdiv(num_tiles, NUM_SPLITS)
    first = split * tiles_per_split
    last = tl.minimum(first + tiles_per_split, num_tiles)

    # Row r of the Q tile is query head kv_head * GROUP + r % GROUP of token r // GROUP.
    rows = tl.arange(0, BLOCK_M)
    token = rows // GROUP
    head = kv_head * GROUP + rows % GROUP
    row_ok = rows < T * GROUP
    dims = tl.arange(0, HEAD_DIM)
    # Q does not depend on seq_len: its load goes out with seq_len's, before the branch.
    q_rows = batch64 * stride_qb + token * stride_qt + head * stride_qh
    q = tl.load(Q + q_rows[:, None] + dims[None, :], mask=row_ok[:, None], other=0.0)
    # Partial results, row ((batch * T + token) * H + head) * NUM_SPLITS + split.
    part = ((batch64 * T + token) * (H_kv * GROUP) + head) * NUM_SPLITS + split
    if NUM_SPLITS > 1:
        if first >= last:
            # Past the sequence's end: an LSE of -inf tells _paged_decode_merge to skip this
            # range, so the merge need not read seq_lens before its loads.
            tl.store(Part_lse + part, tl.full([BLOCK_M], float("-inf"), tl.float32),
                     mask=row_ok)
            return
    # Token t is at position seq_len - T + t and sees the keys before and at it.
    visible = seq_len - T + 1 + token

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    # With DEFER_ROW_SUM the row sums stay per column until the loop ends: a sum across
    # the tile's columns (spread over the warps) costs each tile a shared-memory round trip
    # and a barrier (3 BAR.SYNC a tile instead of 4 in the 4-warp batch-1 loop's SASS).
    l_i = tl.zeros([BLOCK_M], tl.float32)
    l_cols = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    cols = tl.arange(0, BLOCK_N)
    for tile_index in range(first, last):
        pos = tile_index * BLOCK_N + cols
        in_seq = pos < seq_len
        block = tl.load(table + pos // BLOCK_SIZE, mask=in_seq, other=0).to(tl.int64)
        slot = pos % BLOCK_SIZE
        k_rows = block * stride_kb + slot * stride_ks + kv_head * stride_kh
        k = tl.load(K_cache + k_rows[:, None] + dims[None, :], mask=in_seq[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(pos[None, :] < visible[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row that has seen no key yet keeps m = -inf; subtract 0 there instead of -inf.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        if DEFER_ROW_SUM:
            l_cols = l_cols * alpha[:, None] + p
        else:
            l_i = l_i * alpha + tl.sum(p, 1)
        v_rows = block * stride_vb + slot * stride_vs + kv_head * stride_vh
        v = tl.load(V_cache + v_rows[:, None] + dims[None, :], mask=in_seq[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new

    if DEFER_ROW_SUM:
        l_i = tl.sum(l_cols, 1)
    o = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # rows that saw no key: o = 0
    if NUM_SPLITS == 1:
        o_rows = batch64 * stride_ob + token * stride_ot + head * stride_oh
        tl.store(Out + o_rows[:, None] + dims[None, :], o.to(Out.dtype.element_ty),
                 mask=row_ok[:, None])
    else:
        lse = tl.where(l_i == 0.0, float("-inf"), m_i + tl.math.log2(l_i))  # base 2
        tl.store(Part_o + part[:, None] * HEAD_DIM + dims[None, :], o, mask=row_ok[:, None])
        tl.store(Part_lse + part, lse, mask=row_ok)


@triton.jit
def _paged_decode_merge(
        Part_o, Part_lse, Out, H,
        stride_ob, stride_ot, stride_oh,
        T: tl.constexpr, HEAD_DIM: tl.constexpr,
        NUM_SPLITS: tl.constexpr, SPLITS_POW2: tl.constexpr, USE_PDL: tl.constexpr = False):
    """One output row: the live ranges' partial outputs weighted by exp2(lse - max lse)."""
    row = tl.program_id(0)  # (batch * T + token) * H + head
    head = row % H
    token = (row // H) % T
    batch = row // (H * T)
    splits = tl.arange(0, SPLITS_POW2)
    dims = tl.arange(0, HEAD_DIM)
    part = row.to(tl.int64) * NUM_SPLITS + splits
    # Both loads go out at once: nothing here depends on seq_lens. A range past the
    # sequence's end wrote lse = -inf and no output, so its o (never written) is replaced
    # by 0 after the load, not masked before it.
    in_range = splits < NUM_SPLITS
    if USE_PDL:
        tl.extra.cuda.gdc_wait()  # the split kernel's partials, complete and visible
    lse = tl.load(Part_lse + part, mask=in_range, other=float("-inf"))
    o = tl.load(Part_o + part[:, None] * HEAD_DIM + dims[None, :], mask=in_range[:, None],
                other=0.0)
    m = tl.max(lse, 0)
    weight = tl.math.exp2(lse - tl.where(m == float("-inf"), 0.0, m))
    o = tl.where((lse > float("-inf"))[:, None], o, 0.0)
    total = tl.sum(weight, 0)
    o = tl.sum(o * weight[:, None], 0) / tl.where(total == 0.0, 1.0, total)
    o_row = batch.to(tl.int64) * stride_ob + token * stride_ot + head * stride_oh
    tl.store(Out + o_row + dims, o.to(Out.dtype.element_ty))


# ---- host side ---------------------------------------------------------------------------

def _is_numpy(x) -> bool:
    return isinstance(x, np.ndarray)


def _dtype_name(x) -> str:
    return x.dtype.name if _is_numpy(x) else str(x.dtype).removeprefix("torch.")


def _strides(x) -> tuple:
    if _is_numpy(x):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(x.stride())


def _next_power_of_2(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


SHARED_PER_SM = 228 * 1024   # Hopper's shared memory per SM; each CTA also reserves 1 KB


def split_scratch_bytes(block_m: int, head_dim: int) -> int:
    """Shared memory the split kernel uses beside its K/V rings (layout conversions of the
    accumulator, and with 64 or more query rows, wgmma's Q and P operands), per head-dim
    column: 64 bytes up to 32 rows, at most 6 x block_m beyond (an upper bound measured on
    the compiled kernels; tests/examples/test_paged_decode.py keeps it one)."""
    return head_dim * (64 if block_m <= 32 else 6 * block_m)


def programs_fitting_per_sm(config: dict, head_dim: int, block_m: int = 16,
                            itemsize: int = 2) -> int:
    """Split-kernel programs that fit on one SM by shared memory: the K and V rings
    (num_stages tiles of BLOCK_N x head_dim each) plus the scratch. At most 4 (at about 120
    registers per thread four 4-warp programs fill the register file), and 2 from 64 query
    rows on (over 200 registers)."""
    rings = 2 * config["num_stages"] * config["BLOCK_N"] * head_dim * itemsize
    by_shared = SHARED_PER_SM // (rings + split_scratch_bytes(block_m, head_dim) + 1024)
    return max(1, min(4 if block_m <= 32 else 2, by_shared))


def default_config(head_dim: int, programs: int = 0,
                   sm_count: int = DEFAULT_SM_COUNT) -> dict:
    """BLOCK_N (keys per tile), num_warps and num_stages for a launch of `programs` = batch
    x H_kv, and for split launches (fewer programs than SMs) the programs per SM that the
    split count assumes (`programs_per_sm`; without it, as many as fit). Tiles gather across
    cache blocks, so their size is free of block_size. At D = 128: a split launch takes
    32-key tiles in 3-deep rings, with ranges for two programs per SM; up to three
    programs per SM, 64-key tiles in 2-deep rings (72 KB of shared memory); more than
    that, 32-key tiles in 2-deep rings (40 KB: one wave at batch 64). D = 64: 64-key tiles
    in 2-deep rings; D = 256: 32-key tiles in 3-deep rings. Measured (examples/
    flash_attention/README.md): on the H200 against the earlier 3-deep 64-key rings
    (2-deep at D = 256) at batch 1 and 4, 8k and 32k keys, 1.04-1.13x at D = 128,
    1.02-1.10x at D = 64, 1.09-1.16x at D = 256; at batch 64 and 128, 32-key tiles
    1.02-1.26x the 2-deep 64-key rings; on the H100 (2026-12-07), their 2-deep rings
    1.015-1.027x the 3-deep ones at 1k and 8k keys (4-deep: 0.83-0.97x), and for split
    launches the 32-key 3-deep rings at two programs an SM 1.004-1.036x the 64-key 2-deep
    ones at batch 1, 2 and 4 with 8k keys, 0.997-1.017x from 32k on and at batch 8 (three
    or four programs an SM: 0.95-1.00x at 8k; 4- or 5-deep rings: 0.93-0.97x)."""
    if head_dim == 256:
        return dict(BLOCK_N=32, num_warps=4, num_stages=3)
    config = dict(BLOCK_N=64, num_warps=4, num_stages=2)
    if head_dim == 128 and programs < sm_count:
        return dict(BLOCK_N=32, num_warps=4, num_stages=3, programs_per_sm=2)
    if head_dim == 128 and programs > programs_fitting_per_sm(config, head_dim) * sm_count:
        config = dict(BLOCK_N=32, num_warps=4, num_stages=2)
    return config


def launch_config(head_dim: int, programs: int, sm_count: int, config=None) -> dict:
    """`default_config` with the caller's `config` applied; the default's programs_per_sm
    belongs to its rings, so a caller's config drops it unless it gives its own."""
    cfg = default_config(head_dim, programs, sm_count)
    if config:
        cfg = dict({k: v for k, v in cfg.items() if k != "programs_per_sm"}, **config)
    return cfg


def split_programs_per_sm(config: dict, head_dim: int, block_m: int = 16) -> int:
    """The programs per SM a split count is made for: the config's programs_per_sm, at
    most as many as fit (`programs_fitting_per_sm`)."""
    return min(config.get("programs_per_sm", 4),
               programs_fitting_per_sm(config, head_dim, block_m))


def choose_num_splits(batch: int, kv_heads: int, max_tiles: int, sm_count: int,
                      programs_per_sm: int = 4, min_tiles: int = 4) -> int:
    """Key ranges per (sequence, KV head), 1 when batch x H_kv already fills the GPU.
    Otherwise the larger of: about `programs_per_sm` programs per SM (as many as fit, see
    `programs_fitting_per_sm`) with ranges of at least `min_tiles` tiles, and two per SM
    with ranges of at least half that (short sequences, where latency rules). Rounded down:
    a few idle slots cost less than a partial extra wave. Measured on the H100 (README):
    batch 4 at 32k keys went from 72% to 94% of copy bandwidth against the old "two per SM,
    rounded up" (9 ranges), and fewer than four tiles per range lost at 8k. It depends on
    shapes only (max_tiles comes from the block table's width), so a CUDA graph captured
    once stays valid for any seq_lens."""
    programs = batch * kv_heads
    if programs == 0 or programs >= sm_count:  # nothing to launch, or a full wave already
        return 1
    occupied = min(programs_per_sm * sm_count // programs, max_tiles // min_tiles)
    short = min(2 * sm_count // programs, max_tiles // max(1, min_tiles // 2))
    return max(1, min(max(occupied, short), 64))


_DEVICES: dict = {}  # device -> (multiprocessor count, compute capability major), asked once


def _device_facts(x) -> tuple:
    facts = _DEVICES.get(x.device)
    if facts is None:
        import torch
        props = torch.cuda.get_device_properties(x.device)
        facts = _DEVICES[x.device] = (props.multi_processor_count, props.major)
    return facts


def _sm_count(x) -> int:
    return DEFAULT_SM_COUNT if _is_numpy(x) else _device_facts(x)[0]


def _compute_capability(x) -> int:
    return _device_facts(x)[1]


def _check(q, k_cache, v_cache, block_table, seq_lens):
    """(batch, T, H, D, block_size, H_kv) after checking every argument's shape and dtype."""
    if q.ndim not in (3, 4):
        raise ValueError(f"paged_decode: q must be (batch, H, D) or (batch, T, H, D), got "
                         f"shape {tuple(q.shape)}")
    batch, T, H, D = (q.shape[0], 1, *q.shape[1:]) if q.ndim == 3 else tuple(q.shape)
    for name, x in (("k_cache", k_cache), ("v_cache", v_cache)):
        if x.ndim != 4:
            raise ValueError(f"paged_decode: {name} must be (num_blocks, block_size, H_kv, D), "
                             f"got shape {tuple(x.shape)}")
    if tuple(k_cache.shape) != tuple(v_cache.shape):
        raise ValueError(f"paged_decode: k_cache and v_cache must have the same shape, got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    _, block_size, H_kv, Dk = k_cache.shape
    if Dk != D:
        raise ValueError(f"paged_decode: k_cache has head dim {Dk} but q has {D}; they must "
                         f"match")
    if D not in HEAD_DIMS:
        raise ValueError(f"paged_decode: head dim D = {D} is not supported; allowed: "
                         f"{', '.join(map(str, HEAD_DIMS))}")
    if block_size not in BLOCK_SIZES:
        raise ValueError(f"paged_decode: block_size = {block_size} (k_cache.shape[1]) is not "
                         f"supported; allowed: {', '.join(map(str, BLOCK_SIZES))}")
    if H % H_kv:
        raise ValueError(f"paged_decode: q has H = {H} heads, not a multiple of the cache's "
                         f"H_kv = {H_kv}")
    if T * (H // H_kv) > MAX_ROWS:
        raise ValueError(f"paged_decode: T x H / H_kv = {T} x {H // H_kv} query rows per KV "
                         f"head is more than {MAX_ROWS}")
    names = {n: _dtype_name(x) for n, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache))}
    for n, dt in names.items():
        if dt not in DTYPES:
            raise ValueError(f"paged_decode: {n} has dtype {dt}; allowed: {', '.join(DTYPES)}")
    if len(set(names.values())) != 1:
        raise ValueError("paged_decode: q, k_cache and v_cache must share one dtype, got "
                         + ", ".join(f"{n} {d}" for n, d in names.items()))
    for n, x, shape in (("block_table", block_table, f"({batch}, max_blocks)"),
                        ("seq_lens", seq_lens, f"({batch},)")):
        if _dtype_name(x) != "int32":
            raise ValueError(f"paged_decode: {n} must be int32, got {_dtype_name(x)}")
        want_ndim = 2 if n == "block_table" else 1
        if x.ndim != want_ndim or x.shape[0] != batch:
            raise ValueError(f"paged_decode: {n} must have shape {shape}, got "
                             f"{tuple(x.shape)}")
    for n, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
                 ("block_table", block_table)):
        if _strides(x)[-1] != 1 and 0 not in x.shape:  # numpy gives empty arrays 0 strides
            raise ValueError(f"paged_decode: {n}'s last dim must be contiguous (stride 1), "
                             f"got strides {_strides(x)}")
    kinds = {_is_numpy(x) for x in (q, k_cache, v_cache, block_table, seq_lens)}
    if len(kinds) != 1:
        raise ValueError("paged_decode: pass all arrays as numpy (interpreter) or all as "
                         "CUDA tensors, not a mix")
    if _is_numpy(seq_lens) and batch and int(seq_lens.min()) < 0:
        raise ValueError(f"paged_decode: seq_lens must be >= 0, got {int(seq_lens.min())} "
                         f"(sequence {int(seq_lens.argmin())})")
    if (_is_numpy(seq_lens) and batch and
            int(seq_lens.max()) > block_table.shape[1] * block_size):
        raise ValueError(f"paged_decode: seq_lens has {int(seq_lens.max())} keys but the "
                         f"block table holds at most {block_table.shape[1]} x {block_size}")
    return batch, T, H, D, block_size, H_kv


def _empty(like, shape, dtype_name):
    if _is_numpy(like):
        import ml_dtypes
        np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
                    "float32": np.float32}[dtype_name]
        return np.empty(shape, np_dtype)
    import torch
    return torch.empty(shape, device=like.device, dtype=getattr(torch, dtype_name))


class _Plan:
    """Everything a call derives from its arguments' shapes, dtypes and strides: the checks'
    results, the split count, the grids and the launches' fixed arguments. CUDA tensors
    reuse it across calls with the same key (`_plan`), so a call only allocates and
    launches."""

    def __init__(self, q, k_cache, v_cache, block_table, seq_lens, num_splits, config,
                 pdl=None):
        batch, T, H, D, block_size, H_kv = _check(q, k_cache, v_cache, block_table, seq_lens)
        block_m = max(16, _next_power_of_2(T * (H // H_kv)))
        # The config follows batch x H_kv (at D = 128: a split launch, one wave of up to
        # three programs per SM, or four per SM for the launches larger than that).
        cfg = launch_config(D, batch * H_kv, _sm_count(q), config)
        block_n = cfg["BLOCK_N"]
        if num_splits is None:
            max_tiles = -(-block_table.shape[1] * block_size // block_n)
            num_splits = choose_num_splits(
                batch, H_kv, max_tiles, _sm_count(q),
                programs_per_sm=split_programs_per_sm(cfg, D, block_m))
        elif type(num_splits) is not int or not 1 <= num_splits <= MAX_SPLITS:
            raise ValueError(f"paged_decode: num_splits must be an int from 1 to {MAX_SPLITS}, "
                             f"got {num_splits!r}")
        self.batch, self.num_splits, self.default_scale = batch, num_splits, 1.0 / math.sqrt(D)
        # The output has q's shape; a 3-d q is read and written as T = 1 with a token
        # stride of 0 (token is always 0), so neither needs a reshape per call.
        self.out_shape = tuple(q.shape)
        sq = _strides(q)
        q_strides = (sq[0], 0, sq[1]) if q.ndim == 3 else sq[:3]
        o_strides = (T * H * D, H * D, D)
        sk, sv = _strides(k_cache), _strides(v_cache)
        self.part_shapes = ((batch * T * H * num_splits, D), (batch * T * H * num_splits,)) \
            if num_splits > 1 else None
        self.split_grid = (batch * H_kv, num_splits)
        self.split_args = (H_kv, block_table.shape[1], *q_strides, *sk[:3], *sv[:3],
                           _strides(block_table)[0], *o_strides)
        # Programmatic dependent launch of the merge (sm_90+, CUDA tensors): its launch and
        # index math overlap the split kernel's tail, its gdc_wait orders its loads.
        if pdl is None:
            pdl = (not _is_numpy(q) and num_splits > 1 and
                   _compute_capability(q) >= 9)
        self.pdl = bool(pdl) and num_splits > 1
        self.split_meta = dict(
            T=T, GROUP=H // H_kv, BLOCK_M=block_m,
            HEAD_DIM=D, BLOCK_SIZE=block_size, BLOCK_N=block_n, NUM_SPLITS=num_splits,
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], USE_PDL=self.pdl,
            TABLE_PREFETCH=bool(cfg.get("table_prefetch", True)) and block_table.shape[1] > 0,
            DEFER_ROW_SUM=bool(cfg.get("defer_row_sum", True)))
        self.merge_grid = (batch * T * H,)
        self.merge_args = (H, *o_strides)
        self.merge_meta = dict(T=T, HEAD_DIM=D, NUM_SPLITS=num_splits,
                               SPLITS_POW2=_next_power_of_2(num_splits), num_warps=4,
                               USE_PDL=self.pdl, launch_pdl=self.pdl)


_PLANS: dict = {}
_MAX_PLANS = 256  # a server whose block tables keep growing must not grow this without end
_PLACEHOLDERS: dict = {}  # device -> the never-touched part buffer of unsplit launches


def _plan(q, k_cache, v_cache, block_table, seq_lens, num_splits, config, pdl=None) -> _Plan:
    """The call's _Plan; for CUDA tensors cached by everything the checks and launches read
    (numpy inputs are checked every call: the seq_lens check reads their values)."""
    if config is not None or _is_numpy(q):
        return _Plan(q, k_cache, v_cache, block_table, seq_lens, num_splits, config, pdl)
    try:
        key = (q.shape, q.stride(), q.dtype, q.device, k_cache.shape, k_cache.stride(),
               k_cache.dtype, v_cache.shape, v_cache.stride(), v_cache.dtype,
               block_table.shape, block_table.stride(), block_table.dtype, seq_lens.shape,
               seq_lens.dtype, type(k_cache), type(v_cache), type(block_table),
               type(seq_lens), num_splits, pdl)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):  # not all tensors (or an odd num_splits): no cache
        return _Plan(q, k_cache, v_cache, block_table, seq_lens, num_splits, config, pdl)
    if plan is None:
        plan = _Plan(q, k_cache, v_cache, block_table, seq_lens, num_splits, config, pdl)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def paged_decode(q, k_cache, v_cache, block_table, seq_lens, *, sm_scale=None,
                 num_splits=None, config=None, pdl=None):
    """softmax(q k^T * sm_scale) v over each sequence's first seq_lens[b] cached keys.

    numpy arrays run in the CPU interpreter, CUDA tensors on the GPU. `sm_scale` defaults
    to 1/sqrt(D); `num_splits` (key ranges per sequence and KV head) to
    `choose_num_splits`; `config` overrides `default_config` (BLOCK_N, num_warps,
    num_stages, programs_per_sm, and table_prefetch and defer_row_sum: on by default, off
    to time without them); `pdl` launches the merge with programmatic dependent
    launch (default: on for CUDA tensors on sm_90+ when the keys are split). A sequence
    with seq_len 0 gets o = 0. No host syncs: CUDA-graph safe.
    """
    plan = _plan(q, k_cache, v_cache, block_table, seq_lens, num_splits, config, pdl)
    numpy_inputs = _is_numpy(q)
    if numpy_inputs:
        out = _empty(q, plan.out_shape, _dtype_name(q))
    else:
        import torch
        out = torch.empty(plan.out_shape, device=q.device, dtype=q.dtype)
    if plan.batch == 0:
        return out
    if plan.part_shapes is not None:
        part_o = _empty(q, plan.part_shapes[0], "float32")
        part_lse = _empty(q, plan.part_shapes[1], "float32")
    elif numpy_inputs:
        part_o = part_lse = _empty(q, (1,), "float32")
    else:
        part_o = part_lse = _PLACEHOLDERS.get(q.device)
        if part_o is None:
            part_o = part_lse = _PLACEHOLDERS[q.device] = _empty(q, (1,), "float32")
    scale = (plan.default_scale if sm_scale is None else sm_scale) * math.log2(math.e)
    _paged_decode_split[plan.split_grid](
        q, k_cache, v_cache, block_table, seq_lens, out, part_o, part_lse, scale,
        *plan.split_args, **plan.split_meta)
    if plan.part_shapes is not None:
        _paged_decode_merge[plan.merge_grid](part_o, part_lse, out, *plan.merge_args,
                                             **plan.merge_meta)
    return out


# ---- reference and inputs ------------------------------------------------------------------

def reference(q, k_cache, v_cache, block_table, seq_lens, sm_scale=None) -> np.ndarray:
    """float64 numpy: gather each sequence's keys through the block table, then attend."""
    q = np.asarray(q, np.float64)
    squeeze = q.ndim == 3
    if squeeze:
        q = q[:, None]
    batch, T, H, D = q.shape
    _, block_size, H_kv, _ = k_cache.shape
    group = H // H_kv
    scale = 1.0 / math.sqrt(D) if sm_scale is None else sm_scale
    out = np.zeros((batch, T, H, D))
    for b in range(batch):
        n = int(seq_lens[b])
        blocks = block_table[b, :-(-n // block_size)] if n else block_table[b, :0]
        k = np.asarray(k_cache[blocks], np.float64).reshape(-1, H_kv, D)[:n]
        v = np.asarray(v_cache[blocks], np.float64).reshape(-1, H_kv, D)[:n]
        for t in range(T):
            visible = n - T + 1 + t
            if visible <= 0:
                continue
            kh = np.repeat(k[:visible], group, axis=1)      # (visible, H, D)
            vh = np.repeat(v[:visible], group, axis=1)
            s = np.einsum("hd,nhd->hn", q[b, t], kh) * scale
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[b, t] = np.einsum("hn,nhd->hd", p / p.sum(axis=1, keepdims=True), vh)
    return out[:, 0] if squeeze else out


def random_inputs(batch, H, H_kv, D, block_size, seq_lens, dtype="float16", T=None,
                  extra_blocks=3, seed=0):
    """numpy q, k_cache, v_cache, block_table, seq_lens: every sequence's blocks drawn at
    random (without repeats) from a shared pool with `extra_blocks` blocks no one uses."""
    import ml_dtypes
    np_dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype]
    rng = np.random.default_rng(seed)
    seq_lens = np.asarray(seq_lens, np.int32)
    per_seq = [-(-int(n) // block_size) for n in seq_lens]
    max_blocks = max(1, max(per_seq, default=1))
    num_blocks = sum(per_seq) + extra_blocks
    pool = rng.permutation(num_blocks).astype(np.int32)
    table = np.zeros((batch, max_blocks), np.int32)
    used = 0
    for b, nb in enumerate(per_seq):
        table[b, :nb] = pool[used:used + nb]
        used += nb
    qshape = (batch, H, D) if T is None else (batch, T, H, D)
    q = rng.standard_normal(qshape).astype(np_dtype)
    k = rng.standard_normal((num_blocks, block_size, H_kv, D)).astype(np_dtype)
    v = rng.standard_normal((num_blocks, block_size, H_kv, D)).astype(np_dtype)
    return q, k, v, table, seq_lens
