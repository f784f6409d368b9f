"""The semantic layer without a kernel: Triton's promotion rules, literal typing, broadcasting
shapes and the ops each operator builds. Runs against a bare builder, so it is fast and
independent of the code generator."""

import itertools

import pytest

import tile.language as tl
from shared_codegen.ir.types import PointerType, TensorType
from tl_test_util import bare_semantic

ALL = [tl.int1, tl.int8, tl.int16, tl.int32, tl.int64, tl.uint8, tl.uint16, tl.uint32,
       tl.uint64, tl.float8e4nv, tl.float8e5, tl.float16, tl.bfloat16, tl.float32, tl.float64]
TRITON_NAME = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
               "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


def ops_of(fn):
    return [op.name for op in fn.walk()]


def _ours(a, a_num, b, b_num, div):
    sem, _, _ = bare_semantic()
    try:
        return str(sem.computation_type(a, a_num, b, b_num, div))
    except TypeError:
        return "error"


def _triton(a, a_num, b, b_num, div):
    import triton.language as ttl
    from triton.language.semantic import TritonSemantic

    def conv(t):
        return ttl.dtype(TRITON_NAME.get(t.name, t.name))

    try:
        name = str(TritonSemantic(None).computation_type_impl(conv(a), a_num, conv(b), b_num,
                                                              div))
        return {v: k for k, v in TRITON_NAME.items()}.get(name, name)
    except TypeError:
        return "error"


@pytest.mark.parametrize("div", [False, True])
def test_computation_type_matches_triton_for_every_dtype_pair(div):
    pytest.importorskip("triton")
    cases = [(a, False, b, False) for a, b in itertools.product(ALL, ALL)]
    # A Python number enters as the literal's type: int32, fp32 or int1.
    for num in (tl.int32, tl.float32, tl.int1, tl.int64):
        cases += [(num, True, t, False) for t in ALL] + [(t, False, num, True) for t in ALL]
    mismatches = [(a, an, b, bn, _ours(a, an, b, bn, div), _triton(a, an, b, bn, div))
                  for a, an, b, bn in cases]
    mismatches = [m for m in mismatches if m[4] != m[5]]
    assert not mismatches


@pytest.mark.parametrize("value,expected", [
    (True, "i1"), (0, "i32"), (-2 ** 31, "i32"), (2 ** 31 - 1, "i32"), (2 ** 31, "u32"),
    (2 ** 32 - 1, "u32"), (2 ** 32, "i64"), (-2 ** 31 - 1, "i64"), (2 ** 63, "u64"),
    (1.5, "fp32"), (0.0, "fp32"), (float("inf"), "fp32"), (1e300, "fp64"), (1e-300, "fp64"),
])
def test_python_literals_get_tritons_types(value, expected):
    sem, _, _ = bare_semantic()
    assert str(sem.to_tensor(value).dtype) == expected


def test_to_tensor_rejects_other_python_values():
    sem, _, _ = bare_semantic()
    with pytest.raises(TypeError, match="cannot convert 'abc' of type str to a tensor"):
        sem.to_tensor("abc")
    with pytest.raises(ValueError, match="integer 18446744073709551616 does not fit in 64 bits"):
        sem.to_tensor(2 ** 64)


def test_to_tensor_like_takes_the_type_and_shape():
    sem, (x,), _ = bare_semantic(TensorType((4, 8), tl.float16))
    t = sem.to_tensor(3, like=x)
    assert t.type == TensorType((4, 8), tl.float16)
    assert sem.to_tensor(3, like=tl.int8).dtype == tl.int8


