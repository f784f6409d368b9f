"""The interpreter's PTX subset (`ops/inline_asm/ptx_subset.py`) against numpy, instruction
by instruction, on values whose results PTX defines exactly."""

import ml_dtypes
import numpy as np
import pytest

from shared_codegen.ops.inline_asm.ptx_subset import (PtxUnsupported, from_typed, run_ptx,
                                                      to_typed)


def run(asm, inputs, out_type):
    bits = [from_typed(np.asarray(v), t) for v, t in inputs]
    n = len(inputs[0][0])
    return to_typed(run_ptx(asm, bits, 1, n)[0], out_type)


F = np.array([1.5, -2.25, 3.0e10, -0.0, 7.0], np.float32)
G = np.array([0.5, 4.0, -1.0e-3, 2.0, -7.0], np.float32)
I = np.array([-7, 5, 2**31 - 1, -(2**31), 0], np.int32)
J = np.array([2, -3, 2, 1, 9], np.int32)


@pytest.mark.parametrize("asm, inputs, out, expected", [
    ("add.f32 $0, $1, $2;", [(F, "f32"), (G, "f32")], "f32", F + G),
    ("mul.rn.f32 $0, $1, $2;", [(F, "f32"), (G, "f32")], "f32", F * G),
    ("fma.rn.f32 $0, $1, $2, $1;", [(F, "f32"), (G, "f32")], "f32",
     (F.astype(np.float64) * G + F).astype(np.float32)),
    ("min.f32 $0, $1, $2;", [(F, "f32"), (G, "f32")], "f32", np.minimum(F, G)),
    ("neg.f32 $0, $1;", [(F, "f32")], "f32", -F),
    ("add.s32 $0, $1, $2;", [(I, "s32"), (J, "s32")], "s32", I + J),
    ("mul.lo.s32 $0, $1, $2;", [(I, "s32"), (J, "s32")], "s32",
     (I.astype(np.int64) * J).astype(np.int32)),
    ("mul.hi.s32 $0, $1, $2;", [(I, "s32"), (J, "s32")], "s32",
     ((I.astype(np.int64) * J) >> 32).astype(np.int32)),
    ("div.s32 $0, $1, $2;", [(I, "s32"), (J, "s32")], "s32",
     np.trunc(I.astype(np.float64) / J).astype(np.int32)),
    ("shr.s32 $0, $1, 1;", [(I, "s32")], "s32", I >> 1),
    ("shr.u32 $0, $1, 1;", [(I, "s32")], "u32", I.view(np.uint32) >> 1),
    ("cvt.rzi.s32.f32 $0, $1;", [(np.array([1.7, -1.7, 2.5, -2.5, 0.0], np.float32), "f32")],
     "s32", np.array([1, -1, 2, -2, 0], np.int32)),
    ("cvt.rni.s32.f32 $0, $1;", [(np.array([1.7, -1.7, 2.5, -2.5, 0.0], np.float32), "f32")],
     "s32", np.array([2, -2, 2, -2, 0], np.int32)),
    ("cvt.rn.bf16.f32 $0, $1;", [(F, "f32")], "bf16", F.astype(ml_dtypes.bfloat16)),
    ("cvt.f32.f16 $0, $1;", [(G.astype(np.float16), "f16")], "f32",
     G.astype(np.float16).astype(np.float32)),
    ("{ .reg .pred p; setp.lt.f32 p, $1, $2; selp.f32 $0, $1, $2, p; }",
     [(F, "f32"), (G, "f32")], "f32", np.where(F < G, F, G)),
    ("{ .reg .pred p; setp.gt.s32 p, $1, 0; @p mov.b32 $0, 1; @!p mov.b32 $0, 2; }",
     [(I, "s32")], "s32", np.where(I > 0, 1, 2)),
    ("lop3.b32 $0, $1, $2, 0, 0x3c;", [(I, "s32"), (J, "s32")], "s32", I ^ J),
    ("bfe.u32 $0, $1, 4, 8;", [(I, "s32")], "u32", (I.view(np.uint32) >> 4) & 0xFF),
    ("bfe.s32 $0, $1, 28, 4;", [(I, "s32")], "s32", I >> 28),
])
def test_instruction_matches_numpy(asm, inputs, out, expected):
    np.testing.assert_array_equal(run(asm, inputs, out), np.asarray(expected))


def test_f16x2_arithmetic_is_lane_by_lane():
    a = np.array([1.5, -2.0, 0.25, 8.0], np.float16)
    b = np.array([2.0, 0.5, -4.0, 0.125], np.float16)
    pack = lambda x: x.view(np.uint16)[0::2].astype(np.uint32) | \
        (x.view(np.uint16)[1::2].astype(np.uint32) << 16)
    got = run("mul.rn.f16x2 $0, $1, $2;", [(pack(a), "b32"), (pack(b), "b32")], "b32")
    halves = np.stack([got & 0xFFFF, got >> 16], axis=1).reshape(-1).astype(np.uint16)
    np.testing.assert_array_equal(halves.view(np.float16), a * b)


def test_branches_are_named_as_unsupported():
    with pytest.raises(PtxUnsupported, match="`bra.uni` is not in the PTX subset"):
        run_ptx("bra.uni done;", [], 1, 1)
