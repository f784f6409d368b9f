"""examples/flash_attention/paged_decode.py in the interpreter against a float64 numpy
reference (random block tables, ragged seq_lens, every block size, GQA 1 / 4 / 8, D 64 and
128, split-KV and not, several query tokens), the split heuristic, a grid that does not
depend on seq_lens, the input checks, and the PTX for sm_90a. On the GPU:
tests/gpu/test_paged_decode_gpu.py."""

import os
import re
import sys

import numpy as np
import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))

import paged_decode as pd  # noqa: E402

import tile  # noqa: E402

# Max |o - ref| / max |ref|: q, K, V and P are rounded to the input type.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2}


def _check(block_size, H, H_kv, D, seq_lens, num_splits=None, T=None, dtype="float16",
           seed=0):
    q, k, v, table, lens = pd.random_inputs(len(seq_lens), H, H_kv, D, block_size, seq_lens,
                                            dtype=dtype, T=T, seed=seed)
    o = pd.paged_decode(q, k, v, table, lens, num_splits=num_splits)
    ref = pd.reference(q, k, v, table, lens)
    assert o.shape == q.shape and o.dtype == q.dtype
    err = float(np.abs(o.astype(np.float64) - ref).max() / np.abs(ref).max())
    assert err <= TOLERANCE[dtype], err
    return o, ref


@pytest.mark.parametrize("block_size", pd.BLOCK_SIZES)
@pytest.mark.parametrize("group", [1, 4, 8])
def test_matches_numpy(block_size, group):
    # Ragged lengths crossing block and 64-key tile edges; D alternates so both are covered.
    D = 64 if (block_size // 16 + group) % 2 else 128
    lens = [1 + (block_size * 3 + 7 * group) % 150, 2 * block_size - 1, 64]
    _check(block_size, 2 * group, 2, D, lens, num_splits=None if group == 4 else 3,
           seed=block_size + group)


def test_splits_past_the_end_and_empty_sequences():
    # 5 ranges of one 64-key tile each over lengths of 0, 1, 65 and 320 keys: most ranges of
    # the short sequences never run, and the merge must skip them.
    o, _ = _check(16, 4, 1, 64, [0, 1, 65, 320], num_splits=5)
    assert not np.any(o[0])  # no keys: o = 0


def test_table_prefetch_changes_no_result():
    # The prefetch guesses each range's first entries from the table's width; a table
    # wider than most sequences (and ranges guessed past their ends, clamped to the last
    # column) must give the bits the kernel gives without it.
    q, k, v, table, lens = pd.random_inputs(3, 8, 2, 64, 16, [0, 37, 300], seed=6)
    table = np.concatenate([table, np.full((3, 29), 10 ** 6, np.int32)], axis=1)
    outs = [pd.paged_decode(q, k, v, table, lens, num_splits=splits,
                            config=dict(BLOCK_N=32, num_warps=4, num_stages=2,
                                        table_prefetch=prefetch))
            for splits in (1, 7) for prefetch in (True, False)]
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[2], outs[3])
    ref = pd.reference(q, k, v, table, lens)
    assert float(np.abs(outs[2].astype(np.float64) - ref).max() / np.abs(ref).max()) <= \
        TOLERANCE["float16"]


def test_merge_ignores_what_skipped_ranges_never_wrote(monkeypatch):
    # Skipped ranges write only lse = -inf; the merge loads their (never written) partial
    # outputs anyway, so as not to wait for the LSE, and must drop them: NaN-filled part
    # buffers give the same result as before.
    real_empty = pd._empty

    def nan_empty(like, shape, dtype_name):
        out = real_empty(like, shape, dtype_name)
        if dtype_name == "float32":
            out.fill(np.nan)
        return out

    monkeypatch.setattr(pd, "_empty", nan_empty)
    o, _ = _check(16, 4, 1, 64, [0, 1, 65, 320], num_splits=5)
    assert not np.any(o[0])


def test_several_query_tokens_see_their_own_prefix():
    # (batch, T, H, D): token t sees the keys up to position seq_len - T + t.
    _check(32, 8, 2, 64, [3, 100], T=3, num_splits=2)


def test_bf16_d256():
    _check(64, 4, 1, 256, [130], dtype="bfloat16", num_splits=2)


