"""Programmatic dependent launch on the GPU (sm_90+): a producer / consumer chain launched
with `launch_pdl=True` many times on one stream, then captured in a CUDA graph and replayed.

Each kernel calls `gdc_launch_dependents()` first, so the next kernel of the chain may start
while it still runs, and touches the buffers the chain shares only after `gdc_wait()`. The
producer spins before its wait, so the consumer is resident early and would read a stale `y`
without the wait; each consumer writes its own row of `out`, so a stale read in any step
shows in the result.

    PYTHONPATH=. python3 -m pytest -q tests/gpu/test_pdl_gpu.py
"""

import numpy as np
import pytest

import gluon
import tile
import tile.language as tl
from gluon import language as gl

pytestmark = pytest.mark.gpu

N, BLOCK, STEPS, SPIN = 1 << 18, 1024, 64, 2000


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("programmatic dependent launch needs sm_90 or newer")
    return torch


@tile.jit
def _producer(x_ptr, y_ptr, junk_ptr, n, step, SPIN: tl.constexpr, BLOCK: tl.constexpr):
    tl.extra.cuda.gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    # Work that reads nothing the chain writes, overlapping the previous consumer's tail.
    spin = offs.to(tl.float32)
    for _ in range(SPIN):
        spin = spin * 0.999 + 0.5
    tl.store(junk_ptr + offs, spin, mask=mask)  # keeps the spin (every producer stores the same)
    tl.extra.cuda.gdc_wait()  # the previous consumer has read y (and x was written before)
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x + step, mask=mask)


@tile.jit
def _consumer(y_ptr, out_ptr, n, step, BLOCK: tl.constexpr):
    tl.extra.cuda.gdc_launch_dependents()
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.extra.cuda.gdc_wait()  # the producer of this step has written y
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + step * n + offs, y + 1.0, mask=mask)


@gluon.jit
def _gluon_consumer(y_ptr, out_ptr, n, step, BLOCK: gl.constexpr):
    # Launched with num_ctas=2: both CTAs of a program store the same values.
    layout: gl.constexpr = gl.BlockedLayout([4], [32], [4], [0])
    tl.extra.cuda.gdc_launch_dependents()
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    tl.extra.cuda.gdc_wait()
    y = gl.load(y_ptr + offs, mask=mask)
    gl.store(out_ptr + step * n + offs, y + 1.0, mask=mask)


def _buffers(torch):
    x = torch.randn(N, device="cuda", dtype=torch.float32)
    y = torch.zeros_like(x)
    junk = torch.zeros_like(x)
    out = torch.full((STEPS, N), float("nan"), device="cuda", dtype=torch.float32)
    return x, y, junk, out


def _chain(x, y, junk, out, consumer=None, **consumer_options):
    grid = (tile.cdiv(N, BLOCK),)
    for step in range(STEPS):
        _producer[grid](x, y, junk, N, step, SPIN=SPIN, BLOCK=BLOCK, launch_pdl=True)
        if consumer is None:
            _consumer[grid](y, out, N, step, BLOCK=BLOCK, launch_pdl=True)
        else:
            consumer[grid](y, out, N, step, BLOCK=BLOCK, launch_pdl=True, **consumer_options)


def _check(torch, x, out):
    torch.cuda.synchronize()
    expected = x[None, :] + torch.arange(STEPS, device="cuda", dtype=torch.float32)[:, None]
    bad = (out != expected + 1.0).sum(dim=1)
    assert bad.sum().item() == 0, f"stale or missing elements per step: {bad.tolist()}"


def test_a_pdl_chain_on_one_stream_sees_every_producer_write(torch):
    x, y, junk, out = _buffers(torch)
    for _ in range(3):
        out.fill_(float("nan"))
        _chain(x, y, junk, out)
        _check(torch, x, out)
    ptx = _consumer.warmup(y, out, N, 0, BLOCK=BLOCK, grid=(1,)).asm["ptx"]
    assert "griddepcontrol.wait;" in ptx and "griddepcontrol.launch_dependents;" in ptx


def test_a_pdl_chain_captured_in_a_cuda_graph_replays_correctly(torch):
    x, y, junk, out = _buffers(torch)
    _chain(x, y, junk, out)  # compile every variant before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _chain(x, y, junk, out)
    for seed in range(3):
        # New inputs in the same buffers, and the outputs cleared, before each replay.
        x.copy_(torch.randn(N, device="cuda", dtype=torch.float32,
                            generator=torch.Generator(device="cuda").manual_seed(seed)))
        out.fill_(float("nan"))
        graph.replay()
        _check(torch, x, out)


def test_pdl_combines_with_cluster_launches(torch):
    x, y, junk, out = _buffers(torch)
    _chain(x, y, junk, out, _gluon_consumer, num_ctas=2)
    _check(torch, x, out)
    out.fill_(float("nan"))
    _chain(x, y, junk, out, _consumer, cluster_dims=(2,))
    _check(torch, x, out)


def test_the_kernels_also_run_without_pdl(torch):
    # Without the launch option the builtins return at once: the stream orders the chain.
    x, y, junk, out = _buffers(torch)
    grid = (tile.cdiv(N, BLOCK),)
    for step in range(STEPS):
        _producer[grid](x, y, junk, N, step, SPIN=16, BLOCK=BLOCK)
        _consumer[grid](y, out, N, step, BLOCK=BLOCK)
    _check(torch, x, out)
    assert np.isfinite(junk.cpu().numpy()).all()
