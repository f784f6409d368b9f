"""The 16-lane `tcgen05.ld` / `tcgen05.st` shapes: `16x64b`, `16x128b`, `16x256b`.

PTX ISA "tcgen05 Matrix fragments" (the .16x64b / .16x128b / .16x256b figures): one message
moves 16 TMEM lanes of the warp's quadrant (the address's lane field picks which 16) and
`.x{N}` repetitions of a 64-, 128- or 256-bit wide column block. Thread `l` receives, in its
register `j` of the message, TMEM (row, 32-bit column) relative to the address:

    16x64b   (l//4 + 8*(l%2),      (l//2)%2 + 2*j)                    1 register a repetition
    16x128b  (l//4 + 8*(j%2),      l%4 + 4*(j//2))                    2
    16x256b  (l//4 + 8*((j//2)%2), j%2 + 2*(l%4) + 8*(j//4))          4

`plan_messages` finds, for a register layout (`get_tmem_reg_layout(..., instr_variant=...)`
gives them) and a tensor-memory view, the messages that move every register without data
exchange, and checks every (register, lane, warp) against the table above: a layout that is
not exactly one of these shapes is a ValueError. `lowering.py` emits the messages (the
32x32b and 16x32bx2 shapes are planned there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from shared_codegen.layouts import to_linear_layout
from shared_codegen.ops.tensor_memory.definition import cell_map

# shape -> (32-bit columns of one repetition, registers of one repetition)
SHAPES = {"16x64b": (2, 1), "16x128b": (4, 2), "16x256b": (8, 4)}
MAX_REGISTERS = 32  # per message; .x128 exists, 32 keeps the inline asm small


def atom_cells(shape: str, lanes: np.ndarray, regs: np.ndarray):
    """(row, column) of register `regs` of thread `lanes` in one `shape` message (arrays
    broadcast)."""
    if shape == "16x64b":
        return lanes // 4 + 8 * (lanes % 2), (lanes // 2) % 2 + 2 * regs
    if shape == "16x128b":
        return lanes // 4 + 8 * (regs % 2), lanes % 4 + 4 * (regs // 2)
    return lanes // 4 + 8 * ((regs // 2) % 2), regs % 2 + 2 * (lanes % 4) + 8 * (regs // 4)


@dataclass(frozen=True)
class Message:
    """One tcgen05.ld/st: `shape`.x`reps` at (row0 lanes, col0 columns) from the thread's
    address; `words[j]` = {part: register} for the message's register j (the 16- or 8-bit
    parts of a 32-bit word; replicated registers listed once)."""
    shape: str
    row0: int
    col0: int
    reps: int
    words: Tuple[Tuple[Tuple[int, int], ...], ...]
    split: int = 0  # 16x32bx2's immediate half offset (0: none)


@dataclass(frozen=True)
class MessagePlan:
    messages: Tuple[Message, ...]
    warp_offsets: Tuple[Tuple[int, int], ...]  # per warp bit past the first two: (rows, cols)
    reg_cells: Tuple[Tuple[int, int, int], ...]  # per register: (row, column, part), warp 0
    bits: int


def _cells(ll, lanes, units, per, warp: int):
    """(rows, cols, parts) [registers, 32 lanes] of warp `warp`."""
    n_reg = ll.in_dim_size("register")
    r, l = np.meshgrid(np.arange(n_reg), np.arange(32), indexing="ij")
    inputs = {"register": r, "lane": l, "warp": np.full_like(r, warp)}
    out = ll.apply_array(inputs)
    d0, d1 = out["dim0"], out["dim1"]
    return lanes[d0, d1], units[d0, d1] // per, units[d0, d1] % per


def plan_messages(reg_layout, mem_ty, shape: str) -> MessagePlan:
    """The `shape` messages moving a [M, N] view of `mem_ty` in `reg_layout` (ValueError,
    in the user's terms, when the layout is not that shape's)."""
    dims = tuple(mem_ty.shape)
    bits = mem_ty.element.bits
    per = 32 // bits
    ll = to_linear_layout(reg_layout, list(dims))
    lanes, units, _ = cell_map(mem_ty.layout, dims, bits)
    wrong = ValueError(f"the register layout {reg_layout!r} is not the tcgen05.ld/st {shape} "
                       f"layout of this tensor memory; use get_tmem_reg_layout(..., "
                       f"instr_variant='{shape}')")
    rows, cols, parts = _cells(ll, lanes, units, per, 0)
    warps = ll.in_dim_size("warp")
    if warps < 4 or rows.max() >= 32:
        raise wrong
    offsets = []
    for bit in range(warps.bit_length() - 1):
        w = 1 << bit
        w_rows, w_cols, w_parts = _cells(ll, lanes, units, per, w)
        d_rows, d_cols = w_rows - rows - 32 * (w % 4), w_cols - cols
        if not (np.all(w_parts == parts) and np.all(d_rows == d_rows.flat[0]) and
                np.all(d_cols == d_cols.flat[0])):
            raise wrong
        offset = (int(d_rows.flat[0]), int(d_cols.flat[0]))
        if (bit < 2 and offset != (0, 0)) or offset[0] not in (0, 16):
            raise wrong
        if bit >= 2:
            offsets.append(offset)
    width, k = SHAPES[shape]
    zero = np.zeros(k, dtype=np.int64)
    origin_rows, origin_cols = atom_cells(shape, zero, np.arange(k))
    position = {(int(a), int(b)): j for j, (a, b) in enumerate(zip(origin_rows, origin_cols))}
    reps: Dict[Tuple[int, int], List[Dict[int, int]]] = {}
    reg_pos = []
    for reg in range(rows.shape[0]):
        row, col, part = int(rows[reg, 0]), int(cols[reg, 0]), int(parts[reg, 0])
        key = (row & 16, col - col % width)
        j = position.get((row & 15, col % width))
        if j is None:
            raise wrong
        reps.setdefault(key, [dict() for _ in range(k)])[j].setdefault(part, reg)
        reg_pos.append((key, j))
    # Every thread's register must be where the hardware puts it.
    lane_ids = np.arange(32)[None, :]
    js = np.array([j for _, j in reg_pos])[:, None]
    want_rows, want_cols = atom_cells(shape, lane_ids, js)
    key_rows = np.array([key[0] for key, _ in reg_pos])[:, None]
    key_cols = np.array([key[1] for key, _ in reg_pos])[:, None]
    if not (np.array_equal(rows, key_rows + want_rows) and
            np.array_equal(cols, key_cols + want_cols) and np.all(parts == parts[:, :1])):
        raise wrong
    if any(not word for words in reps.values() for word in words):
        raise wrong  # a message would move (and a store overwrite) cells the view lacks
    messages = []
    keys = sorted(reps)
    i = 0
    while i < len(keys):
        n = 1
        while (i + n < len(keys) and keys[i + n] == (keys[i][0], keys[i][1] + n * width)
               and (n + 1) * k <= MAX_REGISTERS):
            n += 1
        n = 1 << (n.bit_length() - 1)
        words = tuple(tuple(sorted(word.items())) for key in keys[i:i + n]
                      for word in reps[key])
        messages.append(Message(shape, keys[i][0], keys[i][1], n, words))
        i += n
    cells = tuple((int(rows[r, 0]), int(cols[r, 0]), int(parts[r, 0]))
                  for r in range(rows.shape[0]))
    return MessagePlan(tuple(messages), tuple(offsets), cells, bits)


__all__ = ["plan_messages", "MessagePlan", "Message", "SHAPES", "atom_cells"]
