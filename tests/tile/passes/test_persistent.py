"""tile/passes/persistent.py: a one-program-per-tile matmul (tutorial 03's kernel) compiled
for sm_90a runs as persistent programs: its body inside `for pid in range(program_id,
launch_grid, num_programs)`, flattened and pipelined across tiles, with the requested grid as
a hidden last parameter that `PersistentBinder` fills while it caps the launched grid. The
interpreter runs the same IR with two programs and matches numpy; kernels whose programs
may not be independent or equal are left alone; the converter prints the one-tile form."""

import os
import re

import numpy as np
import pytest

import tile as triton
import tile.language as tl
from shared_codegen.frontend.compile import explicit_layout_module
from shared_codegen.frontend.launch import specialization_for_signature
from shared_codegen.ir.printer import print_module
from shared_codegen.ir.verifier import verify_module
from shared_codegen.runtime import driver
from shared_codegen.runtime.launcher import PersistentBinder
from tile.convert import to_gluon_for_signature

os.environ.pop("MATMUL_FRONTEND", None)  # the file's default: our tile DSL
from benchmarks.tutorial03_matmul import matmul_kernel  # noqa: E402


@triton.jit
def counted_mm(a_ptr, b_ptr, c_ptr, count_ptr, K, BM: tl.constexpr, BK: tl.constexpr):
    """A matmul tile per program that also counts its programs with an atomic."""
    pid = tl.program_id(0)
    rows = pid * BM + tl.arange(0, BM)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BM), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :])
        b = tl.load(b_ptr + (k + ks[:, None]) * BM + tl.arange(0, BM)[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * BM + tl.arange(0, BM)[None, :], acc)
    tl.atomic_add(count_ptr, 1)


@triton.jit
def triangle_mm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BK: tl.constexpr):
    """Program i sums i + 1 K blocks: unequal work (a causal attention's shape)."""
    pid = tl.program_id(0)
    rows = pid * BM + tl.arange(0, BM)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BM), dtype=tl.float32)
    for k in range(0, (pid + 1) * BK, BK):
        a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :])
        b = tl.load(b_ptr + (k + ks[:, None]) * BM + tl.arange(0, BM)[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * BM + tl.arange(0, BM)[None, :], acc)


@triton.jit
def fixed_b_mm(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BK: tl.constexpr):
    """B loaded once before the K loop: its shared-memory copy would cross the flattened
    loop, which loop_flatten declines."""
    pid = tl.program_id(0)
    rows = pid * BM + tl.arange(0, BM)
    ks = tl.arange(0, BK)
    b = tl.load(b_ptr + ks[:, None] * BM + tl.arange(0, BM)[None, :])
    acc = tl.zeros((BM, BM), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * K + k + ks[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * BM + tl.arange(0, BM)[None, :], acc)


SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp16:16", "M": "i32", "N": "i32",
       "K": "i32:16", "stride_am": "i32:16", "stride_bk": "i32:16", "stride_cm": "i32:16"}
# Tutorial 03's kernel (benchmarks/tutorial03_matmul.py), specialized as Triton's launcher
# does (unit strides folded), with 128x128x64 tiles.
UNIT_STRIDES = dict(stride_ak=1, stride_bn=1, stride_cn=1, ACTIVATION="")
TILE = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, **UNIT_STRIDES)
SMALL_SIG = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "K": "i32:16"}


def _module(kernel, signature, constexprs, target="sm_90a", num_warps=8, persistent=True):
    spec = specialization_for_signature(kernel, signature, constexprs, num_warps, target, 3)
    module = explicit_layout_module(kernel, spec, persistent=persistent)
    return module, print_module(module)


def test_tutorial03_shape_becomes_persistent_and_pipelined():
    module, text = _module(matmul_kernel, SIG, TILE)
    assert module.attrs.get("persistent_programs") is True
    assert text.count("sc.launch_grid") == 1
    # The tile loop and the K loop are one flattened loop (behind the empty-K guard, whose
    # branch keeps a tile loop without the K loop), and the loads became cp.async rings.
    assert text.count("scf.for") == 2
    assert "ttg.async_copy_global_to_local" in text
    assert "tt.get_program_id" in text and "tt.get_num_programs" in text


def test_ptx_takes_the_requested_grid_last():
    kernel = triton.compile(matmul_kernel, SIG, TILE, target="sm_90a", num_warps=8)
    assert kernel.metadata["persistent_programs"] is True
    assert kernel.param_kinds[-1] == "i32" and len(kernel.param_kinds) == len(SIG) + 1
    ptx = kernel.asm["ptx"]
    params = re.findall(r"\.param \.(\w+)[^\n]*_param_(\d+)", ptx)
    assert len(params) == len(SIG) + 1 and params[-1] == ("u32", str(len(SIG)))
    assert len(re.findall(r"cp\.async\.cg\.shared\.global", ptx)) > 0
    assert "wgmma.mma_async" in ptx


@pytest.mark.parametrize("M,N,K", [(256, 384, 128), (300, 260, 72)])
def test_interpreter_two_programs_walk_every_tile(M, N, K):
    rng = np.random.default_rng(M + N + K)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    tiles = triton.cdiv(M, 64) * triton.cdiv(N, 64)
    assert tiles > 2  # more programs requested than the interpreter runs
    matmul_kernel[(tiles,)](a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=64,
                            BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=2, ACTIVATION="",
                            num_warps=4)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kernel,why", [(counted_mm, "atomics"), (triangle_mm, "unequal work")])
