"""The Hopper attention forward's tuning options (`attention_launcher` in hopper.py): the
defaults per head dim and dtype, and the checks of options a caller passes."""

from __future__ import annotations


def default_config(head_dim: int, dtype_name: str, causal: bool = False) -> dict:
    """The launcher's tuning options for a head dim and input dtype, each chosen against
    its alternatives as same-run variants on the H200 (examples/flash_attention/README.md,
    "Measured", has the ratios; until 2026-11-28 13:30 UTC a fixed benchmark order
    disfavoured every variant by up to 10%; re-timed in shuffled order at 14:10 UTC, none of
    the options that had lost narrowly came out ahead by more than the noise):

    - `block_n`, `stages`, `k_stages`: keys per block and the V and K ring depths, within
      the registers and the 227 KB of shared memory (K's ring is 2 deep at D = 128 in
      16-bit, to make room for `q_buffers`);
    - `warpgroups`: 3 consumer warpgroups (192-row tiles, 160 registers each, as FA3) at
      D = 64, where the softmax is as long as the GEMMs; else 2 (fp8 at D = 128 with 3:
      0.72-0.79x with 128-key blocks, which spill in the loop, and 0.92-1.00x with 64-key
      blocks, against a copy of ours at 1.00-1.05x; H100, 2026-12-07 07:32 UTC);
    - `overlap`: the PV wgmma under the next softmax (16-bit; fp8 measured slower with it);
    - `pingpong`: the warpgroups take turns issuing wgmmas, except at D = 256 (16-bit), where
      the GEMMs outlast the softmax and FA3 drops its scheduler barrier too;
    - `o_in_q`: O's epilogue goes through Q's buffer (16-bit, D >= 128: room for the ring);
    - `v_lag`: 1 loads V_{j-1} after K_j, the order the consumers read them in (D = 256 with
      a 2-deep K and 3-deep V ring, causal D = 64 with 3 and 5), 0 loads V_j after K_j;
    - `late_wait`: the PV wait after the softmax's exp2s, so P_j is packed into the
      registers P_{j-1} held (34-36 fewer copies of P a block at D = 128). On at D = 64
      (16-bit), where it lets three warpgroups overlap without spilling (1.01-1.06x); it
      measured 0.92-1.02x at D = 128, 0.93-0.95x at D = 256 and 0.94x in fp8. Always on
      with `overlap` in fp8: with the wait at the next block's top, ptxas (CUDA 13.0)
      packed P_j into the registers the in-flight PV wgmma read P_{j-1} from (the SASS of
      fp8 with `overlap` and `warp_rescale`: 16 such writes in the block loop; O off by 1e3
      on the H100, 2026-12-07 17:10 UTC); 16-bit P is not packed in place, and no 16-bit
      build shows such a write;
    - `row_sum_mma`: P's row sums as one more small wgmma (P against a [BN, 8] block of
      ones), instead of 64 FADDs a thread a block in the softmax; a fresh accumulator each
      block, added into l in fp32 (one running l in the wgmma's accumulator lost precision
      at 16k keys: fp8 wgmmas accumulate with fewer mantissa bits than fp32). On for fp8,
      whose softmax is issue-bound: 1.005-1.04x at D = 128, 1.06-1.12x at D = 64 and
      1.00-1.05x at D = 256 against a copy of ours at 0.94-1.0x, errors unchanged (H100,
      2026-12-06 16:02 UTC). Off in 16-bit, where the tensor cores are the busier unit
      (0.83-1.01x). l then sums P as rounded to e4m3, the P that the PV product weighs V
      with, so O's weights sum to 1, but the lse moves by about 1e-2: the launcher turns
      it off when the lse is asked for.
    - `promote_pv`: each block's P V from a fresh wgmma accumulator, added into O in fp32
      (an FFMA in place of the rescale's FMUL; 64 more registers), as fp8 GEMMs promote
      their partial sums: fp8 wgmmas accumulate with fewer mantissa bits than fp32. Needs
      `row_sum_mma` and no `overlap`. Off: 0.88-0.97x in fp8 (H100, 2026-12-06).
    - `extra_n` (0, 32 or 64): blocks of block_n + extra_n keys, the last extra_n in K and
      V rings of their own with wgmmas of their own (layouts have power-of-two shapes, so
      a 192-key block is a 128-key and a 64-key part, as FA3's 176-key blocks amortize the
      softmax's fixed costs a block over more keys). Needs `row_sum_mma`, `promote_pv` and
      `q_in_regs` off, and `overlap` off or with `late_wait` (with the early PV wait two P
      operands of 192 keys would be live). Off: in fp8 0.88-1.02x, in fp16 (with
      `late_wait` and 2-deep rings) 0.73-0.82x (H100, 2026-12-06).
    - `cluster` (1 or 2): with 2, a program is a cluster of two CTAs on neighbouring Q tiles
      of one head, and each CTA's producer fetches half of every K and V block for both (TMA
      multicast), halving the L2 reads of K and V, as FlashAttention-3 clusters its 16-bit
      non-causal forward at D >= 128. At D = 128 a 128-row tile reads 64 KB of K and V for
      every 8.4 MFLOP, about 4.5 TB/s from L2 at 575 TFLOP/s, which suggested L2 bandwidth
      as the limit; halving it changed nothing (16k, H100, 2026-12-06 16:50 UTC: 0.93-0.95x
      at D = 128 fp16 and bf16 against a copy of ours at 0.95-0.99x, 0.99x at D = 64, 1.00x
      at D = 256, 0.98x in fp8 at D = 128), so it is off. Not causal (a pair's tiles would
      visit different blocks); the launcher falls back to 1 when the Q tiles of a head are
      odd in number, unless asked.
    - `warp_arrivals`: each consumer warp releases its K and V stages and hands the
      ping-pong turn over on its own (`mbarrier.arrive(per_warp=True)`, 4 arrivals a
      warpgroup), where by default one thread arrives after a barrier of the warpgroup's 4
      warps: the block loop's last partition barrier goes (merging the loop's three into one
      gave 1.035x at D = 128 and 1.05x at D = 256, 2026-11-28). Off: within the noise
      (H100, 2026-12-06 17:45 UTC, against a copy of ours at 0.94-1.02x: 0.98-1.05x at
      D = 128 in fp16, 0.97-1.02x at D = 64, 0.95-0.99x at D = 256, 1.00-1.01x in fp8).
    - `lazy_rescale`: FlashAttention-4's conditional rescale. Each block the warpgroup's
      warps meet at a barrier that also ORs "a row maximum grew by more than 8 (log2)"
      (`gl.barrier_any`); unless one did, P is taken against the old maxima (P <= 256) and
      O *= alpha's 64 FMULs a thread, inside the ping-pong turn, are skipped (P <= 256 fits
      e4m3 too, whose largest value is 448). On in 16-bit: 1.045-1.08x at D = 128 (fp16,
      4k to 16k, causal and not; a copy of ours 0.99-1.035x), 1.046x in bf16, 1.086x at
      D = 256, 1.025x at D = 64 (copy 1.025x); off in fp8, where it measured 0.937x (H100,
      2026-12-06 21:46 UTC, 21 and 15 rounds) and again 0.968x and 0.986x at 16k (copy
      1.007x and 0.953x; 2026-12-07 02:40 UTC, 5 rounds); on in fp8 at D = 128 since
      `warp_rescale` decides it without the barrier. Needs `promote_pv` and `extra_n` off (the
      launcher turns it off for them unless it is asked for). Its price is bf16 accuracy:
      against the kept maximum a row's largest weight is 2^d (0 < d <= 8), rounded to bf16,
      where a fresh maximum makes it exactly 1, so the worst element's error grows
      (interpreter, N = 512, D = 128: 4.0e-3 against 2.9e-3 without it and 2.8e-3 for the
      output's rounding alone; on the H100 at 1k and 4k non-causal 4.4e-3 and 4.7e-3
      against cuDNN's 2.6e-3 and 3.0e-3, 2026-12-07 08:14 UTC, while 2k, 8k and 16k and
      every causal row were at or under cuDNN's). fp16's 3 more mantissa bits keep it
      near the exact-maximum loop's (a numpy model of the loop, 2 heads at N = 4096:
      3.77e-4 against 3.74e-4, bf16 3.79e-3 against 3.10e-3; 8 heads at 2048: fp16 4.44e-4
      against 4.00e-4, bf16 4.51e-3 against 3.29e-3;
      benchmarks/attention_lazy_rescale_error.py).
      `lazy_rescale=False` gives the exact-maximum weights back, and so does
      `rescale_slack=0` with `warp_rescale` (bf16's default at D = 128, below).
    - `rescale_slack` (with `lazy_rescale`; 8.0, FA4's): how far (log2 units) a row's
      maximum may outgrow the kept one before O is rescaled; P <= 2^slack must stay within
      the P dtype's range (e4m3's largest is 448, so at most 8 in fp8). A smaller slack
      rescales more blocks and leaves fewer rows' largest weights inexact (the model at
      N = 2048, 8 heads, bf16: 4.51e-3 at 8, 3.45e-3 at 2 with 20% of blocks rescaled,
      3.29e-3 with exact maxima). On the H100 (bf16, D = 128, 2026-12-07 08:43 UTC, 7
      rounds, a copy of ours at 0.956-1.012x): 2 ran 0.986x and 0.982x ours non-causal at
      4k and 16k with errors 3.3e-3 and 3.3e-3 (ours 4.7e-3 and 3.3e-3, cuDNN 3.0e-3 and
      3.5e-3, no lazy rescale 3.0e-3 and 3.9e-3 at 0.969x and 0.942x), causal 0.886x and
      0.970x; 0 (a rescale whenever a maximum grows, P taken twice) 0.736-0.783x. The
      worst element's error moves from row to row and run to run either way (at 16k the
      exact maxima's was the larger), so 8 stayed the default, and 2 is there for callers
      who want bf16's worst case nearer the exact-maximum loop's (bf16 at D = 128 now
      takes 0, below). With `warp_rescale`
      (H100, 2026-12-07 17:10 UTC, bf16, D = 128, 7 rounds): 3 ran 0.961-0.986x ours
      non-causal (4k: error 3.3e-3 against ours 4.7e-3 and cuDNN 3.0e-3) but 0.785-0.993x
      causal, 1 ran 0.755-0.971x; no lazy rescale 0.923-1.023x with cuDNN's errors.
    - `warp_rescale` (with `lazy_rescale`): each row keeps its maximum unless it outgrew
      it by more than the slack, and O's rescale (and SPEC_P's second P) runs only in the
      warps holding such a row (`gl.warp_any`, a warp vote) instead of after a barrier of
      the warpgroup's four warps that ORs the decision (`gl.barrier_any`): the exp2s then
      wait for no other warp, which is what cost fp8 the lazy rescale (its 0.937-0.986x).
      K_j's release, which shared that barrier, shares the loop's other one. On at D = 128
      (with the lazy rescale in fp8 too): against the mean of ours and a copy (the old
      defaults) in the same rounds, fp16 non-causal 1.011-1.057x in 7 of 7 rows, causal
      0.979-1.077x (median 0.994), bf16 0.966-1.044x, fp8 0.943-1.057x (10 of 14 ahead,
      median 1.015; 4k to 16k; H100, 2026-12-07 14:46-14:50 UTC, 7 to 21 rounds). Off at
      D = 64 and 256 (0.951-1.078x, no direction).
    - `split_tail`: stream-K for the last tiles (gluon/stream_k.py, attention_tiles.py).
      2048 tiles of 128 rows (B * N = 16k, 16 heads, the benchmark's shapes) on 132 SMs
      are 15.5 waves, so every SM idles through half of a 16th tile's time, 3% (ours ran
      2.3% and 3.2% faster at N = 4224 and 8448, 12 and 8 whole waves, than at 4096 and
      8192). With it the last full wave's and the ragged wave's tiles are dealt out as K/V
      blocks, about 1.5 tiles a program; a tile cut between two programs is finished by the
      second of them to get there, from both partials (O, m, l). On: with `lazy_rescale`
      1.02x more at D = 128, 8k and 16k (0.98x at 4k, inside the copies' spread), 1.044x in
      fp8 (1.028x at 22:14); D = 64 and 256 within the noise (H100, 2026-12-06 21:46 UTC).
      Both defaults together against neither: 1.02-1.065x in fp16 and bf16 at D = 128,
      1.11x / 1.08x at D = 256, 1.01x at D = 64 (22:12 UTC, 15 rounds). Non-causal only
      (causal tiles differ in length and already run longest first), and only where the
      tiles are not whole waves; the launcher decides.
    - `o_direct`: the epilogue stores O from registers to global memory (as FA2 does)
      instead of through Q's shared-memory buffer and a TMA store, so the buffer is free
      for the next tile's Q once the tile's last S_j is done: with O through Q's buffer a
      warpgroup waits at every tile for its store and then the next Q's load, and the
      ping-pong stalls the other warpgroup with it. Off: 0.955-1.03x (fp16 and bf16,
      D = 128, 4k to 16k, causal and not), 0.97x in fp8 (H100, 2026-12-06 22:12 UTC, 15
      rounds): the wait it removes is not what holds the 4k rows back.
    - `speculative_p` (with `lazy_rescale`): P is first taken against the kept maxima, as
      it is in most blocks, so the exp2s start as soon as S_j is done instead of after the
      row max's tree, its shuffles and the barrier that decides; a block that rescales
      takes it again against the new maxima. The row sums are each thread's share of
      them, added up across the quad once after the loop (no shuffles in the loop, and
      none in the branch, where ptxas would lose the uniform datapath). On at D = 128 in
      16-bit: 1.025-1.088x in 9 of 10 rows (4k to 16k, causal and not; one 0.944x) against
      a copy of ours at 0.953-1.040x (H100, 2026-12-07 00:37 and 00:40 UTC, 7 rounds);
      0.768x at D = 64 (three warpgroups with `late_wait`) and 1.000x at D = 256: off there.
      Not for fp8: there the two branches' packed P meet byte by byte (86 PRMTs a block).
    - `q_prefetch`: the producer sends the next tile's Q blocks into L2
      (`tma.async_prefetch`) once it has loaded this tile's. A tile boundary costs 2.3-3.0
      us, 1.2 us of it waiting for the next Q, which cannot be loaded before the epilogue
      has stored O out of Q's buffer; from L2 that load takes less of it. Off: 0.965-1.046x
      (fp16, D = 128, 4k and 16k, causal and not) against a copy of ours at 0.980-1.098x
      (H100, 2026-12-07 02:40 UTC, 5 rounds), and `q_buffers` takes the wait away whole.
    - `q_buffers` (1 or 2): with 2, two tiles' Q buffers, so the producer loads the next
      tile's Q while this one runs (its buffer held the tile before last's), and with O
      through Q's buffer the epilogue leaves its TMA store behind: the buffer is freed
      early in the next tile. The 32 KB it takes at D = 128 come out of K's ring (2 stages
      instead of 3; the default yields to ring depths or a `kv_ahead` the caller asks for
      that leave no room). On at D = 128 in 16-bit: 1.024-1.053x in all 6 rows (4k to 16k,
      causal and not) against a copy of ours at 0.982-1.010x (H100, 2026-12-07 02:41 UTC, 9
      rounds; 1.052/0.994/1.086/0.987x at 4k and 16k in a 5-round run at 02:40); a tile
      boundary went from 2.40 to 1.02 us at 4k (the wait for Q from 0.99 to 0.10 us).
      Off at D = 64 (1.025x and 1.052x against a copy at 1.013x and 1.025x, 16k) and in
      fp8 (1.013x and 1.019x, copy 1.007x and 0.953x); no room at D = 256.
    - `snake` (causal): persistent programs take the tiles of each wave in the direction
      opposite to the last wave's (`gluon/stream_k.py`). Causal tiles run longest first, so
      in the plain order program p gets the p-th longest tile of every wave and program 0
      the longest of each: a model of the static assignment
      (`benchmarks/attention_bwd_tail_model.py --forward`) ends 6.0-6.3% past the mean at
      4k-16k keys, the snake 0.1-0.3%. Which tiles run together is unchanged (a wave is the
      same set either way). On for causal 16-bit launches: against ours in the same runs,
      with a copy of ours beside it (H100, 2026-12-07 07:36-07:37 UTC, 7 rounds), fp16
      D = 128 1.121x and 1.081x at 4k and 16k (the copy 1.009x, 1.041x), bf16 1.139x and
      1.100x (copy 1.044x, 1.032x), D = 64 1.111x (copy 1.080x) and D = 256 1.244x (copy
      1.040x) at 16k; off in fp8, where it measured level with the copy (0.978x, 0.998x).
    - `ragged_first` (causal): where the tiles' rows do not divide N_q, the spare rows'
      whole warpgroups (of 64) go before row 0, in a head's first (shortest) tile, instead
      of at the end of its last, which visits every key: at D = 64 (192-row tiles) N = 4096
      leaves 128 rows over, and 128 rows against all 4096 keys are 6% of the causal work
      (ours at N = 4032, 21 whole tiles, ran 1.065x its TFLOP/s at 4096). Those
      warpgroups' Q loads read TMA's zeros and they store no O (a TMA store at a negative
      row is an illegal instruction on the H100). On for causal launches: D = 64 at 4k,
      it off measured 0.923x and 0.945x ours (fp16, bf16; a copy of ours 0.986x and
      1.022x; 15 rounds), at 2k 0.983x and 0.988x (copy 1.012x, 0.974x); 16k within the
      noise (H100, 2026-12-07 08:32 UTC). No effect where the rows divide N_q (D = 128 and
      256 at powers of two).
    - `scaled_p` (with `speculative_p` and `warp_rescale`): in a warp holding a row that
      grew, the speculative P is multiplied by alpha (one FMUL an element) instead of taken
      again against the new maxima (an FFMA and a MUFU.EX2 an element, its row sums and
      its packing), and the packing waits for that decision. With `rescale_slack=0` every
      row then takes its exact running maximum, as without the lazy rescale: the row's
      largest weights are exact, which is bf16's accuracy back (interpreter: 2.0e-3
      against the kept maxima's 3.1e-3, "What limits it"). Off: at 4k keys 1.005x and
      0.903x the default in bf16 (non-causal, causal), 0.911x and 0.921x in fp16; with the
      default slack 0.989x, 0.982x, 0.961x and 0.988x (H100, 2026-12-07 21:04 UTC, 5
      rounds): the packing's wait for the decision costs more than the exp2s it saves.
    - Exact maxima in bf16 at D = 128 (`rescale_slack=0`, `speculative_p=False`, with
      `warp_rescale`; bf16's default since 2026-12-07 21:05 UTC): every row takes its exact
      running maximum, P once after the row max, and O's rescale runs only in the warps
      holding a row that grew. The kept maxima (slack 8) rounded each row's largest weight
      (bf16 4k non-causal: 4.7e-3 against cuDNN's 3.0e-3); with exact maxima the errors
      are cuDNN's (3.0e-3, and 2.2e-3 causal), at 1.071x and 1.003x the kept maxima's
      speed, and without the lazy rescale 0.999x and 0.933x (H100, 2026-12-07 21:04 UTC, 4k
      keys, 5 rounds). In fp16, whose errors the kept maxima barely move, the same loop ran
      1.030x and 0.978x: fp16 keeps slack 8 and `speculative_p`.
    """
    fp8 = dtype_name == "float8_e4m3fn"
    cfg = dict(block_n=128, stages=3, k_stages=3, warpgroups=2, overlap=not fp8,
               pingpong=True, o_in_q=head_dim >= 128 and not fp8, v_lag=0, late_wait=False,
               row_sum_mma=fp8, promote_pv=False, extra_n=0, cluster=1, warp_arrivals=False,
               lazy_rescale=not fp8 or head_dim == 128, split_tail=True, o_direct=False,
               speculative_p=not fp8 and head_dim == 128, q_prefetch=False,
               q_buffers=2 if head_dim == 128 and not fp8 else 1, snake=causal and not fp8,
               ragged_first=causal, rescale_slack=8.0, warp_rescale=head_dim == 128,
               scaled_p=False)
    if cfg["q_buffers"] == 2:  # the second Q buffer's 32 KB come out of K's ring
        cfg.update(k_stages=2)
    if head_dim == 128 and dtype_name == "bfloat16":  # exact maxima: bf16's error (above)
        cfg.update(rescale_slack=0.0, speculative_p=False)
    if head_dim == 64:
        cfg.update(warpgroups=3, late_wait=not fp8)
        if causal and not fp8:
            cfg.update(v_lag=1, k_stages=3, stages=5)
    if head_dim == 256:  # fp8: K and V^T stages are half the size, 3 of each fit
        cfg.update(block_n=64, stages=3, k_stages=3 if fp8 else 2, pingpong=fp8,
                   v_lag=0 if fp8 else 1)
    return cfg


