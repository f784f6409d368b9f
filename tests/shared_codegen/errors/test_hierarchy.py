"""One exception hierarchy, the same classes from `tile.*`, `gluon.*` and Triton's paths; the
older classes are its subclasses, so existing `except` clauses keep working; interpreter
reports are raised as DeadlockError / RaceError by their kind."""

import pickle

import numpy as np
import pytest
from error_kernels import FILE, line_of, read_before_wait_kernel, wait_forever_kernel

import gluon
import tile
from shared_codegen import errors
from shared_codegen.frontend.errors import ArgumentError as FrontendArgumentError
from shared_codegen.frontend.errors import CompilationError as FrontendCompilationError
from shared_codegen.interpreter.memory import InterpreterError as MemoryInterpreterError
from shared_codegen.ir.core import VerificationError
from shared_codegen.ir.passes import PassError
from shared_codegen.lowering.backend import BackendError
from shared_codegen.lowering.context import LoweringError
from shared_codegen.runtime.specialize import SpecializationError
from gluon.language._semantic import LayoutError
from tile.passes.layout_assignment import LayoutAssignmentError

NAMES = ["KernelError", "CompilationError", "ArgumentError", "OutOfResources",
         "InterpreterError", "DeadlockError", "RaceError"]


def test_both_languages_export_the_same_classes():
    for name in NAMES:
        assert getattr(tile, name) is getattr(gluon, name) is getattr(errors, name), name
    from tile.compiler.errors import CompilationError
    from tile.runtime.errors import OutOfResources

    assert CompilationError is errors.CompilationError
    assert OutOfResources is errors.OutOfResources


def test_every_error_is_a_kernel_error_and_the_old_names_are_subclasses():
    assert FrontendCompilationError is errors.CompilationError
    assert FrontendArgumentError is errors.ArgumentError
    assert MemoryInterpreterError is errors.InterpreterError
    for old in (VerificationError, PassError, LoweringError, BackendError,
                LayoutAssignmentError, LayoutError):
        assert issubclass(old, errors.CompilationError), old
    assert issubclass(SpecializationError, errors.ArgumentError)
    assert issubclass(errors.ArgumentError, TypeError)  # as Python's own argument errors
    # Their old bases stay, for `except RuntimeError` / `except ValueError` clauses.
    assert issubclass(PassError, RuntimeError) and issubclass(BackendError, RuntimeError)
    assert issubclass(LayoutAssignmentError, RuntimeError)
    assert issubclass(LayoutError, ValueError)
    for name in NAMES[1:]:
        assert issubclass(getattr(errors, name), errors.KernelError)
    for name in ("DeadlockError", "RaceError"):
        assert issubclass(getattr(errors, name), errors.InterpreterError)


def test_a_message_only_compile_error_reads_as_its_message():
    assert str(LoweringError("no lowering rule")) == "no lowering rule"
    assert str(PassError("coalesce", ValueError("bad"))) == "after pass 'coalesce': bad"


def test_a_wait_nobody_arrives_on_raises_a_deadlock_error_at_the_wait():
    with pytest.raises(tile.DeadlockError) as info:
        wait_forever_kernel[(1,)](np.zeros(1, np.int32))
    wait, alloc = line_of("# nobody arrives"), line_of("# the barrier")
    assert str(info.value) == (
        f"{FILE}:{wait}: deadlock: mbarrier.wait for phase 0 of the mbarrier allocated at "
        f"{FILE}:{alloc} can never return: the phase still lacks 1 of 1 arrivals; no async copy "
        f"in flight will arrive on it, and no other partition is running (program id (0, 0, 0))"
        f"\n    mbarrier.wait(bar, 0)  # nobody arrives")
    assert (info.value.file, info.value.line) == (FILE, wait)


def test_a_read_before_the_wait_raises_a_race_error_naming_both_lines():
    with pytest.raises(gluon.RaceError) as info:
        read_before_wait_kernel[(1,)](np.ones(128, np.float32), np.zeros(128, np.float32))
    read, copy = line_of("# read before the wait"), line_of("# the copy")
    assert str(info.value).startswith(
        f"{FILE}:{read}: race: local_load reads shared memory that the async copy at "
        f"{FILE}:{copy} may still be writing; wait for its group first")
    assert isinstance(info.value, tile.InterpreterError)


def test_errors_survive_pickling_with_their_fields():
    compile_error = errors.CompilationError("bad", "k.py", 3, 4, "    x = y")
    copy = pickle.loads(pickle.dumps(compile_error))
    assert (str(copy), copy.file, copy.line) == (str(compile_error), "k.py", 3)
    oor = errors.OutOfResources("k", "shared memory", 300000, 232448, "bytes",
                                "bytes a CTA can have on sm_90a")
    copy = pickle.loads(pickle.dumps(oor))
    assert (str(copy), copy.required, copy.limit) == (str(oor), 300000, 232448)
