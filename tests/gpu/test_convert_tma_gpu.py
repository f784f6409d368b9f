"""On the H100: tile kernels with tensor descriptors and their converted Gluon source give
bit-identical results (tests/tile/test_convert_tma.py's kernels), and Gluon's
`tma.make_tensor_descriptor` copies through a map the kernel wrote."""

import importlib.util

import numpy as np
import pytest

import tile
from tile.convert import to_gluon
from tile.tools.tensor_descriptor import TensorDescriptor

pytestmark = pytest.mark.gpu


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    tile.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda",
                                                                dtype=torch.int8))
    return torch


def _load(tmp_path, name, text):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _operands(torch, m, n, k):
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn((n, k), device="cuda", dtype=torch.float16, generator=gen)
    return a, b, (a.float() @ b.float().T)


def test_converted_host_descriptor_matmul_matches_the_tile_kernel(tmp_path):
    torch = _torch()
    from tests.tile.test_convert_tma import matmul_tma

    m, n, k = 1024, 896, 640  # partial tiles in N
    a, b, want = _operands(torch, m, n, k)
    descs = lambda c: [TensorDescriptor.from_tensor(x, [64, 64]) for x in (a, b, c)]  # noqa
    c_tile = torch.zeros((m, n), device="cuda", dtype=torch.float16)
    c_conv = torch.zeros_like(c_tile)
    converted = _load(tmp_path, "conv_tma_gpu", to_gluon(matmul_tma, *descs(c_conv), m, n, k,
                                                         BM=64, BN=64, BK=64))
    grid = (m // 64, -(-n // 64))
    matmul_tma[grid](*descs(c_tile), m, n, k, BM=64, BN=64, BK=64)
    converted.matmul_tma[grid](*descs(c_conv), m, n, k)
    torch.cuda.synchronize()
    assert torch.equal(c_tile, c_conv)
    torch.testing.assert_close(c_conv.float(), want, rtol=2e-3, atol=5e-2)


@pytest.mark.parametrize("subtile", [False, True])
def test_converted_kernel_built_descriptors_match_the_tile_kernel(tmp_path, subtile):
    torch = _torch()
    from tests.tile.test_convert_tma import matmul_descriptor_persistent

    m, n, k = 1024, 768, 512
    a, b, want = _operands(torch, m, n, k)
    consts = dict(BM=64, BN=64, BK=64, NUM_SMS=132, SUBTILE=subtile)
    c_tile = torch.zeros((m, n), device="cuda", dtype=torch.float16)
    c_conv = torch.zeros_like(c_tile)
    converted = _load(tmp_path, f"conv_desc_gpu_{subtile}",
                      to_gluon(matmul_descriptor_persistent, a, b, c_conv, m, n, k, **consts))
    matmul_descriptor_persistent[(132,)](a, b, c_tile, m, n, k, **consts)
    converted.matmul_descriptor_persistent[(132,)](a, b, c_conv, m, n, k)
    torch.cuda.synchronize()
    assert torch.equal(c_tile, c_conv)
    torch.testing.assert_close(c_conv.float(), want, rtol=2e-3, atol=5e-2)


def test_gluon_make_tensor_descriptor_copies_and_pads():
    torch = _torch()
    from tests.gluon.hopper.test_tma_make_descriptor import copy_doubled

    x = torch.arange(50 * 24, device="cuda", dtype=torch.float16).reshape(50, 24)
    y = torch.full((50, 48), -1.0, device="cuda", dtype=torch.float16)
    copy_doubled[(2,)](x, y, 50, 24, PADDING="nan")
    torch.cuda.synchronize()
    got = y.cpu().numpy()
    np.testing.assert_array_equal(got[:, :24], x.cpu().numpy())
    np.testing.assert_array_equal(got[:, 32:], x.cpu().numpy()[:, :16])
    assert np.isnan(got[:, 24:32]).all()