def check_tuning(cfg: dict, fp8: bool) -> None:
    """A ValueError naming the first tuning option out of range. V's ring needs 2 stages:
    a consumer releases V_{j-1} only after issuing the next PV product, which reads V_j, so
    with one stage the producer and the consumers wait on each other (the interpreter
    reports the deadlock; on the GPU it would hang)."""
    block_n = (((32, 64, 128, 256), "32, 64, 128 or 256 (keys per block; fp8 P packs keys "
                                    "in groups of 32)") if fp8 else
               ((16, 32, 64, 128, 256), "16, 32, 64, 128 or 256 (keys per block)"))
    allowed = {"warpgroups": ((2, 3), "2 or 3 (consumer warpgroups of 64 query rows)"),
               "extra_n": ((0, 32, 64), "0, 32 or 64 (keys a block beyond block_n)"),
               "cluster": ((1, 2), "1 or 2 (CTAs a program, sharing K/V loads)"),
               "v_lag": ((0, 1), "0 or 1 (V_j or V_{j-1} loaded after K_j)"),
               "q_buffers": ((1, 2), "1 or 2 (tiles whose Q shared memory holds)"),
               "block_n": block_n}
    if cfg["promote_pv"] and (cfg["overlap"] or not cfg["row_sum_mma"]):
        raise ValueError(f"attention_forward: promote_pv needs row_sum_mma=True and "
                         f"overlap=False, got row_sum_mma={cfg['row_sum_mma']!r}, "
                         f"overlap={cfg['overlap']!r}")
    if cfg["speculative_p"] and not cfg["lazy_rescale"]:
        raise ValueError(f"attention_forward: speculative_p needs lazy_rescale=True, got "
                         f"lazy_rescale={cfg['lazy_rescale']!r}")
    if cfg["scaled_p"] and not (cfg["speculative_p"] and cfg["warp_rescale"]):
        raise ValueError(f"attention_forward: scaled_p needs speculative_p=True and "
                         f"warp_rescale=True, got speculative_p={cfg['speculative_p']!r}, "
                         f"warp_rescale={cfg['warp_rescale']!r}")
    if cfg["warp_rescale"] and not cfg["lazy_rescale"]:
        raise ValueError(f"attention_forward: warp_rescale needs lazy_rescale=True, got "
                         f"lazy_rescale={cfg['lazy_rescale']!r}")
    if cfg["lazy_rescale"] and (cfg["promote_pv"] or cfg["extra_n"]):
        raise ValueError(f"attention_forward: lazy_rescale needs promote_pv and extra_n off, "
                         f"got promote_pv={cfg['promote_pv']!r}, extra_n={cfg['extra_n']!r}")
    if cfg["extra_n"] and (cfg["overlap"] and not cfg["late_wait"] or cfg["row_sum_mma"]
                           or cfg["promote_pv"]):
        raise ValueError(f"attention_forward: extra_n needs row_sum_mma and promote_pv off and "
                         f"the overlap off or with late_wait, got overlap={cfg['overlap']!r}, "
                         f"late_wait={cfg['late_wait']!r}, "
                         f"row_sum_mma={cfg['row_sum_mma']!r}, "
                         f"promote_pv={cfg['promote_pv']!r}")
    if fp8 and cfg["overlap"] and not cfg["late_wait"]:
        raise ValueError(f"attention_forward: overlap in fp8 needs late_wait=True (the PV "
                         f"product waited for before the next P is packed: with the wait at "
                         f"the next block's top, ptxas packs that P into the registers the "
                         f"PV wgmma is still reading), got late_wait={cfg['late_wait']!r}")
    slack = cfg["rescale_slack"]
    if isinstance(slack, bool) or not isinstance(slack, (int, float)) or \
            not 0 <= slack <= 8:
        raise ValueError(f"attention_forward: rescale_slack must be a number in [0, 8] (log2 "
                         f"units a row maximum may grow before O is rescaled; P <= 2^slack "
                         f"must fit e4m3's 448), got {slack!r}")
    for name, (values, what) in allowed.items():
        if cfg[name] not in values or isinstance(cfg[name], bool):
            raise ValueError(f"attention_forward: {name} must be {what}, got {cfg[name]!r}")
    for name, least in (("stages", 2), ("k_stages", 1)):
        value = cfg[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"attention_forward: {name} (the {'V' if name == 'stages' else 'K'} "
                             f"ring's depth) must be an int >= {least}, got {value!r}")


