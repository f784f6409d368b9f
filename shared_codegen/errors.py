"""The exceptions a kernel author can catch, shared by both languages (`tile.*`, `gluon.*`).

    KernelError                    anything this package raises about a kernel
    ├── CompilationError           the kernel cannot be compiled (names file, line, source line)
    │     internal classes subclass it: VerificationError, PassError, LoweringError,
    │     BackendError, LayoutAssignmentError, gluon's LayoutError
    │     └── SourceUnavailableError (ValueError)  a @jit function whose source Python
    │                                 cannot read (defined through exec() or stdin)
    ├── ArgumentError (TypeError)  bad launch arguments or options (names kernel and argument)
    │     SpecializationError subclasses it
    ├── OutOfResources             shared memory, tensor memory or registers over the limit
    ├── InterpreterError           the CPU interpreter found the kernel doing something invalid
    │     ├── DeadlockError        every waiter blocked forever (mbarrier, warp_specialize)
    │     └── RaceError            an access unordered with an asynchronous one
    └── DeviceCheckError           a debug-mode GPU launch caught the kernel (debug=True)
          ├── DeviceOutOfBoundsError  a global load or store outside its argument
          └── DeviceDeadlockError  an mbarrier wait that did not complete in its budget

Names follow Triton 3.6 where it has them (`triton.compiler.errors.CompilationError`,
`triton.runtime.errors.OutOfResources`). This module imports nothing from the package, so
every layer (IR, lowering, runtime, interpreter, frontends) may subclass from it.
"""

from __future__ import annotations

from typing import Optional


class KernelError(Exception):
    """Base of every error this package raises about a kernel."""


class CompilationError(KernelError):
    """An error in kernel source: names the file, line and the source line itself.

        kernel.py:12: unsupported Python construct: `break`
            for i in range(n): break
                               ^

    Subclasses raised below the frontend (verifier, passes, lowering, backend) pass only a
    message; `file` is then None and the message stands alone."""

    def __init__(self, message: str, file: Optional[str] = None, line: int = 0, col: int = 0,
                 source_line: str = "", cause: Optional[BaseException] = None):
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.source_line = source_line
        self.cause = cause
        super().__init__(self._format())

    def _format(self) -> str:
        if self.file is None:
            return self.message
        text = f"{self.file}:{self.line}: {self.message}"
        if self.source_line:
            stripped = self.source_line.rstrip()
            indent = len(stripped) - len(stripped.lstrip())
            caret = " " * max(0, self.col - indent)
            text += f"\n    {stripped.strip()}\n    {caret}^"
        return text

    def __reduce__(self):
        # Rebuild from the fields (not from `args`, which holds the formatted text), so the
        # error survives pickling (multiprocessing workers).
        return (_rebuild, (type(self), self.__dict__, self.args))


class SourceUnavailableError(CompilationError, ValueError):
    """A @jit function whose Python source cannot be read (the compiler parses it). A
    ValueError too, as Triton 3.6 raises one for such functions."""


class ArgumentError(KernelError, TypeError):
    """Bad arguments at launch: names the kernel, the parameter and the expected and actual
    values. A TypeError too, as Python's own argument errors are."""


class OutOfResources(KernelError):
    """A kernel needs more of a per-CTA resource than the target has.

    `kernel`, `resource` ("shared memory", "tensor memory", "registers"), `required` and
    `limit` (numbers, in `unit`) are attributes; the message says them in words. Raised while
    compiling (the target's table) and before a launch (the device's own limit)."""

    def __init__(self, kernel: str, resource: str, required: int, limit: int, unit: str,
                 where: str, detail: str = ""):
        self.kernel = kernel
        self.resource = resource
        self.required = required
        self.limit = limit
        self.unit = unit
        self.where = where
        self.detail = detail
        # "768 columns of tensor memory", but "131072 registers" (the resource is its unit).
        amount = resource if resource.split()[0] == unit else f"{unit} of {resource}"
        text = f"kernel `{kernel}` needs {required} {amount}, more than the {limit} {where}"
        super().__init__(text + (f" ({detail})" if detail else ""))

    def __reduce__(self):
        return (_rebuild, (type(self), self.__dict__, self.args))


class InterpreterError(KernelError):
    """A kernel did something invalid while interpreted (out-of-bounds access, assertion).
    `file` and `line` locate the kernel line when the report has one (else None, 0)."""

    file: Optional[str] = None
    line: int = 0


class DeadlockError(InterpreterError):
    """Every waiter of a program is blocked and nothing can release them."""


class RaceError(InterpreterError):
    """An access to memory that an asynchronous operation still reads or writes, with no
    wait in between."""


class DeviceCheckError(KernelError):
    """A check of a debug-mode GPU launch failed (shared_codegen/runtime/debug_mode.py).
    `record` holds the decoded fields of the device's record (kind, file, line, program,
    thread, partition, and the offset and argument or the barrier and phase)."""

    def __init__(self, message: str, record: Optional[dict] = None):
        self.record = dict(record or {})
        self.file = self.record.get("file")
        self.line = self.record.get("line", 0)
        super().__init__(message)

    def __reduce__(self):
        return (_rebuild, (type(self), self.__dict__, self.args))


class DeviceOutOfBoundsError(DeviceCheckError):
    """A global load or store of a debug-mode launch fell outside the argument it came from
    (the access was not performed)."""


class DeviceDeadlockError(DeviceCheckError):
    """An mbarrier wait of a debug-mode launch did not complete within its time budget; the
    waiting threads gave up and the kernel ended."""


# Interpreter reports are worded "race: ..." and "deadlock: ..." (ops/*/interpreter rules):
# the word picks the class, so every rule's report is catchable by kind without each rule
# naming a class.
_REPORT_KINDS = (("race:", RaceError), ("deadlock:", DeadlockError))


def interpreter_error_class(message: str) -> type:
    """The InterpreterError subclass of an interpreter report, from its leading word."""
    for prefix, cls in _REPORT_KINDS:
        if message.startswith(prefix):
            return cls
    return InterpreterError


def _rebuild(cls, state, args):
    error = cls.__new__(cls)
    error.__dict__.update(state)
    error.args = args
    return error


class PerformanceWarning(UserWarning):
    """ptxas compiled the kernel, but said the code it made is slower than the PTX asks for
    (its "Potential Performance Loss" notes, e.g. every wgmma serialized)."""


__all__ = ["PerformanceWarning", "KernelError", "CompilationError", "SourceUnavailableError",
           "ArgumentError", "OutOfResources", "InterpreterError", "DeadlockError", "RaceError",
           "DeviceCheckError", "DeviceOutOfBoundsError", "DeviceDeadlockError",
           "interpreter_error_class"]
