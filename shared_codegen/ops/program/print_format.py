"""The text `tl.device_print` writes, shared by the GPU lowering (vprintf format strings) and
the interpreter (Python `%` formatting of the same specs), so both print identical lines.

One line per element, as Triton 3.6 prints them:

    pid (<x>, <y>, <z>) idx (<i0>, <i1>, ...)<prefix>[(operand <n>) ]<value>

The index fields are padded to the digits of each dimension's size; "(operand n) " appears
only when several values are printed; a scalar has `idx ()`. Floats print as `%f`, signed
integers as `%i`, unsigned and bool as `%u`, and with `hex=True` every value as its bits,
`0x` and one digit per nibble of the type.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

from shared_codegen.ir.types import IRType


def index_widths(shape: Sequence[int]) -> list[int]:
    return [math.ceil(math.log10(d)) if d > 0 else 0 for d in shape]


def value_spec(elem: IRType, hex: bool) -> str:
    """The printf conversion for one value of `elem` (C spelling, `ll` for 64 bits)."""
    if getattr(elem, "address_space", None) is not None:
        return "%p"
    bits = elem.bits
    if hex:
        return f"0x%0{bits // 4}{'ll' if bits > 32 else ''}x"
    if elem.is_floating():
        return "%f"
    length = "ll" if bits > 32 else ""
    return f"%{length}i" if elem.is_int_signed() and bits > 1 else f"%{length}u"


def line_format(prefix: str, widths: Sequence[int], spec: str, operand: int,
                operands: int) -> str:
    """The printf format of one element's line (without the newline)."""
    index = ", ".join(f"%{w}u" for w in widths)
    label = f"(operand {operand}) " if operands > 1 else ""
    return f"pid (%u, %u, %u) idx ({index}){escape(prefix)}{label}{spec}"


def program_format(prefix: str) -> str:
    """The line of a print without values."""
    return f"pid (%u, %u, %u){escape(prefix)}"


def escape(text: str) -> str:
    return text.replace("%", "%%")


def python_format(fmt: str) -> str:
    """The same format for Python's `%` operator."""
    # Python has no `ll` length and no %p (CUDA prints pointers as 0x-prefixed hex).
    return re.sub(r"(%[0-9]*)ll([iux])", r"\1\2", fmt).replace("%p", "0x%x")
