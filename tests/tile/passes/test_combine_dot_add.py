"""combine_dot_add: `acc += tl.dot(a, b)` becomes one dot accumulating into `acc` (as Triton's
combine pass), so the wgmma stays in flight; other uses of the product keep it apart."""

import numpy as np
import pytest

import tile
import tile.language as tl
from shared_codegen.frontend.compile import explicit_layout_module
from shared_codegen.frontend.launch import make_specialization
from shared_codegen.ir.printer import print_module


@tile.jit
def accumulate(a_ptr, b_ptr, c_ptr, p_ptr, K, BM: tl.constexpr, BK: tl.constexpr,
               FORM: tl.constexpr):
    rows = tl.arange(0, BM)
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * BM + rows[None, :]
    acc = tl.zeros((BM, BM), dtype=tl.float32)
    last = tl.zeros((BM, BM), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BK)):
        product = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs))
        if FORM == "add":
            acc += product
        elif FORM == "reversed":
            acc = product + acc
        else:  # the product is used twice: it stays a separate dot
            acc += product
            last = product
        a_ptrs += BK
        b_ptrs += BK * BM
    out = rows[:, None] * BM + rows[None, :]
    tl.store(c_ptr + out, acc)
    tl.store(p_ptr + out, last)


def _ir(form):
    a = np.zeros((64, 128), np.float16)
    b = np.zeros((128, 64), np.float16)
    c = np.zeros((64, 64), np.float32)
    values = accumulate.bind_args((a, b, c, c, 128), dict(BM=64, BK=32, FORM=form))
    spec = make_specialization(accumulate, values, 4, "sm_90a", 3)
    return print_module(explicit_layout_module(accumulate, spec))


@pytest.mark.parametrize("form", ["add", "reversed"])
def test_acc_plus_dot_becomes_an_async_accumulating_wgmma(form):
    ir = _ir(form)
    dots = [line for line in ir.splitlines() if "ttng.warp_group_dot " in line]
    assert len(dots) == 1 and "{is_async = True}" in dots[0]
    assert "arith.addf" not in ir


def test_a_product_used_twice_is_not_folded():
    ir = _ir("twice")
    assert "arith.addf" in ir and "{is_async = False}" in ir


@pytest.mark.parametrize("form", ["add", "reversed", "twice"])
def test_folded_and_unfolded_forms_compute_the_product(form, monkeypatch):
    monkeypatch.setenv("SC_TARGET", "sm_90a")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 96)).astype(np.float16)
    b = rng.standard_normal((96, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    p = np.zeros((64, 64), np.float32)
    accumulate[(1,)](a, b, c, p, 96, BM=64, BK=32, FORM=form)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    if form == "twice":
        np.testing.assert_allclose(p, a[:, 64:].astype(np.float64) @ b[64:].astype(np.float64),
                                   rtol=1e-5, atol=1e-4)
