"""Sanitizer reports about mbarriers and poisoned memory, word for word: an arrive-count
overflow, invalidating a barrier with pending transactions, a program that returns with a TMA
load in flight or transaction bytes unmatched (strict mode), reads of never-written shared
memory (always) and tensor memory (strict mode)."""

import inspect

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout)
from gluon.language.nvidia.hopper import mbarrier, tma
from gluon.nvidia.hopper import TensorDescriptor
from shared_codegen.errors import InterpreterError

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
