"""tile/passes/pipelining.py with loads that only form addresses (a paged KV cache's block
table): they are issued num_stages iterations ahead, one more than the ringed tiles whose
addresses they form, masked off past the loop's end, and the interpreter's results do not
change; a loop that writes global memory keeps them in place and is not pipelined."""

import numpy as np
import pytest

import tile as triton
import tile.language as tl


@triton.jit
def gathered_mm_kernel(a_ptr, b_ptr, table_ptr, c_ptr, n_tiles, SCALAR_INDEX: tl.constexpr,
                       STORE_IN_LOOP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    """C = sum over t of A[:, t-th K block] @ B[table[t]-th K block]: B's rows gathered."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for t in range(0, n_tiles):
        if SCALAR_INDEX:
            rows = tl.load(table_ptr + t) * BK + rk
        else:  # one table entry per row, as a paged cache with blocks smaller than BK
            rows = tl.load(table_ptr + t * BK + rk)
        a = tl.load(a_ptr + rm[:, None] * (BK * 8) + t * BK + rk[None, :])
        b = tl.load(b_ptr + rows[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
        if STORE_IN_LOOP:
            tl.store(table_ptr + t, t)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "table_ptr": "*i32:16", "c_ptr": "*fp32:16",
       "n_tiles": "i32"}


def _ptx(target, scalar, store=False):
    consts = dict(SCALAR_INDEX=scalar, STORE_IN_LOOP=store, BM=64, BN=64, BK=32)
    return triton.compile(gathered_mm_kernel, signature=SIG, constexprs=consts, target=target,
                          num_stages=3).asm["ptx"]


@pytest.mark.parametrize("target,scalar", [("sm_90a", True), ("sm_80", False)])
def test_index_loads_are_issued_ahead(target, scalar):
    ptx = _ptx(target, scalar)
    assert "cp.async.wait_group 1;" in ptx
    assert ptx.count("cp.async.commit_group;") == 3  # two in the prologue, one per iteration


def _body(ir):
    start = ir.index("scf.for")
    return ir[:start], ir[start:ir.index("scf.yield", start)]


@pytest.mark.parametrize("num_stages", [2, 3])
def test_index_loads_run_one_iteration_ahead_of_the_copies(num_stages):
    # The body's copies read the entry loaded an iteration earlier (the `index_ahead`
    # iter_arg) and the body loads the next one after its copies, so no copy waits on a
    # global load's latency; the prologue loads num_stages entries (num_stages - 1 for its
    # copies, one for the loop's first).
    consts = dict(SCALAR_INDEX=True, STORE_IN_LOOP=False, BM=64, BN=64, BK=32)
    ir = triton.compile(gathered_mm_kernel, signature=SIG, constexprs=consts, target="sm_90a",
                        num_stages=num_stages).asm["ttgir"]
    prologue, body = _body(ir)
    assert "%index_ahead: i32" in body
    assert body.count("tt.load") == 1
    assert body.index("ttg.async_commit_group") < body.index("tt.load")
    assert "arith.muli %index_ahead" in body  # the copies' addresses use the carried entry
    assert prologue.count("tt.load") == num_stages


def test_a_loop_that_stores_is_not_pipelined():
    assert "cp.async" not in _ptx("sm_90a", True, store=True)


@pytest.mark.parametrize("scalar", [True, False])
@pytest.mark.parametrize("num_stages", [1, 2, 3])
def test_interpreter_matches_numpy(scalar, num_stages, monkeypatch):
    monkeypatch.setenv("SC_TARGET", "sm_80")
    rng = np.random.default_rng(1)
    n_tiles, bk = 5, 32
    a = rng.standard_normal((64, 8 * bk)).astype(np.float16)
    b = rng.standard_normal((8 * bk, 64)).astype(np.float16)
    blocks = rng.permutation(8)[:n_tiles].astype(np.int32)
    if scalar:
        table, rows = blocks, (blocks[:, None] * bk + np.arange(bk)).ravel()
    else:
        rows = rng.permutation(8 * bk)[:n_tiles * bk].astype(np.int32)
        table = rows
    c = np.zeros((64, 64), np.float32)
    gathered_mm_kernel[(1,)](a, b, table.copy(), c, n_tiles, SCALAR_INDEX=scalar,
                             STORE_IN_LOOP=False, BM=64, BN=64, BK=bk, num_stages=num_stages)
    want = a[:, :n_tiles * bk].astype(np.float64) @ b[rows].astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