def test_sm_scale():
    q, k, v, table, lens = pd.random_inputs(1, 2, 1, 64, 16, [40], seed=3)
    o = pd.paged_decode(q, k, v, table, lens, sm_scale=0.3)
    ref = pd.reference(q, k, v, table, lens, sm_scale=0.3)
    assert float(np.abs(o.astype(np.float64) - ref).max()) < 2e-3


def test_split_heuristic():
    sms = 132
    assert pd.choose_num_splits(128, 8, 2048, sms) == 1     # 1024 programs fill the GPU
    assert pd.choose_num_splits(1, 8, 2048, sms) == 64      # four per SM (66), capped
    assert pd.choose_num_splits(4, 8, 2048, sms) == 16      # 512 programs, rounded down
    assert pd.choose_num_splits(16, 8, 2048, sms) == 4
    assert pd.choose_num_splits(1, 8, 128, sms) == 33       # two per SM beats 4-tile ranges
    assert pd.choose_num_splits(1, 8, 16, sms) == 8         # at least two tiles per range
    assert pd.choose_num_splits(1, 8, 2048, sms, programs_per_sm=2) == 33
    assert pd.choose_num_splits(4, 8, 1, sms) == 1


def test_split_count_follows_head_dim(monkeypatch):
    # The programs per SM the split count assumes: as many as the defaults' K/V rings let
    # fit at D = 256 (two: 3 x 32-key tiles) and D = 64 (four, the register limit); at
    # D = 128 the split config's own two (3 x 32-key tiles; four would fit, and ran slower).
    seen = []
    choose = pd.choose_num_splits
    monkeypatch.setattr(pd, "choose_num_splits",
                        lambda *a, **kw: seen.append(kw["programs_per_sm"]) or choose(*a, **kw))
    for D in (256, 128, 64):
        q, k, v, table, lens = pd.random_inputs(1, 1, 1, D, 64, [64], seed=5)
        pd.paged_decode(q, k, v, table, lens)
    assert seen == [2, 2, 4]
    assert pd.programs_fitting_per_sm(dict(BLOCK_N=64, num_stages=3), 128) == 2
    assert pd.programs_fitting_per_sm(pd.default_config(128, 8, 132), 128) == 4
    # A config of the caller's own drops the default's two: as many as fit (three).
    seen.clear()
    q, k, v, table, lens = pd.random_inputs(1, 1, 1, 128, 64, [64], seed=5)
    pd.paged_decode(q, k, v, table, lens, config=dict(BLOCK_N=64, num_stages=2))
    assert seen == [3]


@pytest.mark.parametrize("head_dim,block_m,programs", [
    (64, 16, 0), (128, 16, 0), (128, 16, 264), (256, 16, 0), (128, 32, 0), (64, 64, 0),
    (256, 64, 0), (128, 128, 264)])
