"""Block pointers (`tl.make_block_ptr`, `tl.advance`, `boundary_check`, `padding_option`)
against numpy in the interpreter, their compiled form, and their errors."""

import numpy as np
import pytest

import tile
import tile.language as tl


@tile.jit
def block_copy(x, y, M, N, sxm, sxn, sym, BM: tl.constexpr, BN: tl.constexpr,
               CHECK: tl.constexpr, PAD: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    src = tl.make_block_ptr(x, shape=(M, N), strides=(sxm, sxn), offsets=(m, n),
                            block_shape=(BM, BN), order=(1, 0))
    dst = tl.make_block_ptr(y, shape=(M + 1, N + 1), strides=(sym, 1), offsets=(m, n),
                            block_shape=(BM, BN), order=(1, 0))
    tl.store(dst, tl.load(src, boundary_check=CHECK, padding_option=PAD) * 2,
             boundary_check=(0, 1))


def padded_reference(x, rows, cols, fill):
    """x * 2 laid into a [rows, cols] array whose cells beyond x hold `fill`."""
    out = np.full((rows, cols), fill, np.float32)
    out[:x.shape[0], :x.shape[1]] = x * 2
    return out


@pytest.mark.parametrize("pad,fill", [("zero", 0.0), ("nan", np.nan), ("", 0.0)])
def test_ragged_edges_read_the_padding(pad, fill):
    x = np.random.default_rng(0).standard_normal((10, 13)).astype(np.float32)
    # y is one row and one column larger than x: the blocks past x's edge store padding there.
    y = np.full((11, 14), -1.0, np.float32)
    block_copy[(3, 4)](x, y, 10, 13, 13, 1, 14, BM=4, BN=4, CHECK=(0, 1), PAD=pad)
    np.testing.assert_array_equal(y[:11, :14], padded_reference(x, 11, 14, fill))


def test_strided_source_and_one_checked_dim():
    base = np.random.default_rng(1).standard_normal((16, 24)).astype(np.float32)
    x = base[:, ::3]  # 16 x 8, column stride 3
    y = np.full((17, 9), -1.0, np.float32)
    # Only rows are checked; the 8 columns fill whole blocks, so no column check is needed.
    # The store clips to y's block pointer shape (13, 9): rows 13.. keep their -1.
    block_copy[(2, 2)](base, y, 12, 8, 24, 3, 9, BM=8, BN=4, CHECK=(0,), PAD="zero")
    expected = np.full((17, 9), -1.0, np.float32)
    expected[:13, :8] = padded_reference(x[:12], 13, 8, 0.0)
    np.testing.assert_array_equal(y, expected)


@tile.jit
def row_sums(x, out, M, K, BM: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    ptr = tl.make_block_ptr(x, shape=(M, K), strides=(K, 1), offsets=(pid * BM, 0),
                            block_shape=(BM, BK), order=(1, 0))
    acc = tl.zeros([BM], tl.float32)
    for _ in range(0, K, BK):
        acc += tl.sum(tl.load(ptr, boundary_check=(0, 1)), axis=1)
        ptr = tl.advance(ptr, (0, BK))
    ends = tl.make_block_ptr(out, shape=(M,), strides=(1,), offsets=(pid * BM,),
                             block_shape=(BM,), order=(0,))
    tl.store(ends, acc, boundary_check=(0,))


def test_advance_in_a_loop_carries_the_block_pointer():
    x = np.random.default_rng(2).random((37, 50)).astype(np.float32)
    out = np.zeros(37, np.float32)
    row_sums[(3,)](x, out, 37, 50, BM=16, BK=16)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_block_pointer_kernels_compile(target):
    k = tile.compile(row_sums, signature={"x": "*fp32", "out": "*fp32", "M": "i32", "K": "i32"},
                     constexprs={"BM": 64, "BK": 64}, target=target)
    assert "ld.global" in k.asm["ptx"] and k.asm["cubin"]


@tile.jit
def bad_block_pointer(x, CASE: tl.constexpr):
    p = tl.make_block_ptr(x, shape=(8, 8), strides=(8, 1), offsets=(0, 0), block_shape=(8, 8),
                          order=(1, 0))
    if CASE == "mask":
        tl.load(p, mask=tl.arange(0, 8) < 4)
    elif CASE == "dim":
        tl.load(p, boundary_check=(2,))
    elif CASE == "order":
        tl.make_block_ptr(x, shape=(8, 8), strides=(8, 1), offsets=(0, 0), block_shape=(8, 8),
                          order=(1, 1))
    elif CASE == "block":
        tl.make_block_ptr(x, shape=(8,), strides=(1,), offsets=(0,), block_shape=(6,),
                          order=(0,))
    elif CASE == "rank":
        tl.advance(p, (1,))
    elif CASE == "int_nan":
        q = tl.make_block_ptr(x.to(tl.pointer_type(tl.int32)), shape=(8,), strides=(1,),
                              offsets=(0,), block_shape=(8,), order=(0,))
        tl.load(q, boundary_check=(0,), padding_option="nan")
    elif CASE == "shape":
        tl.store(p, tl.zeros([4, 8], tl.float32))
    else:
        tl.load(x, boundary_check=(0,))


@pytest.mark.parametrize("case,message", [
    ("mask", "tl.load: `mask` and `other` cannot be given when loading through a block "
             "pointer; use `boundary_check` and `padding_option`"),
    ("dim", "tl.load: `boundary_check` entries must be dims in [0, 2), got 2"),
    ("order", "tl.make_block_ptr: `order` must be a permutation of [0, 1], got [1, 1]"),
    ("block", "tl.make_block_ptr: `block_shape[0]` must be a power of 2, got 6"),
    ("rank", "tl.advance: `offsets` must have 2 entries (the block pointer's rank), got (1,)"),
    ("int_nan", "tl.load: `padding_option`='nan' needs a floating-point tensor, got i32"),
    ("shape", "tl.store: the value's shape [4, 8] must match the block shape [8, 8]"),
    ("plain", "tl.load: `boundary_check` applies only to block pointers (tl.make_block_ptr): "
              "the compiler does not know the bounds of a tensor of pointers; use `mask` and "
              "`other` instead"),
])
def test_block_pointer_errors(case, message):
    with pytest.raises(tile.CompilationError) as e:
        bad_block_pointer[(1,)](np.zeros(64, np.float32), CASE=case)
    assert e.value.message == message