SHARED_BYTES = 227 * 1024  # a CTA's shared memory on sm_90a


def _shared_bytes(cfg: dict, head_dim: int, fp8: bool) -> int:
    """The shared memory of Q's buffers, O's (unless through Q's or stored from
    registers) and the K and V rings (mbarriers aside)."""
    size = 1 if fp8 else 2
    rows = 64 * cfg["warpgroups"]
    o_own = not (cfg["o_direct"] or cfg["o_in_q"] and not fp8)
    keys = cfg["block_n"] + cfg["extra_n"]
    return (rows * head_dim * (cfg["q_buffers"] * size + (2 if o_own else 0))
            + (cfg["k_stages"] + cfg["stages"]) * keys * head_dim * size)


def _fit_q_buffers(cfg: dict, tuning: dict, head_dim: int, dtype_name: str, fp8: bool,
                   causal: bool, kv_ahead: int) -> None:
    """Two Q buffers' room comes out of K's ring: asked for, K's ring is made shallower
    (down to 2) until the shared memory fits, or a ValueError says what it would need; as
    the default (16-bit D = 128, K's ring 2 deep for it), it yields to the ring depths,
    extra_n or kv_ahead the caller asks for. Asked for one buffer where the default has
    two, K's ring gets its third stage back."""
    asked = "q_buffers" in tuning
    own_k = "k_stages" in tuning
    if cfg["q_buffers"] == 1:
        if asked and not own_k and default_config(head_dim, dtype_name, causal)["q_buffers"] == 2:
            cfg["k_stages"] = 3
        return
    if asked:
        while not own_k and cfg["k_stages"] > 2 and \
                _shared_bytes(cfg, head_dim, fp8) > SHARED_BYTES:
            cfg["k_stages"] -= 1
        if _shared_bytes(cfg, head_dim, fp8) > SHARED_BYTES:
            raise ValueError(f"attention_forward: q_buffers=2 at D = {head_dim} needs "
                             f"{_shared_bytes(cfg, head_dim, fp8)} bytes of shared memory "
                             f"with k_stages={cfg['k_stages']}, stages={cfg['stages']}, "
                             f"more than the {SHARED_BYTES} a CTA has; use shallower rings")
    elif not own_k and kv_ahead > cfg["k_stages"]:
        cfg.update(q_buffers=1, k_stages=3)
    elif _shared_bytes(cfg, head_dim, fp8) > SHARED_BYTES:
        cfg["q_buffers"] = 1


