"""The tile language's semantic layer: what each operator and builtin means in IR.

The code generator hands a `TileSemantic` to every builtin as `_semantic`. It owns Triton 3.6's
typing rules (`computation_type_impl` in triton/language/semantic.py): how a Python number
mixes with a tensor, how integers promote, when `/` and `%` go to fp32, how pointers offset;
and numpy-style broadcasting. It builds ops only through the op modules' `build` functions,
and every tensor it makes has `layout=None`: the tile DSL leaves layouts to `tile/passes`.

Memory and atomics live in `_memory.py` (a mixin), reductions and scans at the end here.
"""

from __future__ import annotations

from typing import Callable, List, Sequence

from shared_codegen.frontend import missing_names
from shared_codegen.frontend.values import is_builtin, tensor, wrap
from shared_codegen.ir.types import (IRType, ScalarType, TensorType, bfloat16, float16, float32,
                                     float64, int1, int32, int64, uint32, uint64)
from shared_codegen.ops.arith.definition import (BITCAST, FLOAT_COMPARE, FP_TO_FP, INT_COMPARE,
                                                 AddPtrOp, BinaryOp, CastOp, CompareOp,
                                                 ConstantOp, SelectOp, cast_op_name,
                                                 operator_op_name)
from shared_codegen.ops.control.definition import COMBINE_RETURN, YieldOp
from shared_codegen.ops.program.definition import (PROGRAM_ID, AssertOp, AssumeOp, PrintOp,
                                                   ProgramIdOp)
from shared_codegen.ops.reduction.definition import ReduceOp, ScanOp
from shared_codegen.ops.tensor.definition import (BroadcastOp, ExpandDimsOp, MakeRangeOp, ReshapeOp,
                                                  SplatOp, TransOp)
from tile.language import _types as T
from tile.language._memory import MemorySemantic
from tile.language._movement import MovementSemantic

_SYMBOL = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
    "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>",
    "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
    "logical_and": "and", "logical_or": "or",
}
_BITWISE_NAME = {"and": "bitwise and", "or": "bitwise or", "xor": "bitwise xor",
                 "lshift": "left shift", "rshift": "right shift"}
_CMP_FLOAT = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_CMP_INT = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


