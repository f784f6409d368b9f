"""The examples and core ops on the GPU, against torch. Skipped without a GPU."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_vector_add_on_gpu(torch):
    from vector_add import add

    for n in (1, 1000, 98432, 1 << 20):
        x = torch.randn(n, device="cuda")
        y = torch.randn(n, device="cuda")
        torch.testing.assert_close(add(x, y), x + y, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape", [(1, 1), (37, 781), (128, 1024), (64, 8192)])
def test_softmax_on_gpu(torch, dtype, shape):
    from softmax import softmax

    x = torch.randn(*shape, device="cuda", dtype=getattr(torch, dtype))
    ref = torch.softmax(x.float(), dim=1)
    torch.testing.assert_close(softmax(x).float(), ref, atol=2e-3 if dtype != "float32" else 1e-5,
                               rtol=1e-2 if dtype != "float32" else 1e-4)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_layer_norm_on_gpu(torch, dtype):
    from layer_norm import layer_norm

    x = torch.randn(64, 3000, device="cuda", dtype=getattr(torch, dtype))
    w = torch.randn(3000, device="cuda", dtype=x.dtype)
    b = torch.randn(3000, device="cuda", dtype=x.dtype)
    y, mean, rstd = layer_norm(x, w, b, block_size=1024)
    ref = torch.nn.functional.layer_norm(x.float(), (3000,), w.float(), b.float())
    tol = 3e-2 if dtype == "float16" else 1e-4
    torch.testing.assert_close(y.float(), ref, atol=tol, rtol=tol)
    torch.testing.assert_close(mean, x.float().mean(dim=1), atol=1e-3, rtol=1e-3)


def test_examples_main_on_gpu(torch):
    import layer_norm
    import softmax
    import vector_add

    assert vector_add.main(gpu=True) == 0.0
    assert softmax.main(gpu=True) < 2e-3
    assert layer_norm.main(gpu=True) < 2e-2


def test_autotune_times_configs_on_gpu_and_caches_per_key(torch):
    import tile
    import tile.language as tl

    @tile.autotune(configs=[tile.Config({"BLOCK": 128}, num_warps=1),
                            tile.Config({"BLOCK": 1024}, num_warps=4)], key=["n"])
    @tile.jit
    def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)

    for n in (1000, 1 << 20):
        x = torch.randn(n, device="cuda")
        out = torch.empty_like(x)
        scale[lambda meta: (tile.cdiv(n, meta["BLOCK"]),)](x, out, n)
        torch.testing.assert_close(out, x * 2)
    assert len(scale.cache) == 2
    assert all(len(times) == 2 for times in scale.bench_results.values())


def test_launch_on_a_named_stream_and_callable_grid(torch):
    from vector_add import add_kernel

    n = 4096
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        add_kernel[lambda meta: (n // meta["BLOCK_SIZE"],)](x, y, out, n, BLOCK_SIZE=256)
    s.synchronize()
    torch.testing.assert_close(out, x + y)


def test_converted_examples_match_the_originals_on_gpu(torch, load_source):
    import softmax
    import vector_add
    from tile.convert import to_gluon

    n = 1 << 20
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    a, b = torch.empty_like(x), torch.empty_like(x)
    vector_add.add_kernel[(n // 1024,)](x, y, a, n, BLOCK_SIZE=1024)
    conv = load_source("conv_add", to_gluon(vector_add.add_kernel, x, y, a, n,
                                                     BLOCK_SIZE=1024))
    conv.add_kernel[(n // 1024,)](x, y, b, n)
    torch.testing.assert_close(a, b, rtol=0, atol=0)

    s = torch.randn(512, 8192, device="cuda", dtype=torch.float16)
    o1, o2 = torch.empty_like(s), torch.empty_like(s)
    softmax.softmax_kernel[(512,)](o1, s, 8192, 8192, 8192, BLOCK_SIZE=8192, num_warps=16)
    conv = load_source("conv_softmax", to_gluon(
        softmax.softmax_kernel, o1, s, 8192, 8192, 8192, BLOCK_SIZE=8192, num_warps=16))
    conv.softmax_kernel[(512,)](o2, s, 8192, 8192, 8192, num_warps=16)
    torch.testing.assert_close(o1, o2, rtol=0, atol=0)

    import layer_norm

    xs = torch.randn(64, 3000, device="cuda", dtype=torch.float16)
    w = torch.randn(3000, device="cuda", dtype=torch.float16)
    bias = torch.randn(3000, device="cuda", dtype=torch.float16)
    outs = [(torch.empty_like(xs), torch.empty(64, device="cuda"), torch.empty(64, device="cuda"))
            for _ in range(2)]
    args = lambda o: (xs, o[0], w, bias, o[1], o[2], 3000, 3000, 1e-5)  # noqa: E731
    layer_norm.layer_norm_fwd_kernel[(64,)](*args(outs[0]), BLOCK_SIZE=1024, num_warps=4)
    conv = load_source("conv_ln", to_gluon(layer_norm.layer_norm_fwd_kernel,
                                                    *args(outs[0]), BLOCK_SIZE=1024))
    conv.layer_norm_fwd_kernel[(64,)](*args(outs[1]), num_warps=4)
    for p, q in zip(*outs):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
