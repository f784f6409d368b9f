"""Sanitizer reports about mbarriers, async engines and poisoned memory, word for word: an
arrive-count overflow, invalidating a barrier with pending transactions, a program that
returns with a TMA load in flight or transaction bytes unmatched (strict mode), a wgmma
operand overwritten while in flight, reads of never-written shared memory (always) and
tensor memory (strict mode)."""

import inspect

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout)
from gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from gluon.nvidia.hopper import TensorDescriptor
from shared_codegen.errors import InterpreterError, RaceError

BLOCKED = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
SMEM = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])


def line_of(text: str) -> str:
    lines, _ = inspect.findsource(inspect.getmodule(line_of))
    first = next(i + 1 for i, line in enumerate(lines) if text in line)
    return f"{__file__}:{first}"


@gluon.jit
def overflow_kernel():
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # overflow bar
    mbarrier.init(bar, count=2)
    mbarrier.arrive(bar)
    mbarrier.arrive(bar, count=2)  # one arrival too many


@gluon.jit
def invalidate_pending_kernel():
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # pending bar
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, 1024)
    mbarrier.invalidate(bar)  # the bytes never came


@gluon.jit
def no_wait_kernel(in_desc, LOAD: gl.constexpr):
    smem = gl.allocate_shared_memory(in_desc.dtype, in_desc.block_shape, in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())  # exit bar
    mbarrier.init(bar, count=1)
    mbarrier.expect(bar, in_desc.block_type.nbytes)
    if LOAD:
        tma.async_copy_global_to_shared(in_desc, [0, 0], bar, smem)  # never awaited


@gluon.jit
def uninitialized_smem_kernel(out_ptr):
    smem = gl.allocate_shared_memory(gl.float32, [32, 32], SMEM)  # never written
    x = smem.load(BLOCKED)  # reads garbage
    rows = gl.arange(0, 32, gl.SliceLayout(1, BLOCKED))
    cols = gl.arange(0, 32, gl.SliceLayout(0, BLOCKED))
    gl.store(out_ptr + gl.expand_dims(rows, 1) * 32 + gl.expand_dims(cols, 0), x)


@gluon.jit
def uninitialized_tmem_kernel(out_ptr):
    layout: gl.constexpr = TensorMemoryLayout(block=(128, 32), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(gl.float32, [128, 32], layout, gl.num_warps())
    acc = allocate_tensor_memory(gl.float32, [128, 32], layout)
    x = acc.load(reg)  # never written
    rows = gl.arange(0, 128, gl.SliceLayout(1, reg))
    cols = gl.arange(0, 32, gl.SliceLayout(0, reg))
    gl.store(out_ptr + gl.expand_dims(rows, 1) * 32 + gl.expand_dims(cols, 0), x)


@gluon.jit
def wgmma_overwrite_kernel(a_ptr, b_ptr, out_ptr, WAIT_FIRST: gl.constexpr):
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, 32, 16])
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    smem: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16)
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, blocked))[:, None]
    ks = gl.arange(0, 16, layout=gl.SliceLayout(0, blocked))[None, :]
    krows = gl.arange(0, 16, layout=gl.SliceLayout(1, blocked))[:, None]
    cols = gl.arange(0, 32, layout=gl.SliceLayout(0, blocked))[None, :]
    a_s = gl.allocate_shared_memory(gl.float16, [64, 16], smem, gl.load(a_ptr + rows * 16 + ks))
    b_s = gl.allocate_shared_memory(gl.float16, [16, 32], smem,
                                    gl.load(b_ptr + krows * 32 + cols))
    acc = gl.zeros([64, 32], gl.float32, layout=acc_layout)
    acc = warpgroup_mma(a_s, b_s, acc, is_async=True)  # the in-flight wgmma
    if WAIT_FIRST:
        acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    a_s.store(gl.zeros([64, 16], gl.float16, blocked))  # overwrites its operand
    acc = warpgroup_mma_wait(num_outstanding=0, deps=[acc])
    orows = gl.arange(0, 64, layout=gl.SliceLayout(1, acc_layout))[:, None]
    ocols = gl.arange(0, 32, layout=gl.SliceLayout(0, acc_layout))[None, :]
    gl.store(out_ptr + orows * 32 + ocols, acc)


def test_overwriting_an_operand_of_an_in_flight_wgmma_word_for_word():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 16)).astype(np.float16)
    b = rng.standard_normal((16, 32)).astype(np.float16)
    out = np.zeros((64, 32), np.float32)
    wgmma_overwrite_kernel[(1,)](a, b, out, True, num_warps=4)  # waited: no race
    np.testing.assert_allclose(out, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5,
                               atol=1e-4)
    with pytest.raises(RaceError) as info:
        wgmma_overwrite_kernel[(1,)](a, b, out, False, num_warps=4)
    store, mma = line_of("# overwrites its operand"), line_of("# the in-flight wgmma")
    assert str(info.value) == (
        f"{store}: race: local_store writes shared memory that the async warpgroup_mma at "
        f"{mma} may still be reading; retire it with warpgroup_mma_wait first "
        f"(program id (0, 0, 0))\n"
        f"    a_s.store(gl.zeros([64, 16], gl.float16, blocked))  # overwrites its operand")


