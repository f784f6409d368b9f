"""A numpy interpreter for the part of PTX that `inline_asm_elementwise` snippets use, so that
kernels with inline assembly run in the CPU interpreter.

The snippet runs once, vectorized: every register holds one raw bit pattern per pack of
elements (a uint64 array). Supported:

- `{ }` scopes, `.reg .<type> a, b<4>;` declarations, `@p` / `@!p` guards;
- `mov` (also packing `{lo, hi}` and unpacking into `{lo, hi}`), `selp`, `setp.<cmp>.<type>`
  (and `.and`/`.or`/`.xor` with a third predicate), `not`, `and`, `or`, `xor`, `shl`, `shr`,
  `cnot`, `popc`, `clz`, `brev`, `prmt.b32` (default mode), `lop3.b32`, `bfe`;
- `add`, `sub`, `mul` (`.lo`, `.hi`, `.wide`), `mad` / `fma`, `div`, `rem`, `min`, `max`,
  `neg`, `abs` on integer and f16/bf16/f32/f64 types (and f16x2/bf16x2/f32x2 lane by lane);
- `cvt` between the integer and float types (with `.rn`, `.rz`, `.rm`, `.rp`, `.rni`, `.rzi`,
  `.rmi`, `.rpi`, `.sat`), and two-lane `cvt.rn.f16x2.f32` / `cvt.rn.bf16x2.f32`;
- `ex2`, `lg2`, `rcp`, `sqrt`, `rsqrt`, `sin`, `cos`, `tanh` (`.approx` ones are computed
  to float32 accuracy, not bit-for-bit as the GPU's approximations).

Anything else (branches, memory, warp-level instructions, ...) raises `PtxUnsupported` naming
the instruction, which the op's interpreter rule reports as a kernel error.
"""

from __future__ import annotations

import re
from typing import Dict, List

import ml_dtypes
import numpy as np


class PtxUnsupported(Exception):
    pass


_FLOAT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}
_INT = {"s8": np.int8, "u8": np.uint8, "s16": np.int16, "u16": np.uint16, "b16": np.uint16,
        "s32": np.int32, "u32": np.uint32, "b32": np.uint32, "s64": np.int64,
        "u64": np.uint64, "b64": np.uint64, "b8": np.uint8, "pred": np.uint8}
