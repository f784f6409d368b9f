"""Gluon kernels whose programs wait on each other run interleaved in the interpreter; a spin
that can never complete is a DeadlockError naming the line (interpreter/grid.py)."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from shared_codegen.errors import DeadlockError
from shared_codegen.interpreter.grid import SPIN_LIMIT


@gluon.jit
def reverse_chain_kernel(turn_ptr, out_ptr, STEP: gl.constexpr):
    pid = gl.program_id(0)
    while gl.atomic_add(turn_ptr, 0) != (gl.num_programs(0) - 1 - pid) * STEP:  # my turn?
        pass
    gl.store(out_ptr + pid, gl.atomic_add(turn_ptr, 1))


def test_programs_take_turns_in_reverse_order():
    turn, out = np.zeros(1, np.int32), np.full(4, -1, np.int32)
    reverse_chain_kernel[(4,)](turn, out, 1)
    np.testing.assert_array_equal(out, [3, 2, 1, 0])


def test_a_turn_that_never_comes_is_a_deadlock():
    # STEP=2: program 3 goes first (turn 0 -> 1), then every program waits for an even turn.
    turn, out = np.zeros(1, np.int32), np.full(4, -1, np.int32)
    with pytest.raises(DeadlockError) as info:
        reverse_chain_kernel[(4,)](turn, out, 2)
    with open(__file__) as f:
        line = next(i for i, text in enumerate(f, 1) if "# my turn?" in text)
    where = f"{__file__}:{line}"
    src = ("while gl.atomic_add(turn_ptr, 0) != (gl.num_programs(0) - 1 - pid) * STEP:  "
           "# my turn?")
    assert str(info.value) == "\n".join(
        [f"{where}: deadlock: a spin loop never completes: every running program has repeated "
         f"the same atomic or volatile load {SPIN_LIMIT} times with no store to global memory "
         f"in between"]
        + [part for pid in range(3) for part in
           (f"  program ({pid}, 0, 0) spins at {where}: an atomic that reads 1", f"      {src}")]
        + ["  1 program returned"])
    np.testing.assert_array_equal(out, [-1, -1, -1, 0])