def test_shared_memory_model_covers_the_compiled_split_kernel(head_dim, block_m, programs):
    # The split count assumes programs_fitting_per_sm programs share an SM: the compiled
    # kernel's shared memory (the default config for `programs` on 132 SMs: a split launch,
    # or at D = 128 two programs an SM) must let that many fit, and the model must not be
    # loose by more than its scratch term.
    cfg = pd.default_config(head_dim, programs, 132)
    kernel = tile.compile(pd._paged_decode_split, signature=SIGNATURE, constexprs=dict(
        T=1, GROUP=max(4, block_m), BLOCK_M=block_m, HEAD_DIM=head_dim, BLOCK_SIZE=16,
        BLOCK_N=cfg["BLOCK_N"], NUM_SPLITS=33, USE_PDL=True), target="sm_90a",
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    used = kernel.metadata["shared_bytes"]
    rings = 2 * cfg["num_stages"] * cfg["BLOCK_N"] * head_dim * 2
    assert rings <= used <= rings + pd.split_scratch_bytes(block_m, head_dim)
    fit = pd.programs_fitting_per_sm(cfg, head_dim, block_m)
    assert fit * (used + 1024) <= pd.SHARED_PER_SM
    if block_m == 16:  # one new token, GQA up to 16: the common decode step
        assert kernel.metadata["spill_stores"] == 0
        assert fit == {(64, 0): 4, (128, 0): 4, (128, 264): 3, (256, 0): 2}[head_dim, programs]


def test_grid_does_not_depend_on_seq_lens(monkeypatch):
    grids = []

    class Recorder:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            grids.append(grid)
            return self.kernel[grid]

    monkeypatch.setattr(pd, "_paged_decode_split", Recorder(pd._paged_decode_split))
    monkeypatch.setattr(pd, "_paged_decode_merge", Recorder(pd._paged_decode_merge))
    q, k, v, table, _ = pd.random_inputs(2, 4, 2, 64, 16, [200, 200], seed=4)
    for lens in ([200, 200], [1, 0], [17, 150]):
        pd.paged_decode(q, k, v, table, np.array(lens, np.int32))
    assert len(grids) == 6 and grids[0::2] == [(4, 2)] * 3 and grids[1::2] == [(8,)] * 3


@pytest.mark.parametrize("change, message", [
    (dict(q_shape=(2, 4, 48)), "paged_decode: head dim D = 48 is not supported; allowed: 64, "
                               "128, 256"),
    (dict(block_size=8), "paged_decode: block_size = 8 (k_cache.shape[1]) is not supported; "
                         "allowed: 16, 32, 64, 128"),
    (dict(H=3), "paged_decode: q has H = 3 heads, not a multiple of the cache's H_kv = 2"),
    (dict(table_dtype=np.int64), "paged_decode: block_table must be int32, got int64"),
    (dict(q_dtype=np.float32), "paged_decode: q has dtype float32; allowed: float16, "
                               "bfloat16"),
    (dict(q_shape=(2, 4, 64, 1, 1)), "paged_decode: q must be (batch, H, D) or (batch, T, H, "
                                     "D), got shape (2, 4, 64, 1, 1)"),
    (dict(lens=[200, 500]), "paged_decode: seq_lens has 500 keys but the block table holds "
                            "at most 13 x 16"),
    (dict(num_splits=0), "paged_decode: num_splits must be an int from 1 to 256, got 0"),
    (dict(lens=[200, -3]), "paged_decode: seq_lens must be >= 0, got -3 (sequence 1)"),
])
def test_errors(change, message):
    H = change.get("H", 4)
    bs = change.get("block_size", 16)
    q, k, v, table, lens = pd.random_inputs(2, H - H % 2 or 2, 2, 64, 16, [200, 200])
    if "q_shape" in change:
        q = np.zeros(change["q_shape"], np.float16)
        k = v = np.zeros((4, 16, 2, change["q_shape"][-1]), np.float16)
    if "H" in change:
        q = np.zeros((2, H, 64), np.float16)
    if bs != 16:
        k = v = np.zeros((4, bs, 2, 64), np.float16)
    if "table_dtype" in change:
        table = table.astype(change["table_dtype"])
    if "q_dtype" in change:
        q = q.astype(change["q_dtype"])
    if "lens" in change:
        lens = np.array(change["lens"], np.int32)
    with pytest.raises(ValueError) as e:
        pd.paged_decode(q, k, v, table, lens, num_splits=change.get("num_splits"))
    assert str(e.value) == message


def test_an_empty_batch_gives_an_empty_output():
    q, k, v, table, lens = pd.random_inputs(2, 4, 2, 64, 16, [20, 20])
    o = pd.paged_decode(q[:0], k, v, table[:0], lens[:0])  # numpy: empty arrays' strides are 0
    assert o.shape == (0, 4, 64) and o.dtype == np.float16


SIGNATURE = dict(
    {"Q": "*fp16:16", "K_cache": "*fp16:16", "V_cache": "*fp16:16", "Block_table": "*i32:16",
     "Seq_lens": "*i32:16", "Out": "*fp16:16", "Part_o": "*fp32:16", "Part_lse": "*fp32:16",
     "qk_scale": "fp32", "H_kv": "i32", "max_blocks": "i32"},
    **{name: "i32:16" for name in ("stride_qb", "stride_qt", "stride_qh", "stride_kb",
                                   "stride_ks", "stride_kh", "stride_vb", "stride_vs",
                                   "stride_vh", "stride_tb", "stride_ob", "stride_ot",
                                   "stride_oh")})


def test_merge_by_programmatic_dependent_launch_matches_numpy():
    # pdl=True in the interpreter: the kernels' gdc_launch_dependents / gdc_wait run (as
    # no-ops) and the result is the same.
    q, k, v, table, lens = pd.random_inputs(3, 8, 2, 64, 32, [5, 100, 300], seed=4)
    o = pd.paged_decode(q, k, v, table, lens, num_splits=3, pdl=True)
    ref = pd.reference(q, k, v, table, lens)
    assert float(np.abs(o.astype(np.float64) - ref).max() / np.abs(ref).max()) <= \
        TOLERANCE["float16"]


def test_ptx_with_pdl_releases_the_merge_first_and_waits_before_its_loads():
    split = tile.compile(pd._paged_decode_split, signature=SIGNATURE, constexprs=dict(
        T=1, GROUP=8, BLOCK_M=16, HEAD_DIM=128, BLOCK_SIZE=16, BLOCK_N=64, NUM_SPLITS=4,
        USE_PDL=True), target="sm_90a", num_warps=4, num_stages=3).asm["ptx"]
    body = split[split.index(".entry"):]
    assert body.index("griddepcontrol.launch_dependents;") < body.index("ld.global")
    merge = tile.compile(pd._paged_decode_merge, signature={
        "Part_o": "*fp32:16", "Part_lse": "*fp32:16", "Out": "*fp16:16", "H": "i32",
        "stride_ob": "i32:16", "stride_ot": "i32:16", "stride_oh": "i32:16"},
        constexprs=dict(T=1, HEAD_DIM=128, NUM_SPLITS=33, SPLITS_POW2=64, USE_PDL=True),
        target="sm_90a", num_warps=4).asm["ptx"]
    assert merge.index("griddepcontrol.wait;") < merge.index("ld.global")


def test_ptx_loads_q_and_the_guessed_table_entries_with_seq_len():
    # Before the first branch (the empty range's exit), nothing waits on seq_len: its load,
    # the two table entries the prefetch guesses and Q's rows go out together.
    constexprs = dict(T=1, GROUP=4, BLOCK_M=16, HEAD_DIM=128, BLOCK_SIZE=16, BLOCK_N=32,
                      NUM_SPLITS=33)
    for prefetch, scalar_loads in ((True, 3), (False, 1)):
        ptx = tile.compile(pd._paged_decode_split, signature=SIGNATURE,
                           constexprs=dict(constexprs, TABLE_PREFETCH=prefetch),
                           target="sm_90a", num_warps=4, num_stages=3).asm["ptx"]
        head = ptx[ptx.index(".entry"):]
        head = head[:head.index(" bra")]
        assert len(re.findall(r"\n\s*ld\.global\.b32 ", head)) == scalar_loads
        assert head.count("ld.global.v4.b32") == 2  # Q: 16 rows x 128 halves, 4 warps


def test_ptx_for_sm_90a_pipelines_the_gathered_tiles():
    kernel = tile.compile(pd._paged_decode_split, signature=SIGNATURE, constexprs=dict(
        T=1, GROUP=8, BLOCK_M=16, HEAD_DIM=128, BLOCK_SIZE=16, BLOCK_N=64, NUM_SPLITS=4),
        target="sm_90a", num_warps=4, num_stages=3)
    ptx = kernel.asm["ptx"]
    assert kernel.asm["cubin"]
    # K and V gathered through the block table into 3-deep cp.async rings, both products
    # on the tensor cores (M = 16 rows: the 8 query heads of a KV head, padded).
    assert ptx.count("cp.async.commit_group;") == 3 and "cp.async.wait_group 1;" in ptx
    assert len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[[^]]+\], 16", ptx)) == 48
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "ex2.approx" in ptx
    assert "spill" not in kernel.metadata["jit_log"].replace("0 bytes spill", "")


