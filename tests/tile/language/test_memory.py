"""Loads, stores and atomics in the CPU interpreter: masks and `other`, broadcasting of values
and masks, scalar pointers, booleans, and atomics from many programs on one address."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import FLOATS, NP, assert_close, f64, rand


@tile.jit
def copy_masked(x_ptr, out_ptr, n, OTHER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=OTHER)
    tl.store(out_ptr + offs, x, mask=offs < n + 2)


@pytest.mark.parametrize("dtype", FLOATS + ["int8", "int32", "uint8"])
def test_masked_load_fills_other_and_masked_store_skips(dtype):
    n = 21
    x = rand(n + 4, dtype, 1)
    out = np.full(n + 4, 7, NP[dtype])
    copy_masked[(3,)](x, out, n, OTHER=3, BLOCK=8)
    expected = np.concatenate([f64(x[:n]), [3, 3], [7, 7]])
    assert_close(out, expected, dtype)


@tile.jit
def tile_2d(x_ptr, out_ptr, M, N, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ptrs = x_ptr + rows[:, None] * stride + cols[None, :]
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(ptrs, mask=mask, other=0.0)
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], x * 2, mask=mask)


@pytest.mark.parametrize("dtype", FLOATS)
def test_2d_tiles_with_broadcast_offsets_and_masks(dtype):
    M, N = 10, 13
    x = rand((M, 16), dtype, 2)
    out = np.zeros((M, N), NP[dtype])
    tile_2d[(tile.cdiv(M, 8), tile.cdiv(N, 8))](x, out, M, N, 16, BM=8, BN=8)
    assert_close(out, f64(x[:, :N]) * 2, dtype)


@tile.jit
def scalar_and_broadcast_store(x_ptr, out_ptr, row_mask_ptr, BLOCK: tl.constexpr):
    s = tl.load(x_ptr)                         # a scalar pointer loads a scalar
    tl.store(out_ptr + tl.arange(0, BLOCK), s)  # a scalar value broadcasts to the pointers
    cols = tl.arange(0, BLOCK)
    keep = tl.load(row_mask_ptr + cols)        # a boolean array
    ptrs = out_ptr + BLOCK + tl.arange(0, 2)[:, None] * BLOCK + cols[None, :]
    tl.store(ptrs, cols[None, :] + 0.5, mask=keep[None, :])  # value and mask broadcast
    tl.store(out_ptr + 3 * BLOCK - 1 - 0, s + 1)  # ptr + int - int, scalar store


def test_scalar_pointers_booleans_and_broadcast_stores():
    B = 8
    x = np.array([4.0], np.float32)
    keep = rand(B, "int1", 3)
    out = np.zeros(3 * B, np.float32)
    scalar_and_broadcast_store[(1,)](x, out, keep, BLOCK=B)
    expected = np.zeros(3 * B)
    expected[:B] = 4.0
    for r in range(2):
        expected[B + r * B:B + (r + 1) * B] = np.where(keep, np.arange(B) + 0.5, 0)
    expected[3 * B - 1] = 5.0
    np.testing.assert_array_equal(out, expected)


@tile.jit
def bool_roundtrip(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    b = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, b ^ (offs % 2 == 0))


def test_bool_load_store():
    x = rand(16, "int1", 4)
    out = np.zeros(16, np.bool_)
    bool_roundtrip[(1,)](x, out, N=16)
    np.testing.assert_array_equal(out, x ^ (np.arange(16) % 2 == 0))


@tile.jit
def load_options(x_ptr, out_ptr, CACHE: tl.constexpr, EVICT: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs, cache_modifier=CACHE, eviction_policy=EVICT, volatile=True)
    tl.store(out_ptr + offs, x, cache_modifier=".wb" if CACHE == "" else "")


@pytest.mark.parametrize("cache,evict", [("", ""), (".ca", "evict_last"), (".cg", "evict_first")])
def test_cache_and_eviction_options_are_accepted(cache, evict):
    x = rand(8, "float32", 5)
    out = np.zeros(8, np.float32)
    load_options[(1,)](x, out, CACHE=cache, EVICT=evict, N=8)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("cache,evict,message", [
    (".xx", "", "tl.load: `cache_modifier` must be one of '.ca', '.cg', '.cv', got '.xx'"),
    ("", "evict_sometimes", "tl.load: `eviction_policy` must be one of 'evict_last', "
                            "'evict_first', got 'evict_sometimes'"),
])
def test_bad_load_options(cache, evict, message):
    x = rand(8, "float32", 5)
    with pytest.raises(tile.CompilationError) as e:
        load_options[(1,)](x, x, CACHE=cache, EVICT=evict, N=8)
    assert e.value.message == message


@tile.jit
def bad_memory(x_ptr, CASE: tl.constexpr):
    offs = tl.arange(0, 8)
    if CASE == "other_without_mask":
        tl.load(x_ptr + offs, other=0.0)
    elif CASE == "not_a_pointer":
        tl.load(offs)
    elif CASE == "int_mask":
        tl.load(x_ptr + offs, mask=offs)
    elif CASE == "value_too_big":
        tl.store(x_ptr, offs)
    elif CASE == "boundary_check":
        tl.load(x_ptr + offs, boundary_check=(0,))
    elif CASE == "atomic_fp16_max":
        tl.atomic_max(x_ptr.to(tl.pointer_type(tl.float16)) + offs, 1.0)
    elif CASE == "atomic_int8":
        tl.atomic_add(x_ptr.to(tl.pointer_type(tl.int8)) + offs, 1)
    else:
        tl.atomic_add(x_ptr + offs, 1.0, sem="sometimes")


@pytest.mark.parametrize("case,message", [
    ("other_without_mask", "tl.load: `other` cannot be given without `mask`"),
    ("not_a_pointer", "tl.load: `pointer` must be a pointer or a tensor of pointers, got "
                      "tensor<8xi32>"),
    ("int_mask", "tl.load: `mask` must be a boolean (int1) tensor, got tensor<8xi32>"),
    ("value_too_big", "tl.store: `value` of shape [8] does not fit `pointer` of shape []"),
    ("boundary_check", "tl.load: `boundary_check` applies only to block pointers "
                       "(tl.make_block_ptr): the compiler does not know the bounds of a tensor "
                       "of pointers; use `mask` and `other` instead"),
    ("atomic_fp16_max", "tl.atomic_max does not support fp16"),
    ("atomic_int8", "tl.atomic_add does not support i8"),
    ("bad_sem", "tl.atomic_add: `sem` must be one of 'acquire', 'release', 'acq_rel', "
                "'relaxed', got 'sometimes'"),
])
def test_memory_errors(case, message):
    x = np.zeros(8, np.float32)
    with pytest.raises(tile.CompilationError) as e:
        bad_memory[(1,)](x, CASE=case)
    assert e.value.message == message


# ---- atomics ---------------------------------------------------------------------------------

@tile.jit
def atomic_kernel(ptr, val_ptr, old_ptr, OP: tl.constexpr, N: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, N)
    v = tl.load(val_ptr + pid * N + offs)
    target = ptr + offs % 2          # every program hits the same two addresses
    m = offs < N - 1                 # the last lane is masked off
    if OP == "add":
        old = tl.atomic_add(target, v, mask=m)
    elif OP == "max":
        old = tl.atomic_max(target, v, mask=m)
    elif OP == "min":
        old = tl.atomic_min(target, v, mask=m)
    elif OP == "and":
        old = tl.atomic_and(target, v, mask=m)
    elif OP == "or":
        old = tl.atomic_or(target, v, mask=m)
    elif OP == "xor":
        old = tl.atomic_xor(target, v, mask=m, sem="relaxed", scope="gpu")
    else:
        old = tl.atomic_xchg(target, v, mask=m, sem="acquire", scope="cta")
    tl.store(old_ptr + pid * N + offs, old, mask=m)


REDUCE = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}


@pytest.mark.parametrize("op,dtype", [
    ("add", "int32"), ("add", "float32"), ("add", "uint32"), ("add", "int64"),
    ("max", "int32"), ("max", "uint32"), ("max", "float32"), ("max", "float64"),
    ("min", "int32"), ("min", "uint32"), ("min", "float32"), ("min", "int64"),
    ("and", "int32"), ("or", "uint32"), ("xor", "int64"), ("xchg", "float32"),
])
def test_atomics_from_many_programs(op, dtype):
    programs, N = 6, 8
    vals = rand(programs * N, dtype, 6, 0 if dtype.startswith("u") else -4, 4)
    if dtype in ("float32", "float64") and op != "xchg":
        vals = np.round(vals).astype(NP[dtype])  # exact sums whatever the order
    init = rand(2, dtype, 7, 0 if dtype.startswith("u") else -4, 4)
    mem = init.copy()
    old = np.zeros(programs * N, NP[dtype])
    atomic_kernel[(programs,)](mem, vals, old, OP=op, N=N)
    v = vals.reshape(programs, N)
    # The interpreter runs programs in order and lanes in order: a serialization.
    expected = init.copy()
    expected_old = np.zeros((programs, N), NP[dtype])
    for p in range(programs):
        for lane in range(N - 1):
            a = lane % 2
            expected_old[p, lane] = expected[a]
            expected[a] = v[p, lane] if op == "xchg" else REDUCE[op](expected[a], v[p, lane])
    assert_close(mem, expected, dtype if dtype in FLOATS else "int64")
    old = old.reshape(programs, N)[:, :-1]
    if op in ("max", "min") and dtype.startswith("float"):
        # Float max/min is two atomics (non-negative lanes, then negative ones), so the old
        # values follow that serialization: check each is a value its address held.
        for a in (0, 1):
            seen = set(v[:, a:N - 1:2].ravel().tolist()) | {init[a].item()}
            assert set(old[:, a::2].ravel().tolist()) <= seen
        return
    assert_close(old, expected_old[:, :-1], dtype if dtype in FLOATS else "int64")


def test_float_atomic_max_min_handle_signs_and_zero():
    # Triton's trick reads float bits as ints; cover every sign combination.
    mem_max = np.array([-5.0, -5.0, 2.0, 2.0], np.float32)
    mem_min = mem_max.copy()
    vals = np.array([-1.0, -7.0, 3.0, -0.0, -3.0, 9.0, 0.5, 1.0], np.float32)
    old = np.zeros(8, np.float32)
    tgt = np.array([0, 1, 2, 3, 0, 1, 2, 3])

    @tile.jit
    def k(ptr, val_ptr, old_ptr, OP: tl.constexpr):
        offs = tl.arange(0, 8)
        v = tl.load(val_ptr + offs)
        if OP == "max":
            tl.store(old_ptr + offs, tl.atomic_max(ptr + offs % 4, v))
        else:
            tl.store(old_ptr + offs, tl.atomic_min(ptr + offs % 4, v))

    k[(1,)](mem_max, vals, old, OP="max")
    k[(1,)](mem_min, vals, old, OP="min")
    exp_max = np.array([-5.0, -5.0, 2.0, 2.0], np.float32)
    exp_min = exp_max.copy()
    for i, t in enumerate(tgt):
        exp_max[t] = max(exp_max[t], vals[i])
        exp_min[t] = min(exp_min[t], vals[i])
    np.testing.assert_array_equal(mem_max, exp_max)
    np.testing.assert_array_equal(mem_min, exp_min)


@tile.jit
def cas_counter(lock_ptr, counter_ptr, ticket_ptr):
    # Each program takes the next ticket with a CAS loop: a classic lock-free counter.
    pid = tl.program_id(0)
    done = 0
    while done == 0:
        cur = tl.load(counter_ptr, volatile=True)
        old = tl.atomic_cas(counter_ptr, cur, cur + 1)
        if old == cur:
            tl.store(ticket_ptr + pid, cur)
            done = 1
    tl.atomic_xchg(lock_ptr, pid)


def test_atomic_cas_counter():
    programs = 5
    lock, counter = np.zeros(1, np.int32), np.zeros(1, np.int32)
    tickets = np.full(programs, -1, np.int32)
    cas_counter[(programs,)](lock, counter, tickets)
    assert counter[0] == programs
    assert sorted(tickets) == list(range(programs))
    assert lock[0] == programs - 1