def test_an_arrive_count_overflow_word_for_word():
    with pytest.raises(InterpreterError) as info:
        overflow_kernel[(1,)]()
    arrive, alloc = line_of("# one arrival too many"), line_of("# overflow bar")
    assert str(info.value) == (
        f"{arrive}: mbarrier arrive of count 2 on the mbarrier allocated at {alloc}, whose "
        f"phase 0 has only 1 of 2 arrivals pending (PTX leaves this undefined) "
        f"(program id (0, 0, 0))\n"
        f"    mbarrier.arrive(bar, count=2)  # one arrival too many")


def test_invalidating_a_barrier_with_pending_transactions_word_for_word():
    with pytest.raises(InterpreterError) as info:
        invalidate_pending_kernel[(1,)]()
    inval, alloc = line_of("# the bytes never came"), line_of("# pending bar")
    assert str(info.value) == (
        f"{inval}: mbarrier.invalidate on the mbarrier allocated at {alloc} while its phase 0 "
        f"has pending transactions: the phase still lacks 1024 transaction bytes "
        f"(program id (0, 0, 0))\n"
        f"    mbarrier.invalidate(bar)  # the bytes never came")


def _desc():
    x = np.arange(64 * 64, dtype=np.float16).reshape(64, 64)
    return TensorDescriptor.from_tensor(x, [64, 64], gl.NVMMASharedLayout(128, 16))


def test_strict_mode_reports_a_program_that_returns_with_a_load_in_flight(monkeypatch):
    no_wait_kernel[(1,)](_desc(), True)  # not strict: the run ends quietly
    no_wait_kernel[(1,)](_desc(), False)
    monkeypatch.setenv("SC_INTERPRET_STRICT", "1")
    with pytest.raises(InterpreterError) as info:
        no_wait_kernel[(1,)](_desc(), True)
    load, alloc = line_of("# never awaited"), line_of("# exit bar")
    # Nothing after the load lets it land (no barrier op, no wait): it is still in flight.
    assert str(info.value) == (
        f"the program returned while the async operation at {load} was still in flight on "
        f"the mbarrier allocated at {alloc}: no mbarrier.wait observed the phase it completes "
        f"(program id (0, 0, 0))")


def test_strict_mode_reports_expected_bytes_that_never_came(monkeypatch):
    monkeypatch.setenv("SC_INTERPRET_STRICT", "1")
    with pytest.raises(InterpreterError) as info:
        no_wait_kernel[(1,)](_desc(), False)  # expects a load's bytes, issues none
    alloc = line_of("# exit bar")
    assert str(info.value) == (f"the program returned with phase 0 of the mbarrier allocated "
                               f"at {alloc} unmatched: the phase still lacks 8192 transaction "
                               f"bytes (program id (0, 0, 0))")


def test_reading_never_written_shared_memory_word_for_word():
    with pytest.raises(InterpreterError) as info:
        uninitialized_smem_kernel[(1,)](np.zeros((32, 32), np.float32))
    read, alloc = line_of("# reads garbage"), line_of("# never written")
    assert str(info.value) == (
        f"{read}: local_load reads uninitialized shared memory: element [0, 0] of the "
        f"[32, 32] view (1024 of 1024 elements) was never written (allocation at {alloc}) "
        f"(program id (0, 0, 0))\n"
        f"    x = smem.load(BLOCKED)  # reads garbage")


def test_never_written_tensor_memory_is_poisoned_and_reported_in_strict_mode(monkeypatch):
    out = np.zeros((128, 32), np.float32)
    uninitialized_tmem_kernel[(1,)](out)
    assert np.isnan(out).all()  # the poison: NaN, as garbage would show on the GPU
    monkeypatch.setenv("SC_INTERPRET_STRICT", "1")
    with pytest.raises(InterpreterError) as info:
        uninitialized_tmem_kernel[(1,)](out)
    read = line_of("x = acc.load(reg)  # never written")
    assert str(info.value) == (
        f"{read}: tensor_memory_descriptor.load reads uninitialized tensor memory: element "
        f"[0, 0] of the [128, 32] view (4096 of 4096 elements) was never written (it holds "
        f"the poison value, NaN for floats) (program id (0, 0, 0))\n"
        f"    x = acc.load(reg)  # never written")
