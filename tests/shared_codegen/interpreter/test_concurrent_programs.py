"""Programs that wait on each other: a kernel with a spin loop runs its programs concurrently,
interleaved at atomics and volatile loads, and a spin that can never complete is reported
word for word (the line, each program, what it reads) instead of hanging."""

import inspect

import numpy as np
import pytest

import tile
import tile.language as tl
from shared_codegen.errors import DeadlockError, InterpreterError
from shared_codegen.interpreter import grid as grid_module


def line_of(text: str) -> str:
    """`file:line` of the kernel line (the first line of this module) containing `text`."""
    lines, _ = inspect.findsource(inspect.getmodule(line_of))
    first = next(i + 1 for i, line in enumerate(lines) if text in line)
    return f"{__file__}:{first}"


@tile.jit
def split_k_fixup(partial_ptr, flags_ptr, out_ptr, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    # Program k computes slice k's partial sum and publishes it; program 0 waits for every
    # other program's flag (spinning on an atomic), then reduces: a split-K fix-up.
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(partial_ptr + pid * BLOCK + offs, (offs + pid * 100).to(tl.float32))
    tl.atomic_xchg(flags_ptr + pid, 1)
    if pid == 0:
        acc = tl.zeros([BLOCK], tl.float32)
        for k in range(SPLITS):
            while tl.atomic_add(flags_ptr + k, 0) == 0:  # spin: wait for program k
                pass
            acc += tl.load(partial_ptr + k * BLOCK + offs)
        tl.store(out_ptr + offs, acc)


@tile.jit
def ticket_chain(turn_ptr, out_ptr):
    # Program p runs its critical section only after program p - 1 (a later program first
    # in the grid order has to wait): a chain that sequential programs would hang on.
    pid = tl.program_id(0)
    while tl.load(turn_ptr, volatile=True) != tl.num_programs(0) - 1 - pid:
        pass
    prev = tl.load(out_ptr + pid + 1, mask=pid + 1 < tl.num_programs(0), other=0)
    tl.store(out_ptr + pid, prev + pid)
    tl.atomic_add(turn_ptr, 1)


@tile.jit
def wait_for_a_flag_nobody_sets(flag_ptr, out_ptr):
    pid = tl.program_id(0)
    while tl.load(flag_ptr, volatile=True) == 0:  # never set
        pass
    tl.store(out_ptr + pid, 1)


@tile.jit
def lock_never_released(lock_ptr, out_ptr):
    pid = tl.program_id(0)
    while tl.atomic_cas(lock_ptr, 0, 1) != 0:  # acquire
        pass
    tl.store(out_ptr + pid, pid)
    # missing: tl.atomic_xchg(lock_ptr, 0)


def test_split_k_fixup_waits_for_every_program():
    splits, block = 4, 16
    partial = np.zeros(splits * block, np.float32)
    flags = np.zeros(splits, np.int32)
    out = np.zeros(block, np.float32)
    split_k_fixup[(splits,)](partial, flags, out, SPLITS=splits, BLOCK=block)
    want = sum(np.arange(block) + 100 * k for k in range(splits)).astype(np.float32)
    np.testing.assert_array_equal(out, want)


def test_a_chain_in_reverse_program_order_completes():
    n = 6
    turn, out = np.zeros(1, np.int32), np.zeros(n, np.int32)
    ticket_chain[(n,)](turn, out)
    np.testing.assert_array_equal(out, np.cumsum(np.arange(n)[::-1])[::-1])
    assert turn[0] == n


def test_a_spin_on_a_flag_nobody_sets_is_a_deadlock():
    flag, out = np.zeros(1, np.int32), np.zeros(2, np.int32)
    with pytest.raises(DeadlockError) as info:
        wait_for_a_flag_nobody_sets[(2,)](flag, out)
    where = line_of("# never set")
    src = "while tl.load(flag_ptr, volatile=True) == 0:  # never set"
    limit = grid_module.SPIN_LIMIT
    assert str(info.value) == (
        f"{where}: deadlock: a spin loop never completes: every running program has repeated "
        f"the same atomic or volatile load {limit} times with no store to global memory in "
        f"between\n"
        f"  program (0, 0, 0) spins at {where}: a volatile load that reads 0\n      {src}\n"
        f"  program (1, 0, 0) spins at {where}: a volatile load that reads 0\n      {src}\n"
        f"  0 programs returned")
    assert (info.value.file, info.value.line) == (__file__, int(where.rsplit(":", 1)[1]))
    np.testing.assert_array_equal(out, [0, 0])


def test_a_lock_never_released_names_the_spinning_programs():
    lock, out = np.zeros(1, np.int32), np.full(3, -1, np.int32)
    with pytest.raises(DeadlockError) as info:
        lock_never_released[(3,)](lock, out)
    where = line_of("# acquire")
    src = "while tl.atomic_cas(lock_ptr, 0, 1) != 0:  # acquire"
    lines = str(info.value).split("\n")
    assert lines[1:] == [
        f"  program (1, 0, 0) spins at {where}: an atomic that reads 1", f"      {src}",
        f"  program (2, 0, 0) spins at {where}: an atomic that reads 1", f"      {src}",
        "  1 program returned"]
    np.testing.assert_array_equal(out, [0, -1, -1])


def test_programs_beyond_the_resident_ones_are_named(monkeypatch):
    monkeypatch.setattr(grid_module, "MAX_RESIDENT", 2)
    flag, out = np.zeros(1, np.int32), np.zeros(5, np.int32)
    with pytest.raises(DeadlockError) as info:
        wait_for_a_flag_nobody_sets[(5,)](flag, out)
    assert str(info.value).endswith(
        "  0 programs returned; 3 more never started (at most 2 run at once, as CTAs "
        "resident on the GPU)")


@tile.jit
def ping_pong_forever(flag_ptr):
    # Each program flips the flag and waits for the other to flip it back: memory keeps
    # changing, so no spin looks stuck, but neither ever leaves the loop.
    pid = tl.program_id(0)
    while tl.atomic_xchg(flag_ptr, pid) >= 0:
        pass


def test_programs_that_never_finish_but_keep_writing_hit_the_switch_limit(monkeypatch):
    monkeypatch.setattr(grid_module, "MAX_SWITCHES", 500)
    with pytest.raises(InterpreterError) as info:
        ping_pong_forever[(2,)](np.zeros(1, np.int32))
    assert str(info.value) == ("the programs of the grid switched more than 500 times at "
                               "atomics and volatile loads without finishing (a livelock?); "
                               "2 still run, 0 never started")
