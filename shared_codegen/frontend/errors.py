"""Compile errors that point at the user's kernel source."""

from __future__ import annotations

from typing import Optional


class CompilationError(Exception):
    """An error in kernel source: names the file, line and the source line itself.

        kernel.py:12: unsupported Python construct: `break`
            for i in range(n): break
                               ^
    """

    def __init__(self, message: str, file: str = "<unknown>", line: int = 0, col: int = 0,
                 source_line: str = "", cause: Optional[BaseException] = None):
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.source_line = source_line
        self.cause = cause
        super().__init__(self._format())

    def _format(self) -> str:
        text = f"{self.file}:{self.line}: {self.message}"
        if self.source_line:
            stripped = self.source_line.rstrip()
            indent = len(stripped) - len(stripped.lstrip())
            caret = " " * max(0, self.col - indent)
            text += f"\n    {stripped.strip()}\n    {caret}^"
        return text


class ArgumentError(TypeError):
    """Bad arguments at launch: names the parameter and the expected and actual values."""