@pytest.mark.parametrize("op,lhs,rhs,expected", [
    ("add", tl.float16, 2.0, "fp16"),       # a float literal does not widen fp16
    ("add", tl.int8, 3, "i8"),              # nor an int literal int8
    ("add", tl.int8, 1.5, "fp32"),          # a float literal with an int tensor: fp32
    ("truediv", tl.int32, 2, "fp32"),       # int / int is true division in fp32
    ("truediv", tl.float16, 2.0, "fp32"),   # no fp16 division in PTX
    ("mod", tl.bfloat16, 2.0, "fp32"),
    ("add", tl.float16, tl.bfloat16, "fp16"),   # Triton 3.6 checks fp16 before bf16
    ("add", tl.bfloat16, tl.int32, "fp32"),     # bf16 with any other type: fp32
    ("add", tl.bfloat16, tl.float8e5, "fp32"),
    ("mul", tl.bfloat16, tl.bfloat16, "bf16"),
    ("add", tl.int32, tl.uint32, "u32"),     # C's rule: unsigned wins at equal rank
    ("add", tl.int64, tl.uint32, "i64"),
    ("sub", tl.uint8, tl.int16, "i16"),
    ("floordiv", tl.int64, tl.int8, "i64"),
    ("and", tl.int1, tl.int32, "i32"),
    ("lt", tl.float16, 0.5, "i1"),
])
def test_binary_result_types(op, lhs, rhs, expected):
    args = [t for t in (lhs, rhs) if not isinstance(t, (int, float))]
    sem, tensors, _ = bare_semantic(*[TensorType((4,), t) for t in args])
    it = iter(tensors)
    a = next(it) if not isinstance(lhs, (int, float)) else lhs
    b = next(it) if not isinstance(rhs, (int, float)) else rhs
    assert str(sem.binary(op, a, b).dtype) == expected


def test_fp16_compared_with_a_float_literal_compares_in_fp32():
    # Triton converts the Python side of a comparison to a tensor first.
    sem, (x,), fn = bare_semantic(TensorType((4,), tl.float16))
    sem.binary("lt", x, 0.5)
    assert "arith.extf" in ops_of(fn)


def test_broadcasting_prepends_axes_and_splats_scalars():
    sem, (a, b, s), fn = bare_semantic(TensorType((8,), tl.float32),
                                       TensorType((4, 1), tl.float32), tl.float32)
    out = sem.binary("add", a, b)
    assert out.shape == [4, 8]
    assert sem.binary("mul", s, out).shape == [4, 8]
    names = ops_of(fn)
    assert names.count("tt.expand_dims") == 1 and names.count("tt.broadcast") == 2
    assert "tt.splat" in names


def test_incompatible_shapes_name_the_dimension():
    sem, (a, b), _ = bare_semantic(TensorType((4, 8), tl.float32), TensorType((4, 16), tl.float32))
    with pytest.raises(ValueError) as e:
        sem.binary("add", a, b)
    assert str(e.value) == "cannot broadcast shapes [4, 8] and [4, 16]: dimension 1 is 8 vs 16"


def test_pointer_arithmetic_builds_addptr_and_zero_extends_unsigned_offsets():
    p = PointerType(tl.float32)
    sem, (ptr, off), fn = bare_semantic(p, TensorType((4,), tl.uint32))
    q = sem.binary("add", off, ptr)  # offset + pointer also works
    assert q.type == TensorType((4,), p)
    assert ops_of(fn)[-3:] == ["tt.splat", "arith.extui", "tt.addptr"]
    r = sem.binary("sub", ptr, 3)
    assert r.dtype == p and ops_of(fn)[-1] == "tt.addptr"


@pytest.mark.parametrize("op,rhs,message", [
    ("add", "ptr", "cannot add pointers together: pointer<fp32> + pointer<fp32>"),
    ("sub", "ptr", "unsupported operand types for -: pointer<fp32> and pointer<fp32>"),
    ("add", 1.5, "cannot offset a pointer by a float: pointer<fp32> + fp32"),
    ("mul", 2, "unsupported operand types for *: pointer<fp32> and i32"),
])
def test_pointer_arithmetic_errors(op, rhs, message):
    sem, (ptr,), _ = bare_semantic(PointerType(tl.float32))
    with pytest.raises(TypeError) as e:
        sem.binary(op, ptr, ptr if rhs == "ptr" else rhs)
    assert str(e.value) == message


def test_pointer_comparison_compares_addresses():
    sem, (p, q), fn = bare_semantic(PointerType(tl.float16), PointerType(tl.float16))
    assert sem.binary("lt", p, q).dtype == tl.int1
    assert ops_of(fn)[-1] == "arith.cmpi"


@pytest.mark.parametrize("op,message", [
    ("and", "bitwise and (&) needs integer operands, got fp32"),
    ("or", "bitwise or (|) needs integer operands, got fp32"),
    ("xor", "bitwise xor (^) needs integer operands, got fp32"),
    ("lshift", "left shift (<<) needs integer operands, got fp32"),
    ("rshift", "right shift (>>) needs integer operands, got fp32"),
])
def test_bitwise_ops_on_floats_are_rejected(op, message):
    sem, (x,), _ = bare_semantic(TensorType((4,), tl.float32))
    with pytest.raises(TypeError) as e:
        sem.binary(op, x, 1)
    assert str(e.value) == message