@pytest.mark.parametrize("defer_row_sum, barriers", [(True, 3), (False, 4)])
def test_batch_one_loop_synchronizes_three_times_a_tile(defer_row_sum, barriers):
    # The default split launch's loop (4 warps, 32-key tiles): the cp.async ring's barrier,
    # the row maximum's across the warps and P's conversion to the PV product's operand,
    # with no barrier before either exchange's writes (claim_scratch: the ring's barrier
    # ordered what came before, and P's bytes lie past the maximum's). The row sums across
    # the warps, when not deferred to the loop's end, cost one more.
    from tools import static_report
    if not static_report.have_sass_tools():
        pytest.skip("needs ptxas and nvdisasm (the nvidia-cuda-nvdisasm wheel)")
    ptx = tile.compile(pd._paged_decode_split, signature=SIGNATURE, constexprs=dict(
        T=1, GROUP=4, BLOCK_M=16, HEAD_DIM=128, BLOCK_SIZE=16, BLOCK_N=32, NUM_SPLITS=33,
        USE_PDL=True, TABLE_PREFETCH=True, DEFER_ROW_SUM=defer_row_sum),
        target="sm_90a", num_warps=4, num_stages=3).asm["ptx"]
    cubin, _ = static_report.whole_program_cubin(ptx, "sm_90a")
    loop = max(static_report.sass_loops(static_report.disassemble(cubin)), key=len)
    assert sum("BAR.SYNC" in line for line in loop) == barriers
    assert sum("HMMA" in line for line in loop) == 16  # both products, 8 mma.sync each


