"""Happens-before between partitions on tensor memory: an accumulator the MMA partition's
tensor core writes and the epilogue partition loads with no mbarrier edge between them is a
RaceError naming both lines; with the wait on the commit the kernel runs clean."""

import inspect

import numpy as np
import pytest
from tmem_hb_kernels import mma_epilogue_kernel

import tmem_hb_kernels
from shared_codegen.errors import RaceError


def line_of(text: str) -> str:
    lines, _ = inspect.findsource(tmem_hb_kernels)
    hits = [i + 1 for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, (text, hits)
    return f"{tmem_hb_kernels.__file__}:{hits[0]}"


def _operands():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((128, 16)).astype(np.float16),
            rng.standard_normal((16, 32)).astype(np.float16))


def test_epilogue_waiting_on_the_commit_reads_the_product():
    a, b = _operands()
    out = np.full((128, 32), np.nan, np.float32)
    mma_epilogue_kernel[(1,)](a, b, out, WAIT=True, ARRIVE_ONLY=False)
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-5, atol=1e-5)


def test_epilogue_loading_the_accumulator_without_a_wait_races_with_the_mma():
    a, b = _operands()
    with pytest.raises(RaceError) as info:
        mma_epilogue_kernel[(1,)](a, b, np.zeros((128, 32), np.float32), WAIT=False,
                                  ARRIVE_ONLY=False)
    mma, load = line_of("# the accumulator write"), line_of("# the epilogue's accumulator")
    assert str(info.value) == (
        f"{mma}: race: tcgen05_mma writes tensor memory that the default partition "
        f"`_epilogue_partition` (4 warps) read at {load} (tensor_memory_descriptor.load), and "
        f"nothing orders the two: that partition arrives on no mbarrier after its read, so "
        f"the worker partition 0 `_mma_partition` (1 warp) cannot wait for it "
        f"(mbarrier.arrive after the read, mbarrier.wait before the tcgen05 write) "
        f"(program id (0, 0, 0))\n"
        f"    tcgen05_mma(a_smem, b_smem, acc, use_acc=False)  # the accumulator write")


@pytest.mark.parametrize("seed", ["0", "1", "2", "3"])
def test_a_plain_arrive_after_the_issue_does_not_order_the_mma(monkeypatch, seed):
    """Only a commit releases the tensor core's write: whether the MMA has landed by the
    load (happens-before) or not (in-flight ownership), the load is reported."""
    monkeypatch.setenv("SC_INTERPRET_SEED", seed)
    a, b = _operands()
    with pytest.raises(RaceError) as info:
        mma_epilogue_kernel[(1,)](a, b, np.zeros((128, 32), np.float32), WAIT=False,
                                  ARRIVE_ONLY=True)
    load, mma = line_of("# the epilogue's accumulator"), line_of("# the accumulator write")
    text = str(info.value)
    assert text.startswith(f"{load}: race: tensor_memory_descriptor.load reads tensor "
                           f"memory that the "), text
    assert mma in text, text
