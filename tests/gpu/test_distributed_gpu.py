"""`tl.distributed` on one GPU: world size 1 through torch's symmetric memory (the primitives
and the three examples against numpy), and the memory-model qualifiers in the PTX that ran.

Run on a GPU machine: `python3 -m pytest tests/gpu/test_distributed_gpu.py -q`. The test
initializes a one-process NCCL group itself (no torchrun)."""

import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "distributed"))
sys.path.insert(0, os.path.join(HERE, "..", "distributed"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def heap(tmp_path_factory):
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    if not dist.is_initialized():
        path = tmp_path_factory.mktemp("pg") / "store"
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", init_method=f"file://{path}", rank=0, world_size=1)
    # The examples' make_world takes this process for a one-rank torchrun job.
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    from tile.distributed import SymmetricHeap

    yield SymmetricHeap(1 << 22)


def test_put_get_notify_wait_on_one_rank(heap):
    import torch
    from test_distributed_primitives import N, ring_put_get

    x = heap.empty("x", (N,), torch.float32)
    y = heap.empty("y", (N,), torch.float32)
    z = heap.empty("z", (2 * N,), torch.float32)
    x.tensor.copy_(torch.arange(N, dtype=torch.float32))
    heap.reset_signals()
    heap.launch(ring_put_get, (1,), lambda c: (x.tensor, y.tensor, z.tensor, c.heap_bases,
                                               c.signal_pad_bases, c.signal_pad, c.rank,
                                               c.world_size), N=N)
    torch.cuda.synchronize()
    expected = torch.arange(N, dtype=torch.float32, device="cuda")
    torch.testing.assert_close(y.tensor, expected, rtol=0, atol=0)
    torch.testing.assert_close(z.tensor[:N], expected, rtol=0, atol=0)
    torch.testing.assert_close(z.tensor[N:], 2 * expected, rtol=0, atol=0)
    assert int(heap.signal_pad[0]) == 1


def test_atomics_and_flags_on_one_rank(heap):
    import torch
    from test_distributed_primitives import N, atomics_on_rank0, counter_signals, flag_protocol

    counters = heap.empty("counters", (16,), torch.int32)
    counters.tensor[3] = 0
    heap.launch(atomics_on_rank0, (1,), lambda c: (counters.tensor, c.heap_bases,
                                                   c.signal_pad_bases, c.signal_pad, c.rank,
                                                   c.world_size))
    got = counters.tensor.cpu().numpy()
    assert got[0] == 1 and got[1] == 0 and got[2] == 1 and got[4] == 1 and got[14] == 1

    data = heap.empty("data", (N,), torch.int32)
    flag = heap.empty("flag", (1,), torch.int32)
    out = heap.empty("out", (N,), torch.int32)
    heap.launch(flag_protocol, (1,), lambda c: (data.tensor, flag.tensor, out.tensor,
                                                c.heap_bases, c.signal_pad_bases,
                                                c.signal_pad, c.rank, c.world_size), N=N)
    assert out.tensor.cpu().numpy().tolist() == [7 + 1000] * N

    signals = heap.empty("signals", (6,), torch.int32)
    heap.reset_signals()
    heap.launch(counter_signals, (2,), lambda c: (signals.tensor, c.heap_bases,
                                                  c.signal_pad_bases, c.signal_pad, c.rank,
                                                  c.world_size))
    got = signals.tensor.cpu().numpy()
    assert 1 <= got[0] <= 2 and 1 <= got[3] <= 2
    assert got[[1, 2, 4, 5]].tolist() == [10, 10, 10, 10]
    assert int(heap.signal_pad[0]) == 2


def test_examples_on_one_rank(heap):
    import all_gather_gemm
    import flash_decode
    import gemm_reduce_scatter

    assert all_gather_gemm.main(world_size=1, m_local=256, n=128, k=128, block=64) < 0.1
    assert gemm_reduce_scatter.main(world_size=1, m_local=256, n=128, k_local=128,
                                    block=64) < 0.05
    assert flash_decode.main(world_size=1, heads=8, s_local=256, d=64) < 1e-3