def test_left_alone(kernel, why):
    sig = dict(SMALL_SIG, **({"count_ptr": "*i32"} if kernel is counted_mm else {}))
    module, text = _module(kernel, sig, dict(BM=64, BK=64), num_warps=4)
    assert "persistent_programs" not in module.attrs, why
    assert "sc.launch_grid" not in text


def test_a_nest_loop_flatten_declines_is_put_back():
    module, text = _module(fixed_b_mm, SMALL_SIG, dict(BM=64, BK=64), num_warps=4)
    verify_module(module)
    assert "persistent_programs" not in module.attrs
    assert text.count("scf.for") == 1 and "sc.launch_grid" not in text
    assert "tt.get_program_id" in text
    rng = np.random.default_rng(3)
    a = rng.standard_normal((192, 128)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = np.zeros((192, 64), np.float32)
    fixed_b_mm[(3,)](a, b, c, 128, BM=64, BK=64, num_warps=4)
    a32 = a.astype(np.float32)
    ref = a32[:, :64] @ b.astype(np.float32) + a32[:, 64:] @ b.astype(np.float32)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


def test_left_alone_below_sm90_and_when_turned_off(monkeypatch):
    module, _ = _module(matmul_kernel, SIG, TILE, target="sm_80", num_warps=4)
    assert "persistent_programs" not in module.attrs
    monkeypatch.setenv("SC_PERSISTENT", "0")
    module, _ = _module(matmul_kernel, SIG, TILE)
    assert "persistent_programs" not in module.attrs


def test_converter_prints_one_program_per_tile():
    source = to_gluon_for_signature(matmul_kernel, SIG, TILE, num_warps=8)
    assert "launch_grid" not in source
    assert re.search(r"def matmul_kernel\(([^)]*)\)", source).group(1).count(",") == len(SIG) - 1


class _Recorder:
    def __init__(self):
        self.calls = []

    def launch(self, function, grid, num_warps, shared, stream, args):
        self.calls.append(("launch", tuple(grid), tuple(args)))

    def launch_pdl(self, function, grid, num_warps, shared, stream, args):
        self.calls.append(("pdl", tuple(grid), tuple(args)))

    def launch_cluster(self, function, grid, cluster, num_warps, shared, stream, args,
                       pdl=False):
        self.calls.append(("cluster", tuple(grid), tuple(args)))


def test_binder_caps_the_grid_and_passes_the_request(monkeypatch):
    class Device:
        sm_count = 132

    class Plain:
        function, num_warps, shared = "g", 8, 100_000

        def __init__(self):
            self.binder = _Recorder()

    asked, built = [], []
    monkeypatch.setattr(driver, "current_device_index", lambda: 0)
    monkeypatch.setattr(driver, "get_device", lambda index=0: Device)
    monkeypatch.setattr(driver, "max_active_blocks",
                        lambda function, threads, shared: asked.append((threads, shared)) or 1)
    inner = _Recorder()
    binder = PersistentBinder(inner, lambda: built.append(Plain()) or built[-1])
    binder.launch("f", (512,), 8, 200_000, 0, (1, 2))
    binder.launch_pdl("f", (600,), 8, 200_000, 0, (1, 2))
    assert inner.calls == [("launch", (132,), (1, 2, 512)), ("pdl", (132,), (1, 2, 600))]
    assert not built  # no plain build until a launch needs one
    # A grid that fits, a 2-D grid and a cluster launch run the one-program-per-tile build,
    # compiled once, with the kernel's own arguments.
    binder.launch("f", (100,), 8, 200_000, 0, (1, 2))
    binder.launch_pdl("f", (132,), 8, 200_000, 0, (1, 2))
    binder.launch("f", (512, 2), 8, 200_000, 0, (1, 2))
    binder.launch_cluster("f", (512,), (2, 1, 1), 8, 200_000, 0, (1, 2))
    assert len(built) == 1 and len(inner.calls) == 2
    assert built[0].binder.calls == [("launch", (100,), (1, 2)), ("pdl", (132,), (1, 2)),
                                     ("launch", (512, 2), (1, 2)), ("cluster", (512,), (1, 2))]
    assert asked == [(256, 200_000)]  # occupancy asked once, on the first launch


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(2000, 3000, 256), (4096, 4096, 512), (96, 80, 64)])
def test_gpu_persistent_matches_torch(M, N, K):
    """More tiles than programs fit on the GPU (the launcher caps the grid and the programs
    walk the rest), and fewer (the one-program-per-tile build runs), ragged edges included."""
    torch = pytest.importorskip("torch")
    if not driver.has_gpu() or not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    gen = torch.Generator(device="cuda").manual_seed(M + N)
    a = torch.randn((M, K), device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16, generator=gen)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    tiles = triton.cdiv(M, 128) * triton.cdiv(N, 128)
    kernel = matmul_kernel[(tiles,)](a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=128,
                                     BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8,
                                     ACTIVATION="", num_warps=8)
    assert kernel.metadata["persistent_programs"] is True
    ref = a.float() @ b.float()
    err = float((c.float() - ref).abs().max() / ref.abs().max())
    assert err < 2e-3, err
