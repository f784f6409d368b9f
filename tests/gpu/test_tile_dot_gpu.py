"""`tl.dot` on the GPU: a masked, K-looped matmul in the tile DSL against torch for every input
type and precision, and against the CPU interpreter for the same matrices (which run the
same post-pass IR). Run on an H100: `python3 -m pytest tests/gpu/test_tile_dot_gpu.py`."""

import numpy as np
import pytest

import tile as triton
import tile.language as tl

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, PRECISION: tl.constexpr, OUT_DTYPE: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=OUT_DTYPE)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BLOCK_K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=OUT_DTYPE)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


CASES = [
    # dtype, precision, out, block (M, N, K), num_warps, tolerance relative to max |C|
    ("float16", None, "float32", (128, 128, 64), 4, 1e-5),
    ("float16", None, "float32", (128, 256, 64), 8, 1e-5),
    ("float16", None, "float16", (64, 64, 32), 4, 2e-3),
    ("bfloat16", None, "float32", (128, 128, 64), 4, 1e-5),
    # fp8 wgmma adds its products in fewer bits than fp32 (max_num_imprecise_acc).
    ("float8_e4m3fn", None, "float32", (128, 128, 64), 4, 1e-3),
    ("float8_e5m2", None, "float32", (64, 128, 64), 4, 1e-3),
    ("float32", "tf32", "float32", (64, 64, 32), 4, 5e-3),
    ("float32", "tf32x3", "float32", (64, 64, 32), 4, 1e-5),
    ("float32", "ieee", "float32", (32, 32, 16), 4, 1e-5),
    ("int8", None, "int32", (64, 64, 64), 4, 0),
    ("float16", None, "float32", (32, 32, 16), 4, 1e-5),   # mma.sync
    ("float16", None, "float32", (16, 16, 16), 2, 1e-5),   # FMA
]
TL_OUT = {"float32": tl.float32, "float16": tl.float16, "int32": tl.int32}


def _inputs(torch, dtype, m, n, k):
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    if dtype == "int8":
        a = torch.randint(-128, 128, (m, k), device="cuda", generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (k, n), device="cuda", generator=gen, dtype=torch.int8)
        return a, b
    a = torch.randn((m, k), device="cuda", generator=gen).to(getattr(torch, dtype))
    b = torch.randn((k, n), device="cuda", generator=gen).to(getattr(torch, dtype))
    return a, b


def _strides(x):
    if isinstance(x, np.ndarray):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(x.stride())


def _launch(c, a, b, block, precision, out, num_warps):
    m, k = a.shape
    n = b.shape[1]
    grid = (-(-m // block[0]), -(-n // block[1]))
    matmul_kernel[grid](a, b, c, m, n, k, *_strides(a), *_strides(b), *_strides(c),
                        BLOCK_M=block[0], BLOCK_N=block[1],
                        BLOCK_K=block[2], PRECISION=precision, OUT_DTYPE=TL_OUT[out],
                        num_warps=num_warps)


@pytest.mark.parametrize("dtype,precision,out,block,num_warps,tol", CASES)
def test_tile_dot_matches_torch_and_the_interpreter(torch, dtype, precision, out, block,
                                                    num_warps, tol):
    m, n, k = 200, 136, 96  # partial tiles on every side, several K steps
    a, b = _inputs(torch, dtype, m, n, k)
    c = torch.full((m, n), -7, device="cuda", dtype=getattr(torch, out))
    _launch(c, a, b, block, precision, out, num_warps)
    if dtype == "int8":
        ref = a.cpu().to(torch.int64) @ b.cpu().to(torch.int64)  # no int64 matmul on CUDA
        assert torch.equal(c.cpu().to(torch.int64), ref)
    else:
        ref = a.double() @ b.double()
        err = float((c.double() - ref).abs().max() / ref.abs().max())
        assert err <= max(tol, 1e-6), err
    # The interpreter runs the same IR on the same matrices.
    host = c.cpu().numpy()
    a_h = a.cpu().view(torch.uint8 if a.element_size() == 1 else a.dtype)
    b_h = b.cpu().view(torch.uint8 if b.element_size() == 1 else b.dtype)
    if dtype.startswith("float8"):
        import ml_dtypes
        np_dt = ml_dtypes.float8_e4m3fn if "e4m3" in dtype else ml_dtypes.float8_e5m2
        a_np, b_np = a_h.numpy().view(np_dt), b_h.numpy().view(np_dt)
    elif dtype == "bfloat16":
        import ml_dtypes
        a_np = a.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        b_np = b.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    else:
        a_np, b_np = a.cpu().numpy(), b.cpu().numpy()
    c_np = np.full((m, n), -7, host.dtype)
    _launch(c_np, a_np, b_np, block, precision, out, num_warps)
    if dtype == "int8":
        np.testing.assert_array_equal(c_np, host)
    else:
        scale = float(np.abs(host.astype(np.float64)).max())
        diff = float(np.abs(c_np.astype(np.float64) - host.astype(np.float64)).max()) / scale
        assert diff <= max(tol, 1e-5), diff


def _load_tutorial():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks",
                        "tutorial03_matmul.py")
    os.environ.pop("MATMUL_FRONTEND", None)
    spec = importlib.util.spec_from_file_location("tutorial03_tile_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", ["float16", "float8_e4m3fn"])
@pytest.mark.parametrize("num_stages", [1, 2, 3, 4])
def test_tutorial_03_matmul_for_every_pipelining_depth(torch, dtype, num_stages):
    """The tutorial kernel (benchmarks/tutorial03_matmul.py) against torch, with partial tiles
    (M, N not multiples of the block) and num_stages 1 (no pipelining) to 4."""
    tut = _load_tutorial()
    m, n, k = 1000, 776, 1024
    gen = torch.Generator(device="cuda").manual_seed(num_stages)
    a = torch.randn((m, k), device="cuda", generator=gen).to(getattr(torch, dtype))
    b = torch.randn((k, n), device="cuda", generator=gen).to(getattr(torch, dtype))
    if dtype != "float16":
        b = b.T.contiguous().T  # K-major, as the tutorial passes fp8 B
    bk = 64 if dtype == "float16" else 128
    config = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                  num_stages=num_stages, num_warps=8 if num_stages < 4 else 4)
    c = tut.matmul(a, b, config)
    ref = a.float() @ b.float()
    err = float((c.float() - ref).abs().max() / ref.abs().max())
    assert err < (2e-3 if dtype == "float16" else 5e-3), err


def test_attention_and_transposed_weights_match_torch(torch):
    import sys
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tile", "passes"))
    from test_pipelining import attention_kernel, linear_kernel

    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((1024, 64), device="cuda", generator=gen, dtype=torch.float16)
               for _ in range(3))
    out = torch.empty_like(q)
    attention_kernel[(1024 // 64,)](q, k, v, out, 1024, D=64, BM=64, BN=64)
    ref = torch.softmax(q.float() @ k.float().T, dim=1) @ v.float()
    assert float((out.float() - ref).abs().max()) < 1e-2
    x = torch.randn((256, 512), device="cuda", generator=gen, dtype=torch.float16)
    w = torch.randn((192, 512), device="cuda", generator=gen, dtype=torch.float16)
    y = torch.empty((256, 192), device="cuda", dtype=torch.float32)
    linear_kernel[(4, 3)](x, w, y, 256, 192, 512, BM=64, BN=64, BK=32)
    ref = x.float() @ w.float().T
    assert float((y - ref).abs().max() / ref.abs().max()) < 1e-5