def test_division_errors_follow_triton():
    sem, (x, u), _ = bare_semantic(TensorType((4,), tl.float32), TensorType((4,), tl.uint32))
    with pytest.raises(TypeError) as e:
        sem.binary("floordiv", x, 2)
    assert str(e.value).startswith("floor division (//) needs integer operands, got fp32")
    with pytest.raises(ValueError) as e:
        sem.binary("add", u, -1)
    assert "negative number -1 with an unsigned u32 tensor" in str(e.value)
    sem, (i8,), _ = bare_semantic(TensorType((4,), tl.int8))
    with pytest.raises(ValueError) as e:
        sem.binary("add", i8, 300)
    assert str(e.value) == "number 300 is out of range for type i8 ([-128, 127])"


def test_unary_ops_and_conditions():
    sem, (x, f, v), fn = bare_semantic(tl.int32, tl.float32, TensorType((4,), tl.int32))
    assert sem.unary("neg", x).dtype == tl.int32
    assert sem.unary("invert", x).dtype == tl.int32
    assert sem.unary("not", f).dtype == tl.int1
    with pytest.raises(TypeError) as e:
        sem.unary("invert", f)
    assert str(e.value) == "bitwise not (~) needs an integer operand, got fp32"
    cond = sem.to_condition(x)
    assert cond.type == tl.int1
    with pytest.raises(TypeError) as e:
        sem.to_condition(v)
    assert str(e.value) == "condition must be a scalar, got tensor<4xi32>"


def test_casts_pick_triton_ops():
    sem, (h, b, i, p), fn = bare_semantic(TensorType((4,), tl.float16),
                                          TensorType((4,), tl.bfloat16),
                                          TensorType((4,), tl.int32), PointerType(tl.float32))
    assert sem.cast(h, tl.bfloat16).dtype == tl.bfloat16
    assert ops_of(fn)[-2:] == ["arith.extf", "arith.truncf"]  # fp16 -> fp32 -> bf16
    sem.cast(i, tl.int1)
    assert ops_of(fn)[-1] == "arith.cmpi"
    sem.cast(h, tl.float8e5)
    assert ops_of(fn)[-1] == "tt.fp_to_fp"
    assert sem.cast(p, tl.int64).dtype == tl.int64
    with pytest.raises(ValueError) as e:
        sem.cast(i, tl.float32, fp_downcast_rounding="rtz")
    assert "only for casts to a narrower float type; this cast is i32 -> fp32" in str(e.value)
    with pytest.raises(ValueError) as e:
        sem.bitcast(i, tl.float16)
    assert str(e.value) == "cannot bitcast i32 (32 bits) to fp16 (16 bits): the widths differ"


def test_subscript_inserts_axes():
    sem, (x,), _ = bare_semantic(TensorType((8,), tl.float32))
    assert sem.subscript(x, (slice(None), None)).shape == [8, 1]
    assert sem.subscript(x, (None, slice(None))).shape == [1, 8]
    assert sem.subscript(x, (Ellipsis, None)).shape == [8, 1]
    assert sem.subscript(x, (None, Ellipsis)).shape == [1, 8]
    with pytest.raises(ValueError, match="unsupported tensor index 3"):
        sem.subscript(x, (3,))
    with pytest.raises(IndexError, match="too many indices for a tensor of rank 1"):
        sem.subscript(x, (slice(None), slice(None)))


def test_where_broadcasts_all_three_and_promotes_branches():
    sem, (c, a), _ = bare_semantic(TensorType((4, 1), tl.int1), TensorType((8,), tl.float16))
    out = sem.where(c, a, 0.0)
    assert out.type == TensorType((4, 8), tl.float16)


def test_every_tensor_is_layout_free():
    sem, (x,), fn = bare_semantic(TensorType((4,), tl.float32))
    y = sem.binary("add", sem.expand_dims(x, 0), sem.arange(0, 4))
    sem.reshape(sem.trans(sem.broadcast_to(y, [4, 4])), [16])
    for op in fn.walk():
        for r in op.results:
            assert getattr(r.type, "layout", None) is None