class TileSemantic(MovementSemantic, MemorySemantic):
    def __init__(self, builder, codegen=None):
        self.builder = builder
        self.codegen = codegen

    # ---- wrapping and constants ---------------------------------------------------------
    def make_tensor(self, value) -> tensor:
        return wrap(value, value.type)

    def scalar_constant(self, value, dtype: ScalarType) -> tensor:
        return self.make_tensor(ConstantOp.build(self.builder, T.constant_value(value, dtype),
                                                 dtype))

    def to_tensor(self, x, like=None) -> tensor:
        """Materialize a Python value. With `like` (a tensor or a dtype), the constant takes
        that type (and, for a tensor, its shape); otherwise Triton's rules pick the type:
        bool -> int1; int -> int32, uint32, int64 or uint64, the first that holds it;
        float -> fp32 (fp64 when its magnitude is outside fp32's normal range)."""
        x = T.plain_number(x)
        if isinstance(x, tensor):
            return x
        if like is not None:
            if not T.is_number(x):
                raise TypeError(f"cannot convert {x!r} of type {type(x).__name__} to a tensor")
            ty = like.type if isinstance(like, tensor) else like
            elem = ty.element if isinstance(ty, TensorType) else ty
            value = self.scalar_constant(x, elem)
            return self._broadcast_to(value, list(ty.shape)) if isinstance(ty, TensorType) \
                else value
        return self.scalar_constant(x, self.literal_type(x))

    @classmethod
    def literal_type(cls, x) -> ScalarType:
        """The dtype Triton gives a Python number (without building anything)."""
        if isinstance(x, bool):
            return int1
        if isinstance(x, int):
            return cls._int_literal_type(x)
        if isinstance(x, float):
            ax = abs(x)
            fits = ax == 0.0 or x != x or ax == float("inf") or \
                2.0 ** -126 <= ax <= (2 - 2.0 ** -23) * 2.0 ** 127
            return float32 if fits else float64
        raise TypeError(f"cannot convert {x!r} of type {type(x).__name__} to a tensor")

    @staticmethod
    def _int_literal_type(x: int) -> ScalarType:
        if -2 ** 31 <= x < 2 ** 31:
            return int32
        if 2 ** 31 <= x < 2 ** 32:
            return uint32
        if -2 ** 63 <= x < 2 ** 63:
            return int64
        if 2 ** 63 <= x < 2 ** 64:
            return uint64
        raise ValueError(f"integer {x} does not fit in 64 bits")

    def _operand(self, x, what="operand") -> tensor:
        if isinstance(x, tensor):
            return x
        if T.is_number(x):
            return self.to_tensor(x)
        raise TypeError(f"{what} must be a tensor or a number, got {T.describe(x)}")

    # ---- type promotion (Triton's computation_type_impl) --------------------------------
    @staticmethod
    def integer_promote(a: ScalarType, b: ScalarType) -> ScalarType:
        # C's usual arithmetic conversions: the unsigned type wins at equal or higher rank.
        sa, sb = T.is_signed(a), T.is_signed(b)
        if sa == sb:
            return a if a.bits > b.bits else b
        if not sa:
            return a if a.bits >= b.bits else b
        return b if b.bits >= a.bits else a

    def computation_type(self, a: ScalarType, a_is_number: bool, b: ScalarType,
                         b_is_number: bool, div_or_mod: bool, sym: str = "") -> ScalarType:
        # A Python number of a lower or equal kind (bool < int < float) does not take part in
        # promotion, like PyTorch: `x_fp16 * 2.0` stays fp16.
        if a_is_number != b_is_number:
            num, ten = (a, b) if a_is_number else (b, a)
            if T.kind(num) <= T.kind(ten):
                # PTX has no fp16/bf16 division or remainder.
                if div_or_mod and ten in (float16, bfloat16):
                    return float32
                return ten
        if a == float64 or b == float64:
            return float64
        if a == float32 or b == float32:
            return float32
        if a == float16 or b == float16:
            return float32 if div_or_mod else float16
        if a == bfloat16 and b == bfloat16:
            return float32 if div_or_mod else bfloat16
        if a == bfloat16 or b == bfloat16:
            return float32
        if a.is_fp8() and b.is_fp8():
            return a if a == b else float16
        if not a.is_int() or not b.is_int():
            raise TypeError(f"cannot combine {a} and {b} with {sym or 'an arithmetic op'}; "
                            "cast one of them first")
        if div_or_mod and T.is_signed(a) != T.is_signed(b):
            raise TypeError(f"cannot use {sym or '/, // or %'} with {a} and {b} because they "
                            "have different signedness; cast them to the same signedness")
        return self.integer_promote(a, b)

    def _check_ptr(self, a: IRType, b: IRType, allowed: bool, sym: str, a_first: bool):
        if not T.is_ptr(a):
            return
        names = (T.type_name(a), T.type_name(b)) if a_first else (T.type_name(b), T.type_name(a))
        if not allowed:
            raise TypeError(f"unsupported operand types for {sym}: {names[0]} and {names[1]}")
        if T.is_ptr(b) and a != b:
            raise TypeError(f"unsupported operand types for {sym}: {names[0]} and {names[1]} "
                            "(pointers to different types)")
        if T.is_float(b):
            raise TypeError(f"cannot offset a pointer by a float: {names[0]} {sym} {names[1]}")

    def binary_operands(self, lhs, rhs, allow_lhs_ptr=False, allow_rhs_ptr=False,
                        arithmetic=True, div_or_mod=False, sym=""):
        """Promote both operands to one dtype (unless a pointer is involved) and broadcast
        them to one shape (Triton's `binary_op_type_checking_impl`)."""
        lhs, rhs = T.plain_number(lhs), T.plain_number(rhs)
        l_num, r_num = T.is_number(lhs), T.is_number(rhs)
        # Numbers are typed without being built, then built once at their final type.
        a = None if l_num else self._operand(lhs)
        b = None if r_num else self._operand(rhs)
        at = self.literal_type(lhs) if l_num else a.dtype
        bt = self.literal_type(rhs) if r_num else b.dtype
        self._check_ptr(at, bt, allow_lhs_ptr, sym, True)
        self._check_ptr(bt, at, allow_rhs_ptr, sym, False)
        if arithmetic and not T.is_ptr(at) and not T.is_ptr(bt):
            ret = self.computation_type(at, l_num, bt, r_num, div_or_mod, sym)
            for value, is_num in ((lhs, l_num), (rhs, r_num)):
                if is_num and ret.is_int():
                    self._check_int_literal(int(value), ret)
            a = self.scalar_constant(lhs, ret) if l_num else self.cast(a, ret)
            b = self.scalar_constant(rhs, ret) if r_num else self.cast(b, ret)
        else:
            a = self.to_tensor(lhs) if l_num else a
            b = self.to_tensor(rhs) if r_num else b
        return self._broadcast_pair(a, b)

    @staticmethod
    def _check_int_literal(value: int, ty: ScalarType):
        lo, hi = T.int_range(ty)
        if value < 0 and T.is_unsigned(ty):
            raise ValueError(f"cannot combine the negative number {value} with an unsigned "
                             f"{ty} tensor; cast one of them explicitly")
        if not lo <= value <= hi:
            raise ValueError(f"number {value} is out of range for type {ty} "
                             f"([{lo}, {hi}])")

    # ---- binary operators -----------------------------------------------------------------
    def binary(self, op: str, lhs, rhs) -> tensor:
        """`lhs <op> rhs` where at least one side is a tensor."""
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            # Triton turns the Python side of a comparison into a tensor first, so it takes
            # part in promotion: `x_fp16 < 0.5` compares in fp32.
            return self.compare(op, self._operand(lhs), self._operand(rhs))
        if op == "add":
            return self.add(lhs, rhs)
        if op == "sub":
            return self.sub(lhs, rhs)
        if op == "mul":
            a, b = self.binary_operands(lhs, rhs, sym="*")
            return self._arith("mul", a, b)
        if op == "truediv":
            return self.truediv(lhs, rhs)
        if op == "floordiv":
            return self.floordiv(lhs, rhs)
        if op == "mod":
            return self.mod(lhs, rhs)
        if op in _BITWISE_NAME:
            return self.bitwise(op, lhs, rhs)
        if op in ("logical_and", "logical_or"):
            a = self.cast(self._operand(lhs), int1)
            b = self.cast(self._operand(rhs), int1)
            return self.bitwise("and" if op == "logical_and" else "or", a, b)
        raise ValueError(f"unknown binary operator {op!r}")

    def _arith(self, op: str, a: tensor, b: tensor) -> tensor:
        """An elementwise op on operands of one (non-pointer) dtype and shape."""
        ty = a.dtype
        name = operator_op_name(op, ty.is_floating(), T.is_signed(ty))
        return self.make_tensor(BinaryOp.build(self.builder, name, a.handle, b.handle))

    def add(self, lhs, rhs) -> tensor:
        a, b = self.binary_operands(lhs, rhs, True, True, sym="+")
        if a.is_ptr() and b.is_ptr():
            raise TypeError(f"cannot add pointers together: {T.type_name(a.dtype)} + "
                            f"{T.type_name(b.dtype)}")
        if b.is_ptr():
            a, b = b, a
        if a.is_ptr():
            return self._addptr(a, b)
        return self._arith("add", a, b)

    def _addptr(self, ptr: tensor, offset: tensor) -> tensor:
        if T.is_unsigned(offset.dtype) and offset.dtype.bits < 64:
            # tt.addptr treats the offset as signed: zero-extend unsigned offsets first.
            offset = self.cast(offset, int64)
        return self.make_tensor(AddPtrOp.build(self.builder, ptr.handle, offset.handle))

    def sub(self, lhs, rhs) -> tensor:
        a, b = self.binary_operands(lhs, rhs, True, False, sym="-")
        if a.is_ptr():
            return self._addptr(a, self.unary("neg", b))
        return self._arith("sub", a, b)

    def truediv(self, lhs, rhs) -> tensor:
        a, b = self.binary_operands(lhs, rhs, div_or_mod=True, sym="/")
        if a.dtype.is_int():  # int / int is true division in fp32
            a, b = self.cast(a, float32), self.cast(b, float32)
        return self._arith("truediv", a, b)

    def floordiv(self, lhs, rhs) -> tensor:
        a, b = self.binary_operands(lhs, rhs, div_or_mod=True, sym="//")
        if not a.dtype.is_int():
            raise TypeError(f"floor division (//) needs integer operands, got {a.dtype}; "
                            "use / and tl.floor for floats")
        # Truncates toward zero (C and PTX semantics), as Triton does.
        return self._arith("floordiv", a, b)

    def mod(self, lhs, rhs) -> tensor:
        a, b = self.binary_operands(lhs, rhs, div_or_mod=True, sym="%")
        # Float remainder has the sign of the dividend (C's fmod), as Triton's `frem`.
        return self._arith("mod", a, b)

    def bitwise(self, op: str, lhs, rhs) -> tensor:
        sym = _SYMBOL[op]
        a, b = self._operand(lhs), self._operand(rhs)
        bad = []
        for t in (a, b):
            if not T.is_int(t.dtype) and T.type_name(t.dtype) not in bad:
                bad.append(T.type_name(t.dtype))
        if bad:
            raise TypeError(f"{_BITWISE_NAME[op]} ({sym}) needs integer operands, got "
                            f"{' and '.join(bad)}")
        # Shift direction follows the tensor operand's signedness, like Triton's __rshift__.
        signed = T.is_signed((lhs if isinstance(lhs, tensor) else b).dtype)
        a, b = self.binary_operands(lhs, rhs, sym=sym)
        if op == "rshift":
            op = "rshift_s" if signed else "rshift_u"
        return self._arith(op, a, b)

    def compare(self, op: str, a: tensor, b: tensor) -> tensor:
        sym = _SYMBOL[op]
        if a.is_ptr() or b.is_ptr():
            # An extension over Triton (which rejects pointer comparisons): compare addresses.
            if a.dtype != b.dtype:
                raise TypeError(f"unsupported operand types for {sym}: "
                                f"{T.type_name(a.dtype)} and {T.type_name(b.dtype)}")
            a, b = self._broadcast_pair(self.cast(a, int64), self.cast(b, int64))
            pred = {"eq": "eq", "ne": "ne"}.get(op, "u" + _CMP_INT.get(op, ""))
            return self.make_tensor(CompareOp.build(self.builder, INT_COMPARE, pred, a.handle,
                                                    b.handle))
        a, b = self.binary_operands(a, b, sym=sym)
        ty = a.dtype
        if ty.is_floating():
            name, pred = FLOAT_COMPARE, _CMP_FLOAT[op]
        elif op in ("eq", "ne"):
            name, pred = INT_COMPARE, op
        else:
            name, pred = INT_COMPARE, ("s" if T.is_signed(ty) else "u") + _CMP_INT[op]
        return self.make_tensor(CompareOp.build(self.builder, name, pred, a.handle, b.handle))

    # ---- unary operators ------------------------------------------------------------------
    def unary(self, op: str, x) -> tensor:
        if T.is_number(x):
            x = self.to_tensor(x)
        if op == "pos":
            return x
        ty = x.dtype
        if op == "neg":
            if T.is_ptr(ty):
                raise TypeError(f"unary minus (-) needs a number, got {T.type_name(ty)}")
            zero = self.scalar_constant(0, ty)
            return self._arith("sub", *self._broadcast_pair(zero, x))
        if op == "invert":
            if not T.is_int(ty):
                raise TypeError(f"bitwise not (~) needs an integer operand, got "
                                f"{T.type_name(ty)}")
            ones = self.scalar_constant(-1, ty)
            return self._arith("xor", *self._broadcast_pair(x, ones))
        if op == "not":
            # Triton only accepts booleans; `not x` on numbers means `x == 0` here, as in Python.
            return self.unary("invert", self.cast(x, int1))
        raise ValueError(f"unknown unary operator {op!r}")

    def to_condition(self, x):
        """The i1 scalar IR value an `if`/`while` tests: nonzero means true."""
        x = T.plain_number(x)
        if x is None or T.is_number(x):
            return ConstantOp.build(self.builder, bool(x), int1)
        if not isinstance(x, tensor):
            raise TypeError(f"condition must be a scalar tensor or a number, got {T.describe(x)}")
        if x.is_block():
            raise TypeError(f"condition must be a scalar, got {x.type}")
        return self.cast(x, int1).handle

    def where(self, cond, a, b) -> tensor:
        cond = self._operand(cond, "condition")
        cond = self.cast(cond, int1)
        a, b = self.binary_operands(a, b, True, True, sym="tl.where")
        if a.is_ptr() != b.is_ptr():
            raise TypeError(f"tl.where: cannot choose between {T.type_name(a.dtype)} and "
                            f"{T.type_name(b.dtype)}")
        cond, a, b = self.broadcast_tensors(cond, a, b)
        return self.make_tensor(SelectOp.build(self.builder, cond.handle, a.handle, b.handle))

    # ---- casts ----------------------------------------------------------------------------
    def cast(self, x, dtype, fp_downcast_rounding=None) -> tensor:
        x = self._operand(x, "cast input")
        dst = T.as_dtype(dtype)
        src = x.dtype
        if src == dst:
            return x
        fp_down = T.is_float(src) and T.is_float(dst) and dst.bits < src.bits
        custom_rounding = False
        if fp_downcast_rounding is not None:
            if fp_downcast_rounding not in ("rtne", "rtz"):
                raise ValueError(f"fp_downcast_rounding must be 'rtne' or 'rtz', got "
                                 f"{fp_downcast_rounding!r}")
            if not fp_down:
                raise ValueError("fp_downcast_rounding is only for casts to a narrower float "
                                 f"type; this cast is {src} -> {T.type_name(dst)}")
            custom_rounding = fp_downcast_rounding == "rtz"
        if (T.is_float(src) and T.is_float(dst) and (src.is_fp8() or dst.is_fp8())) \
                or custom_rounding:
            attrs = {"rounding": fp_downcast_rounding} if fp_downcast_rounding else {}
            return self.make_tensor(CastOp.build(self.builder, FP_TO_FP, x.handle, dst,
                                                 **attrs))
        if src in (float16, bfloat16) and dst != float32 and not T.is_ptr(dst):
            # 16-bit floats convert through fp32 (no direct fp16<->bf16 or fp16->int in PTX).
            return self.cast(self.cast(x, float32), dst)
        if T.is_ptr(src) and T.is_float(dst) or T.is_float(src) and T.is_ptr(dst):
            raise TypeError(f"cannot cast {T.type_name(src)} to {T.type_name(dst)}")
        if dst == int1:
            return self._cast_to_bool(x)
        if T.is_ptr(src) and not T.is_ptr(dst) and dst.bits != 64:
            return self.cast(self.cast(x, int64), dst)
        name = cast_op_name(src, dst)
        return self.make_tensor(CastOp.build(self.builder, name, x.handle, dst))

    def _cast_to_bool(self, x: tensor) -> tensor:
        src = x.dtype
        if T.is_ptr(src):
            x = self.cast(x, int64)
            src = int64
        zero = self.scalar_constant(0, src)
        x, zero = self._broadcast_pair(x, zero)
        name, pred = (FLOAT_COMPARE, "une") if src.is_floating() else (INT_COMPARE, "ne")
        return self.make_tensor(CompareOp.build(self.builder, name, pred, x.handle, zero.handle))

    def bitcast(self, x, dtype) -> tensor:
        x = self._operand(x, "bitcast input")
        dst = T.as_dtype(dtype)
        src = x.dtype
        if src == dst:
            return x
        if T.is_ptr(src) or T.is_ptr(dst):
            return self.cast(x, dst)
        if src.bits != dst.bits:
            raise ValueError(f"cannot bitcast {src} ({src.bits} bits) to {dst} ({dst.bits} "
                             "bits): the widths differ")
        return self.make_tensor(CastOp.build(self.builder, BITCAST, x.handle, dst))

    # ---- creation -------------------------------------------------------------------------
    def program_id(self, axis: int, name=PROGRAM_ID) -> tensor:
        if axis not in (0, 1, 2) or isinstance(axis, bool):
            what = "program_id" if name == PROGRAM_ID else "num_programs"
            raise ValueError(f"{what} axis must be 0, 1 or 2, got {axis!r}")
        return self.make_tensor(ProgramIdOp.build(self.builder, name, axis))

    def arange(self, start, end) -> tensor:
        start, end = T.plain_number(start), T.plain_number(end)
        for name, v in (("start", start), ("end", end)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"arange's `{name}` must be a compile-time int (tl.constexpr), "
                                f"got {T.describe(v)}")
        if start >> 31 or end >> 31 or start < 0:
            raise ValueError(f"arange's bounds must fit in int32, got [{start}, {end})")
        if end <= start:
            raise ValueError(f"arange's end must be greater than its start, got "
                             f"start={start}, end={end}")
        n = end - start
        if not T.is_power_of_two(n):
            raise ValueError(f"arange's length (end - start) must be a power of 2, got {n}")
        if n > T.TRITON_MAX_TENSOR_NUMEL:
            raise ValueError(f"arange's length {n} exceeds the maximum tensor size "
                             f"{T.TRITON_MAX_TENSOR_NUMEL}")
        return self.make_tensor(MakeRangeOp.build(self.builder, start, end))

    def full(self, shape, value, dtype) -> tensor:
        shape = T.canonical_shape(shape)
        if dtype is None:
            raise ValueError("tl.full needs a `dtype`")
        dtype = T.as_dtype(dtype)
        value = T.plain_number(value)
        if isinstance(value, tensor):
            if value.is_block():
                raise ValueError(f"tl.full's `value` must be a scalar, got {value.type}")
            return self._broadcast_to(self.cast(value, dtype), shape)
        if not T.is_number(value):
            raise TypeError(f"tl.full's `value` must be a number, got {T.describe(value)}")
        ty = TensorType(tuple(shape), dtype) if shape else dtype
        return self.make_tensor(ConstantOp.build(self.builder, T.constant_value(value, dtype),
                                                 ty))

    # ---- shapes ---------------------------------------------------------------------------
    @staticmethod
    def broadcast_shape(lhs: Sequence[int], rhs: Sequence[int]) -> List[int]:
        rank = max(len(lhs), len(rhs))
        a = [1] * (rank - len(lhs)) + list(lhs)
        b = [1] * (rank - len(rhs)) + list(rhs)
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y and x != 1 and y != 1:
                raise ValueError(f"cannot broadcast shapes {list(lhs)} and {list(rhs)}: "
                                 f"dimension {i} is {x} vs {y}")
            out.append(y if x == 1 else x)
        return out

    def _broadcast_to(self, x: tensor, shape: List[int]) -> tensor:
        shape = list(shape)
        if not x.is_block():
            if not shape:
                return x
            return self.make_tensor(SplatOp.build(self.builder, x.handle, shape))
        src = x.shape
        if src == shape:
            return x
        if len(src) > len(shape):
            raise ValueError(f"cannot broadcast {x.type} to the lower-rank shape {shape}")
        if self.broadcast_shape(src, shape) != shape:
            raise ValueError(f"cannot broadcast {x.type} to shape {shape}")
        for _ in range(len(shape) - len(src)):  # numpy's rule: missing leading axes are 1
            x = self.make_tensor(ExpandDimsOp.build(self.builder, x.handle, 0))
        if x.shape == shape:
            return x
        return self.make_tensor(BroadcastOp.build(self.builder, x.handle, shape))

    def _broadcast_pair(self, a: tensor, b: tensor):
        if not a.is_block() and not b.is_block():
            return a, b
        shape = self.broadcast_shape(a.shape, b.shape)
        return self._broadcast_to(a, shape), self._broadcast_to(b, shape)

    def broadcast_tensors(self, *xs: tensor):
        shape: List[int] = []
        for x in xs:
            shape = self.broadcast_shape(shape, x.shape)
        if not any(x.is_block() for x in xs):
            return xs
        return tuple(self._broadcast_to(x, shape) for x in xs)

    def broadcast_to(self, x, shape) -> tensor:
        """Broadcast to `shape` with numpy's rules (Triton also requires equal ranks)."""
        x = self._operand(x, "broadcast_to input")
        return self._broadcast_to(x, T.canonical_shape(shape))

    @staticmethod
    def expand_dims_axes(x, axis) -> List[int]:
        """`axis` (an int or a sequence) as non-negative, distinct axes of the result."""
        axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        new_rank = len(x.shape) + len(axes)
        norm = []
        for a in axes:
            if isinstance(a, bool) or not isinstance(a, int):
                raise TypeError(f"expand_dims: `axis` must be a compile-time int, got "
                                f"{T.describe(a)}")
            if not -new_rank <= a < new_rank:
                raise ValueError(f"expand_dims: invalid axis {a}, expected {-new_rank} <= axis "
                                 f"< {new_rank}")
            norm.append(a % new_rank)
        if len(set(norm)) != len(norm):
            raise ValueError(f"expand_dims received duplicate axes, normalized axes = {norm}")
        return norm

    def expand_dims(self, x, axis) -> tensor:
        x = self._operand(x, "expand_dims input")
        norm = self.expand_dims_axes(x, axis)
        for a in sorted(norm):
            if x.is_block():
                x = self.make_tensor(ExpandDimsOp.build(self.builder, x.handle, a))
            else:
                x = self._broadcast_to(x, [1])
        return x

    def subscript(self, x, index) -> tensor:
        """`x[None, :]`, `x[:, None]`, `x[..., None]`: insert size-1 axes."""
        x = self._operand(x, "subscripted value")
        entries = list(index) if isinstance(index, tuple) else [index]
        entries = list(entries)
        if sum(e is Ellipsis for e in entries) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        kept = sum(isinstance(e, slice) for e in entries)
        rank = len(x.shape)
        if kept > rank:
            raise IndexError(f"too many indices for a tensor of rank {rank}: {kept} slices")
        if Ellipsis in entries:
            at = entries.index(Ellipsis)
            entries[at:at + 1] = [slice(None)] * (rank - kept)
        dim = 0
        for e in entries:
            if e is None:
                x = self.expand_dims(x, dim)
            elif not (isinstance(e, slice) and e.start is None and e.stop is None
                      and e.step is None):
                raise ValueError(f"unsupported tensor index {T.describe(e)}: only None (a new "
                                 "axis), ':' and '...' are supported")
            dim += 1
        return x

    def reshape(self, x, shape, can_reorder=False) -> tensor:
        x = self._operand(x, "reshape input")
        shape = T.canonical_shape(shape) if shape not in ((), []) else []
        numel = 1
        for s in shape:
            numel *= s
        if x.numel != numel:
            raise ValueError(f"reshape cannot change the number of elements: {x.type} has "
                             f"{x.numel}, shape {shape} has {numel}")
        if not shape:
            return self._unsplat(x)
        if not x.is_block():
            return self._broadcast_to(x, shape)
        if x.shape == shape:
            return x
        return self.make_tensor(ReshapeOp.build(self.builder, x.handle, shape,
                                                bool(can_reorder)))

    def _unsplat(self, x: tensor) -> tensor:
        """A one-element tensor as a scalar: a reduction whose combine keeps its first input
        (it never runs on one element), as Triton did before it had `tt.unsplat`."""
        if not x.is_block():
            return x
        if x.numel != 1:
            raise ValueError(f"only a one-element tensor becomes a scalar, got {x.type}")
        if len(x.shape) > 1:
            x = self.reshape(x, [1])
        op = ReduceOp.build(self.builder, [x.handle], 0)
        with self.builder.at_end_of(op.regions[0].block):
            YieldOp.build(self.builder, [op.regions[0].block.args[0]], name=COMBINE_RETURN)
        return self.make_tensor(op.result)

    def trans(self, x, dims=None) -> tensor:
        x = self._operand(x, "trans input")
        dims = list(dims) if dims else []
        if not dims:
            n = len(x.shape)
            if n < 2:
                raise ValueError(f"tl.trans needs a tensor of rank 2 or more, got {x.type}")
            dims = list(range(n - 2)) + [n - 1, n - 2]
        return self.permute(x, dims)

    def permute(self, x, dims) -> tensor:
        x = self._operand(x, "permute input")
        dims = list(dims)
        if len(dims) != len(x.shape):
            raise ValueError(f"permute dims {dims} must have one entry per dimension of "
                             f"{x.type}")
        if sorted(dims) != list(range(len(dims))):
            raise ValueError(f"permute dims must be a permutation of 0, 1, ..., n-1, got {dims}")
        if dims == sorted(dims):
            return x
        return self.make_tensor(TransOp.build(self.builder, x.handle, dims))

    # ---- debugging ------------------------------------------------------------------------
    def device_assert(self, cond, msg="", mask=None):
        cond = self.cast(self._operand(cond, "assert condition"), int1)
        if mask is not None:
            mask = self.cast(self._operand(mask, "mask"), int1)
            cond = self.bitwise("or", cond, self.unary("invert", mask))
        AssertOp.build(self.builder, cond.handle, str(msg))

    def assume(self, cond) -> None:
        if not isinstance(cond, tensor):
            if not cond:
                raise ValueError("tl.assume: the condition is False at compile time")
            return
        AssumeOp.build(self.builder, self.cast(cond, int1).handle)

    def device_print(self, prefix: str, args, hex=False):
        args = list(args)
        # Python's `print("x =", x)` arrives as prefix "" and a leading string argument.
        while args and isinstance(args[0], str):
            prefix = f"{prefix} {args.pop(0)}" if prefix else args.pop(0)
        # Triton's formatting: a non-empty prefix starts with a space and ends with ': '.
        if args and not prefix.endswith(" "):
            prefix += " "
        if args and not prefix.endswith(": "):
            prefix = prefix[:-1] + ": "
        if len(prefix) > 2 and not prefix.startswith(" "):
            prefix = " " + prefix
        values = [self._operand(a, "device_print argument").handle for a in args]
        PrintOp.build(self.builder, prefix, values, hex=bool(hex))

    def call_language(self, name: str, *args, **kwargs):
        import tile.language as tl
        from tile.language._descriptors import (DESCRIPTOR_METHODS, host_descriptor_method,
                                                is_host_descriptor)

        if args and is_host_descriptor(args[0]) and name in DESCRIPTOR_METHODS:
            # `desc.load(...)` on a descriptor kernel argument (a tensor value).
            return host_descriptor_method(self, name, *args, **kwargs)
        fn = getattr(tl, name, None)
        if fn is None:  # a tensor method Triton has and we do not
            raise NotImplementedError(missing_names.message("tile.language", name, dir(tl)))
        return fn(*args, _semantic=self, **kwargs)

    # ---- reductions and scans -------------------------------------------------------------
    def combine_from_fn(self, fn, what: str) -> Callable:
        """A region body from a user combine function: a @jit function traced inline by the
        code generator, or one of our builtins (e.g. `tl.maximum`)."""

        def body(args):
            if is_builtin(fn):
                return fn(*args, _semantic=self)
            if self.codegen is None:
                raise RuntimeError(f"{what}: tracing combine_fn needs the code generator")
            return self.codegen.call_function(fn, list(args), {})

        return body

    def _reduce_inputs(self, inputs, what):
        inputs = list(inputs if isinstance(inputs, (tuple, list)) else [inputs])
        for t in inputs:
            if not isinstance(t, tensor) or not t.is_block():
                raise ValueError(f"{what} needs tensors, got {T.describe(t)}")
        if len({tuple(t.shape) for t in inputs}) != 1:
            raise ValueError(f"all {what} inputs must have one shape, got "
                             + ", ".join(str(t.type) for t in inputs))
        return inputs

    @staticmethod
    def _wrap_axis(axis, rank: int, what: str) -> int:
        if isinstance(axis, bool) or not isinstance(axis, int):
            raise TypeError(f"{what}: `axis` must be a compile-time int or None, got "
                            f"{T.describe(axis)}")
        if not -rank <= axis < rank:
            raise ValueError(f"{what}: invalid axis {axis} for a tensor of rank {rank}, "
                             f"expected {-rank} <= axis < {rank}")
        return axis % rank

    def _build_combine(self, op, inputs, body: Callable, what: str):
        block = op.regions[0].block
        with self.builder.at_end_of(block), self.builder.location(self.builder.loc):
            results = body([self.make_tensor(a) for a in block.args])
            results = [results] if isinstance(results, tensor) or T.is_number(results) \
                else list(results)
            if len(results) != len(inputs):
                raise TypeError(f"{what}: combine_fn must return {len(inputs)} value(s), got "
                                f"{len(results)}")
            handles = []
            for i, (r, t) in enumerate(zip(results, inputs)):
                r = self.to_tensor(r, like=t.dtype) if T.is_number(r) else r
                if not isinstance(r, tensor) or r.type != t.dtype:
                    raise TypeError(f"{what}: combine_fn must return a {t.dtype} scalar for "
                                    f"input {i}, got {T.describe(r)}")
                handles.append(r.handle)
            YieldOp.build(self.builder, handles, name=COMBINE_RETURN)

    def reduction(self, inputs, axis, body: Callable, keep_dims=False, what="reduce"):
        """Reduce `inputs` (tensors of one shape) along `axis` (None: all axes) with a region
        built by `body(list of 2N scalar tensors) -> N tensors`. Returns a list."""
        inputs = self._reduce_inputs(inputs, what)
        rank = len(inputs[0].shape)
        if axis is None:
            inputs = [self.reshape(t, [t.numel], can_reorder=True) for t in inputs]
            axis, kept_axes = 0, list(range(rank))
        else:
            axis = self._wrap_axis(axis, rank, what)
            kept_axes = [axis]
        op = ReduceOp.build(self.builder, [t.handle for t in inputs], axis)
        self._build_combine(op, inputs, body, what)
        results = [self.make_tensor(r) for r in op.results]
        if keep_dims:
            results = [self.expand_dims(r, kept_axes) for r in results]
        return results

    def scan(self, inputs, axis, body: Callable, reverse=False, what="associative_scan"):
        inputs = self._reduce_inputs(inputs, what)
        axis = self._wrap_axis(0 if axis is None else axis, len(inputs[0].shape), what)
        op = ScanOp.build(self.builder, [t.handle for t in inputs], axis, bool(reverse))
        self._build_combine(op, inputs, body, what)
        return [self.make_tensor(r) for r in op.results]


__all__ = ["TileSemantic"]