def tuned_config(head_dim: int, dtype_name: str, fp8: bool, causal: bool, return_lse: bool,
                 tuning: dict, q_in_regs: bool, kv_ahead) -> dict:
    """`default_config` with the caller's options (`tuning`; None keeps a default) applied
    and checked, as `attention_launcher` runs it."""
    if isinstance(kv_ahead, bool) or not isinstance(kv_ahead, int) or kv_ahead < 0:
        raise ValueError(f"attention_forward: kv_ahead (K/V blocks loaded before a tile's Q) "
                         f"must be an int >= 0, got {kv_ahead!r}")
    cfg = default_config(head_dim, dtype_name, causal)
    if return_lse:  # an exact lse needs the row sums of P before its rounding to e4m3
        cfg["row_sum_mma"] = False
    unknown = sorted(set(tuning) - set(cfg))
    if unknown:
        raise TypeError(f"attention_forward: unknown option {unknown[0]!r}; tuning options: "
                        f"{', '.join(cfg)}")
    tuning = dict(tuning)
    if "stages" in tuning and "k_stages" not in tuning:
        tuning["k_stages"] = tuning["stages"]
    cfg.update({name: value for name, value in tuning.items() if value is not None})
    if cfg["extra_n"] and "row_sum_mma" not in tuning:  # fp8's default; extra_n needs it off
        cfg["row_sum_mma"] = False
    if (cfg["extra_n"] or cfg["promote_pv"]) and "lazy_rescale" not in tuning:
        cfg["lazy_rescale"] = False  # the default, which those two options exclude
    if not cfg["lazy_rescale"] and "speculative_p" not in tuning:
        cfg["speculative_p"] = False  # D = 128's default, which needs lazy_rescale
    if not cfg["lazy_rescale"] and "warp_rescale" not in tuning:
        cfg["warp_rescale"] = False  # D = 128's default, which needs lazy_rescale
    if fp8 and cfg["overlap"] and "late_wait" not in tuning:
        cfg["late_wait"] = True  # check_tuning says why
    check_tuning(cfg, fp8)
    _fit_q_buffers(cfg, tuning, head_dim, dtype_name, fp8, causal, kv_ahead)
    if kv_ahead > min(cfg["k_stages"], cfg["stages"]):  # the rings fill before Q is sent
        raise ValueError(f"attention_forward: kv_ahead (K/V blocks loaded before a tile's Q) "
                         f"must be at most the rings' depth, k_stages={cfg['k_stages']} and "
                         f"stages={cfg['stages']}, got {kv_ahead}: a further block would "
                         f"wait for a stage that only the tile's Q frees")
    if cfg["extra_n"] and q_in_regs:
        raise ValueError("attention_forward: extra_n needs q_in_regs=False, got q_in_regs=True")
    if cfg["cluster"] == 2 and causal:  # a causal pair of tiles visits different K/V blocks
        raise ValueError("attention_forward: cluster=2 (K/V multicast to a pair of Q tiles) "
                         "needs causal=False, got causal=True")
    return cfg


__all__ = ["default_config", "check_tuning", "tuned_config"]