_MASKS = {8: 0xFF, 16: 0xFFFF, 32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}
_ROUNDING = {"rn", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"}
_QUALIFIERS = {"approx", "ftz", "full", "sat", "lo", "hi", "wide", "sync", "aligned", "uni",
               "relu", "nan", "xorsign"} | _ROUNDING


PAIRS = ("f16x2", "bf16x2", "f32x2")  # two-lane float types, computed lane by lane


def type_width(t: str) -> int:
    if t in ("f16x2", "bf16x2"):
        return 32
    if t == "f32x2":
        return 64
    return int(re.sub(r"^[a-z]+", "", t))


def to_typed(bits: np.ndarray, t: str) -> np.ndarray:
    """Raw bits -> values of PTX type `t`."""
    width = type_width(t)
    raw = (bits & np.uint64(_MASKS[width])).astype(f"<u{width // 8}")
    if t in _FLOAT:
        return raw.view(_FLOAT[t])
    return raw.view(_INT[t])


def from_typed(values, t: str) -> np.ndarray:
    """Values -> raw bits of PTX type `t` (zero-extended into uint64)."""
    width = type_width(t)
    if t in _FLOAT:
        raw = np.asarray(values).astype(_FLOAT[t]).view(f"<u{width // 8}")
    else:
        raw = np.asarray(values).astype(_INT[t]).view(f"<u{width // 8}")
    return raw.astype(np.uint64)


def _int_div(a, b):
    """Integer division truncating toward zero (0 for a zero divisor, which PTX leaves
    unspecified)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _round(x, mode):
    mode = mode.rstrip("i")
    return {"rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil}[mode](x)


def _lanes(bits, t):
    """A two-lane type's lanes as float32 arrays (low lane first); f32x2 lanes as float64,
    so that one operation rounds once, to float32, when the lanes are joined (Blackwell's
    packed `add/sub/mul/fma.f32x2`)."""
    if t == "f32x2":
        return [to_typed(bits >> np.uint64(32 * k), "f32").astype(np.float64) for k in (0, 1)]
    half = "f16" if t == "f16x2" else "bf16"
    return [to_typed(bits >> np.uint64(16 * k), half).astype(np.float32) for k in (0, 1)]


def _join_lanes(lanes, t):
    lane, width = ("f32", 32) if t == "f32x2" else ("f16" if t == "f16x2" else "bf16", 16)
    lo, hi = (from_typed(v, lane) for v in lanes)
    return lo | (hi << np.uint64(width))


class PtxSubset:
    """Runs one snippet on arrays of operand bit patterns (module docstring)."""

    def __init__(self, asm: str, n: int):
        self.asm, self.n = asm, n
        self.regs: Dict[str, np.ndarray] = {}

    # ---- operands ------------------------------------------------------------------------
    def _imm(self, tok: str):
        tok = tok.strip()
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", tok):
            return np.full(self.n, int(tok[2:], 16), np.uint64), "bits"
        if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", tok):
            return np.full(self.n, int(tok[2:], 16), np.uint64), "bits"
        if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)[uU]?", tok):
            return int(tok.rstrip("uU"), 0), "int"
        if re.fullmatch(r"-?\d+\.\d*([eE][-+]?\d+)?", tok):
            return float(tok), "float"
        return None, None

    def read(self, tok: str, t: str) -> np.ndarray:
        """Operand `tok` as raw bits of type `t`'s width."""
        tok = tok.strip()
        if tok in self.regs:
            return self.regs[tok]
        value, kind = self._imm(tok)
        if kind == "bits":
            return value
        if kind is not None:
            if t in _FLOAT:
                return from_typed(np.full(self.n, value), t)
            return np.full(self.n, value & _MASKS[type_width(t) if t != "pred" else 8],
                           np.uint64)
        raise PtxUnsupported(f"operand {tok!r} is not a declared register, an asm operand "
                             f"or an immediate")

    def value(self, tok, t):
        if t in PAIRS:
            return _lanes(self.read(tok, t), t)
        return to_typed(self.read(tok, t), t)

    def write(self, tok: str, bits, guard) -> None:
        tok = tok.strip()
        if tok == "_":
            return
        bits = np.asarray(bits, np.uint64)
        if guard is not None:
            old = self.regs.get(tok, np.zeros(self.n, np.uint64))
            bits = np.where(guard, bits, old)
        self.regs[tok] = bits

    # ---- statements ----------------------------------------------------------------------
    def run(self) -> None:
        text = re.sub(r"//[^\n]*", "", self.asm)
        for stmt in text.split(";"):
            # Scope braces open or close statements; operand braces (`{lo, hi}`) follow an
            # opcode, so only leading ones are scopes.
            stmt = stmt.strip().lstrip("{} \t\n")
            if not stmt:
                continue
            try:
                self._statement(stmt)
            except PtxUnsupported:
                raise
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise PtxUnsupported(f"cannot run `{stmt}`: {exc}") from None

    def _statement(self, stmt: str) -> None:
        if stmt.startswith(".reg"):
            parts = stmt.split(None, 2)
            for name in parts[2].split(","):
                name = name.strip()
                m = re.fullmatch(r"(.*)<(\d+)>", name)
                names = [f"{m.group(1)}{i}" for i in range(int(m.group(2)))] if m else [name]
                for reg in names:
                    self.regs[reg] = np.zeros(self.n, np.uint64)
            return
        guard = None
        m = re.match(r"@(!?)(\S+)\s+(.*)", stmt, re.S)
        if m:
            pred = self.read(m.group(2), "pred") != 0
            guard = ~pred if m.group(1) else pred
            stmt = m.group(3)
        parts = stmt.split(None, 1)
        opcode, rest = parts[0], parts[1] if len(parts) > 1 else ""
        ops = [o.strip() for o in re.split(r",(?![^{]*})", rest)] if rest else []
        pieces = opcode.split(".")
        name, mods = pieces[0], pieces[1:]
        handler = getattr(self, f"_op_{name}", None)
        if handler is None:
            raise PtxUnsupported(f"`{opcode}` is not in the PTX subset the interpreter runs")
        handler(opcode, mods, ops, guard)

    @staticmethod
    def _types(mods):
        return [m for m in mods if m in _FLOAT or m in _INT or m in PAIRS]

    # ---- data movement -------------------------------------------------------------------
    def _op_mov(self, opcode, mods, ops, guard):
        t = self._types(mods)[-1]
        dst, src = ops
        if src.startswith("{"):  # pack lanes, low first
            parts = [p.strip() for p in src.strip("{}").split(",")]
            width = type_width(t) // len(parts)
            bits = np.zeros(self.n, np.uint64)
            for k, p in enumerate(parts):
                bits |= (self.read(p, f"b{width}") & np.uint64(_MASKS[width])) << \
                    np.uint64(width * k)
            self.write(dst, bits, guard)
        elif dst.startswith("{"):
            parts = [p.strip() for p in dst.strip("{}").split(",")]
            width = type_width(t) // len(parts)
            bits = self.read(src, t)
            for k, p in enumerate(parts):
                self.write(p, (bits >> np.uint64(width * k)) & np.uint64(_MASKS[width]), guard)
        else:
            self.write(dst, self.read(src, t) & np.uint64(_MASKS[type_width(t)]) if t != "pred"
                       else self.read(src, t), guard)

    def _op_selp(self, opcode, mods, ops, guard):
        t = self._types(mods)[-1]
        d, a, b, p = ops
        self.write(d, np.where(self.read(p, "pred") != 0, self.read(a, t), self.read(b, t)),
                   guard)

    _CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
            "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
            "hi": np.greater, "hs": np.greater_equal}

    def _op_setp(self, opcode, mods, ops, guard):
        cmp, t = mods[0], mods[-1]
        a, b = self.value(ops[1], t), self.value(ops[2], t)
        unordered = cmp.endswith("u") and cmp not in ("lu",)
        base = cmp[:-1] if unordered and cmp[:-1] in self._CMP else cmp
        if cmp == "num":
            res = ~(np.isnan(a) | np.isnan(b))
        elif cmp == "nan":
            res = np.isnan(a) | np.isnan(b)
        else:
            with np.errstate(invalid="ignore"):
                res = self._CMP[base](a, b)
            if t in _FLOAT:
                nan = np.isnan(a) | np.isnan(b)
                res = (res | nan) if unordered else (res & ~nan)
        if len(mods) > 2 and mods[1] in ("and", "or", "xor"):
            c = self.read(ops[3], "pred") != 0
            res = {"and": np.logical_and, "or": np.logical_or,
                   "xor": np.logical_xor}[mods[1]](res, c)
        dsts = ops[0].split("|")
        self.write(dsts[0], res.astype(np.uint64), guard)
        if len(dsts) > 1:
            self.write(dsts[1], (~res).astype(np.uint64), guard)

    # ---- bits ----------------------------------------------------------------------------
    def _bitwise(self, fn, mods, ops, guard):
        t = self._types(mods)[-1]
        mask = np.uint64(_MASKS[type_width(t)] if t != "pred" else 1)
        args = [self.read(o, t) for o in ops[1:]]
        self.write(ops[0], fn(*args) & mask, guard)

    def _op_and(self, opcode, mods, ops, guard):
        self._bitwise(np.bitwise_and, mods, ops, guard)

    def _op_or(self, opcode, mods, ops, guard):
        self._bitwise(np.bitwise_or, mods, ops, guard)

    def _op_xor(self, opcode, mods, ops, guard):
        self._bitwise(np.bitwise_xor, mods, ops, guard)

    def _op_not(self, opcode, mods, ops, guard):
        self._bitwise(np.bitwise_not, mods, ops, guard)

    def _op_cnot(self, opcode, mods, ops, guard):
        self._bitwise(lambda a: (a == 0).astype(np.uint64), mods, ops, guard)

    def _op_shl(self, opcode, mods, ops, guard):
        t = self._types(mods)[-1]
        width = type_width(t)
        a, s = self.read(ops[1], t), self.read(ops[2], "u32")
        out = np.where(s >= width, 0, a << np.minimum(s, 63)) & np.uint64(_MASKS[width])
        self.write(ops[0], out, guard)

    def _op_shr(self, opcode, mods, ops, guard):
        t = self._types(mods)[-1]
        width = type_width(t)
        s = np.minimum(self.read(ops[2], "u32"), width - 1 if t.startswith("s") else 63)
        if t.startswith("s"):
            out = from_typed(to_typed(self.read(ops[1], t), t).astype(np.int64) >> s.astype(
                np.int64), t)
        else:
            a = self.read(ops[1], t)
            out = np.where(self.read(ops[2], "u32") >= width, 0, a >> s)
        self.write(ops[0], out, guard)

    def _op_popc(self, opcode, mods, ops, guard):
        a = self.read(ops[1], mods[-1])
        self.write(ops[0], np.array([bin(int(x)).count("1") for x in a], np.uint64), guard)

    def _op_clz(self, opcode, mods, ops, guard):
        width = type_width(mods[-1])
        a = self.read(ops[1], mods[-1])
        self.write(ops[0], np.array([width - int(x).bit_length() for x in a], np.uint64), guard)

    def _op_brev(self, opcode, mods, ops, guard):
        width = type_width(mods[-1])
        a = self.read(ops[1], mods[-1])
        self.write(ops[0], np.array([int(f"{int(x):0{width}b}"[::-1], 2) for x in a],
                                    np.uint64), guard)

    def _op_prmt(self, opcode, mods, ops, guard):
        if len(mods) != 1:
            raise PtxUnsupported(f"`{opcode}`: only the default prmt mode is supported")
        a, b, c = (self.read(o, "b32") for o in ops[1:])
        pool = a | (b << np.uint64(32))
        out = np.zeros(self.n, np.uint64)
        for k in range(4):
            sel = (c >> np.uint64(4 * k)) & np.uint64(0xF)
            byte = (pool >> ((sel & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            byte = np.where(sel & np.uint64(8), np.where(byte & np.uint64(0x80), 0xFF, 0), byte)
            out |= byte.astype(np.uint64) << np.uint64(8 * k)
        self.write(ops[0], out, guard)

    def _op_lop3(self, opcode, mods, ops, guard):
        a, b, c = (self.read(o, "b32") for o in ops[1:4])
        lut = int(self._imm(ops[4])[0])
        out = np.zeros(self.n, np.uint64)
        for bit in range(8):
            if lut >> bit & 1:
                ta = a if bit & 4 else ~a
                tb = b if bit & 2 else ~b
                tc = c if bit & 1 else ~c
                out |= ta & tb & tc
        self.write(ops[0], out & np.uint64(0xFFFFFFFF), guard)

    def _op_bfe(self, opcode, mods, ops, guard):
        t = mods[-1]
        width = type_width(t)
        a = self.read(ops[1], t)
        pos = self.read(ops[2], "u32") & np.uint64(0xFF)
        length = self.read(ops[3], "u32") & np.uint64(0xFF)
        out = []
        for x, p, n in zip(a, pos, length):
            field = (int(x) >> int(p)) & ((1 << int(n)) - 1) if p < width else 0
            if t.startswith("s") and n and (field >> (int(n) - 1)) & 1:
                field |= _MASKS[width] ^ ((1 << int(n)) - 1)
            out.append(field & _MASKS[width])
        self.write(ops[0], np.array(out, np.uint64), guard)

    # ---- arithmetic ----------------------------------------------------------------------
    def _arith(self, fn, mods, ops, guard, nargs):
        t = self._types(mods)[-1]
        if t in PAIRS:
            lanes = [self.value(o, t) for o in ops[1:1 + nargs]]
            exact = np.float64 if t == "f32x2" else np.float32
            with np.errstate(all="ignore"):
                res = [np.asarray(fn(*(lane[k] for lane in lanes)), exact) for k in (0, 1)]
            self.write(ops[0], _join_lanes(res, t), guard)
            return
        if t in _FLOAT:
            args = [self.value(o, t).astype(np.float64 if t == "f64" else np.float32)
                    for o in ops[1:1 + nargs]]
            with np.errstate(all="ignore"):
                res = fn(*args)
            if "sat" in mods:
                res = np.clip(np.nan_to_num(res, nan=0.0), 0.0, 1.0)
            self.write(ops[0], from_typed(res, t), guard)
            return
        wide = "wide" in mods
        args = [self.value(o, t).astype(object) for o in ops[1:1 + nargs]]
        res = np.array([fn(*xs) for xs in zip(*args)], dtype=object) if self.n else \
            np.zeros(0, object)
        width = type_width(t) * (2 if wide else 1)
        if "hi" in mods:
            res = np.array([int(r) >> type_width(t) for r in res], dtype=object)
            width = type_width(t)
        self.write(ops[0], np.array([int(r) & _MASKS[width] for r in res], np.uint64), guard)

    def _op_add(self, opcode, mods, ops, guard):
        self._arith(lambda a, b: a + b, mods, ops, guard, 2)

    def _op_sub(self, opcode, mods, ops, guard):
        self._arith(lambda a, b: a - b, mods, ops, guard, 2)

    def _op_mul(self, opcode, mods, ops, guard):
        self._arith(lambda a, b: a * b, mods, ops, guard, 2)

    def _op_mad(self, opcode, mods, ops, guard):
        t = self._types(mods)[-1]
        if t in _FLOAT or t in PAIRS:
            self._op_fma(opcode, mods, ops, guard)
            return
        if "hi" in mods or "wide" in mods:
            # The product is wide; the addend adds to its kept part.
            width = type_width(t)
            a, b, c = (self.value(o, t).astype(object) for o in ops[1:4])
            shift = width if "hi" in mods else 0
            out_w = width if "hi" in mods else 2 * width
            c_t = self.value(ops[3], t if "hi" in mods else t[0] + str(2 * width))
            res = [((int(x) * int(y)) >> shift) + int(z) for x, y, z in zip(a, b, c_t)]
            self.write(ops[0], np.array([r & _MASKS[out_w] for r in res], np.uint64), guard)
            return
        self._arith(lambda a, b, c: a * b + c, mods, ops, guard, 3)

    def _op_fma(self, opcode, mods, ops, guard):
        t = self._types(mods)[-1]
        if t == "f32":  # one rounding: compute in float64, round once
            a, b, c = (self.value(o, t).astype(np.float64) for o in ops[1:4])
            res = a * b + c
            if "sat" in mods:
                res = np.clip(np.nan_to_num(res, nan=0.0), 0.0, 1.0)
            self.write(ops[0], from_typed(res, t), guard)
            return
        self._arith(lambda a, b, c: a * b + c, mods, ops, guard, 3)

    def _op_div(self, opcode, mods, ops, guard):
        t = self._types(mods)[-1]
        if t in _FLOAT:
            self._arith(lambda a, b: a / b, mods, ops, guard, 2)
            return
        self._arith(_int_div, mods, ops, guard, 2)

    def _op_rem(self, opcode, mods, ops, guard):
        self._arith(lambda a, b: 0 if b == 0 else a - _int_div(a, b) * b, mods, ops, guard, 2)

    def _op_min(self, opcode, mods, ops, guard):
        self._arith(lambda a, b: np.fmin(a, b) if isinstance(a, np.ndarray) else min(a, b),
                    mods, ops, guard, 2)

    def _op_max(self, opcode, mods, ops, guard):
        self._arith(lambda a, b: np.fmax(a, b) if isinstance(a, np.ndarray) else max(a, b),
                    mods, ops, guard, 2)

    def _op_neg(self, opcode, mods, ops, guard):
        self._arith(lambda a: -a, mods, ops, guard, 1)

    def _op_abs(self, opcode, mods, ops, guard):
        self._arith(abs, mods, ops, guard, 1)

    # ---- special functions ---------------------------------------------------------------
    def _special(self, fn, mods, ops, guard):
        self._arith(fn, mods, ops, guard, 1)

    def _op_ex2(self, opcode, mods, ops, guard):
        self._special(np.exp2, mods, ops, guard)

    def _op_lg2(self, opcode, mods, ops, guard):
        self._special(np.log2, mods, ops, guard)

    def _op_rcp(self, opcode, mods, ops, guard):
        self._special(lambda a: 1.0 / a, mods, ops, guard)

    def _op_sqrt(self, opcode, mods, ops, guard):
        self._special(np.sqrt, mods, ops, guard)

    def _op_rsqrt(self, opcode, mods, ops, guard):
        self._special(lambda a: 1.0 / np.sqrt(a), mods, ops, guard)

    def _op_sin(self, opcode, mods, ops, guard):
        self._special(np.sin, mods, ops, guard)

    def _op_cos(self, opcode, mods, ops, guard):
        self._special(np.cos, mods, ops, guard)

    def _op_tanh(self, opcode, mods, ops, guard):
        self._special(np.tanh, mods, ops, guard)

    # ---- conversions ---------------------------------------------------------------------
    def _op_cvt(self, opcode, mods, ops, guard):
        types = [m for m in mods if m in _FLOAT or m in _INT or m in ("f16x2", "bf16x2")]
        if len(types) != 2:
            raise PtxUnsupported(f"`{opcode}`: expected a destination and a source type")
        dt, st = types
        rnd = next((m for m in mods if m in _ROUNDING), None)
        if dt in ("f16x2", "bf16x2"):  # cvt.rn.f16x2.f32 d, hi, lo
            hi, lo = (self.value(o, st).astype(np.float32) for o in ops[1:3])
            self.write(ops[0], _join_lanes([lo, hi], dt), guard)
            return
        x = self.value(ops[1], st)
        if dt in _FLOAT:
            if st in _FLOAT:
                res = x.astype(np.float64)
                if rnd and rnd.endswith("i"):
                    res = _round(res, rnd)
            else:
                res = x.astype(np.float64)
            if "sat" in mods:
                res = np.clip(np.nan_to_num(res, nan=0.0), 0.0, 1.0)
            self.write(ops[0], from_typed(res, dt), guard)
            return
        info = np.iinfo(_INT[dt])
        if st in _FLOAT:
            v = _round(x.astype(np.float64), rnd or "rzi")
            v = np.nan_to_num(v, nan=0.0)
            v = np.clip(v, info.min, info.max)
            self.write(ops[0], from_typed(v.astype(np.int64) if info.min < 0 else
                                          v.astype(np.uint64), dt), guard)
            return
        v = x.astype(object)
        if "sat" in mods:
            v = np.array([min(max(int(e), info.min), info.max) for e in v], dtype=object)
        self.write(ops[0], np.array([int(e) & _MASKS[type_width(dt)] for e in v], np.uint64),
                   guard)


def run_ptx(asm: str, inputs: List[np.ndarray], num_outputs: int, n: int) -> List[np.ndarray]:
    """Run `asm` with `$0..$k-1` the outputs and the rest `inputs` (uint64 bit arrays); return
    the outputs' bits."""
    vm = PtxSubset(asm, n)
    names = [f"${i}" for i in range(num_outputs + len(inputs))]
    for name in names[:num_outputs]:
        vm.regs[name] = np.zeros(n, np.uint64)
    for name, bits in zip(names[num_outputs:], inputs):
        vm.regs[name] = np.asarray(bits, np.uint64)
    vm.run()
    return [vm.regs[name] for name in names[:num_outputs]]


__all__ = ["PtxSubset", "PtxUnsupported", "run_ptx", "to_typed", "from_typed", "type_width"]
