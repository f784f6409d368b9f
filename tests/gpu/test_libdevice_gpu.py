"""libdevice functions on the GPU against numpy, and fp64 transcendentals. Skipped without a
GPU. Run: `python3 -m pytest tests/gpu/test_libdevice_gpu.py` on the H100."""

import math

import numpy as np
import pytest

import tile
import tile.language as tl
from tile.language.extra import libdevice

pytestmark = pytest.mark.gpu
N = 1024


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@tile.jit
def unary_kernel(x_ptr, out_ptr, FN: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs)))


@tile.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, FN: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs), tl.load(y_ptr + offs)))


@tile.jit
def fp64_math_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.exp(x) + tl.log(x) + tl.sin(x) + tl.cos(x) + tl.erf(x))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,ref", [
    ("tanh", np.tanh), ("log1p", np.log1p), ("erfc", np.vectorize(math.erfc)),
    ("lgamma", np.vectorize(math.lgamma)), ("cbrt", np.cbrt), ("sinpi",
                                                              lambda x: np.sin(np.pi * x))])
def test_unary_libdevice_on_gpu(torch, name, ref, dtype):
    x = torch.rand(N, dtype=getattr(torch, dtype), device="cuda") * 4 + 0.1
    out = torch.empty_like(x)
    unary_kernel[(1,)](x, out, FN=getattr(libdevice, name), N=N)
    expected = ref(x.cpu().numpy().astype(np.float64))
    tol = 4e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=tol, atol=tol)


def test_binary_and_integer_libdevice_on_gpu(torch):
    x = torch.rand(N, device="cuda") + 0.5
    y = torch.rand(N, device="cuda") * 3
    out = torch.empty_like(x)
    binary_kernel[(1,)](x, y, out, FN=libdevice.pow, N=N)
    torch.testing.assert_close(out, torch.pow(x, y), rtol=2e-6, atol=1e-6)
    binary_kernel[(1,)](x, y, out, FN=libdevice.div_rd, N=N)
    exact = x.double() / y.double()
    assert bool((out.double() <= exact).all())
    i = torch.randint(-2 ** 31, 2 ** 31 - 1, (N,), dtype=torch.int32, device="cuda")
    pc = torch.empty_like(i)
    unary_kernel[(1,)](i, pc, FN=libdevice.popc, N=N)
    expected = [bin(int(v) & 0xFFFFFFFF).count("1") for v in i.cpu().numpy()]
    np.testing.assert_array_equal(pc.cpu().numpy(), expected)


def test_fp64_transcendentals_on_gpu(torch):
    x = torch.rand(N, dtype=torch.float64, device="cuda") * 3 + 0.01
    out = torch.empty_like(x)
    fp64_math_kernel[(1,)](x, out, N=N)
    xs = x.cpu().numpy()
    expected = np.exp(xs) + np.log(xs) + np.sin(xs) + np.cos(xs) + np.vectorize(math.erf)(xs)
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-14)