class _FakeCudaTensor:
    """Shape, dtype, strides and device of a CUDA tensor: what the launch plan reads."""

    def __init__(self, shape, dtype):
        self.shape, self.ndim, self.dtype, self.device = tuple(shape), len(shape), dtype, "cuda:0"
        self._strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))

    def stride(self):
        return self._strides


def test_plan_is_cached_per_shape_for_cuda_tensors(monkeypatch):
    monkeypatch.setattr(pd, "_PLANS", {})
    monkeypatch.setitem(pd._DEVICES, "cuda:0", (132, 9))  # SMs, compute capability major
    built = []
    monkeypatch.setattr(pd, "_check", lambda *a: built.append(a) or (4, 1, 32, 128, 16, 8))

    def plan(width, num_splits=None):
        q = _FakeCudaTensor((4, 32, 128), "torch.float16")
        kv = _FakeCudaTensor((4 * width, 16, 8, 128), "torch.float16")
        table = _FakeCudaTensor((4, width), "torch.int32")
        lens = _FakeCudaTensor((4,), "torch.int32")
        return pd._plan(q, kv, kv, table, lens, num_splits, None)

    first = plan(2048)  # 32k keys: 1024 tiles of 32, two programs an SM
    assert plan(2048) is first and len(built) == 1  # checks and heuristic run once per shape
    assert first.num_splits == 8 and first.split_grid == (32, 8)
    assert first.merge_grid == (128,) and first.part_shapes == ((1024, 128), (1024,))
    # A 3-d q is read as T = 1 with token stride 0; the output has q's shape.
    assert first.out_shape == (4, 32, 128) and first.split_args[2:5] == (4096, 0, 128)
    # The table's width: where the split kernel guesses its range's entries to prefetch.
    assert first.split_args[1] == 2048 and first.split_meta["TABLE_PREFETCH"]
    assert plan(64).num_splits == 8 and len(built) == 2  # a narrower table: new plan
    assert plan(2048, num_splits=3).num_splits == 3 and len(built) == 3
    # sm_90+: the merge is launched with programmatic dependent launch, both kernels guarded.
    assert first.pdl and first.merge_meta["launch_pdl"] and first.split_meta["USE_PDL"]
    assert not plan(2048, num_splits=1).pdl  # nothing to merge


def test_config_for_many_programs_fits_four_per_sm():
    # D = 128 with more programs than three per SM (batch 64 x 8 KV heads on 132 SMs) takes
    # 32-key tiles in 2-deep rings, four per SM: one wave instead of 1.3.
    assert pd.default_config(128, 32 * 8, 132) == dict(BLOCK_N=64, num_warps=4, num_stages=2)
    wide = pd.default_config(128, 64 * 8, 132)
    assert wide == dict(BLOCK_N=32, num_warps=4, num_stages=2)
    assert pd.programs_fitting_per_sm(wide, 128) == 4
    assert pd.default_config(64, 64 * 8, 132)["BLOCK_N"] == 64
    q, k, v, table, lens = pd.random_inputs(3, 8, 2, 128, 16, [5, 100, 300], seed=6)
    plan = pd._plan(q, k, v, table, lens, None, None)
    assert plan.split_meta["BLOCK_N"] == 32  # 6 programs on the modeled 132 SMs: a split
    o = pd.paged_decode(q, k, v, table, lens, config=wide)  # the wide config's numerics
    ref = pd.reference(q, k, v, table, lens)
    assert float(np.abs(o.astype(np.float64) - ref).max() / np.abs(ref).max()) <= \
        TOLERANCE["float16"]
