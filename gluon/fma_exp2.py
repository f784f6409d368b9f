"""exp2 on the FMA pipe, to share a softmax's exponentials between two units.

MUFU.EX2 (`gl.exp2`, ex2.approx) runs 16 per clock per SM; the FMA pipe runs 128 FMAs. When
the exponentials of a softmax are what a kernel waits for (FlashAttention-4's observation on
Blackwell, and Hopper attention at D = 64 or in fp8), computing some of them with a
polynomial on the FMA pipe shortens that wait:

    from gluon.fma_exp2 import exp2_poly
    p = exp2_poly(x, 3)   # ~9 FMA-pipe instructions per element instead of one MUFU.EX2

A kernel chooses which elements take which unit (the Blackwell attention example puts the
first columns of each S chunk here). On Hopper attention, splitting a wgmma accumulator's
columns between the two units measured slower (examples/flash_attention/README.md): there
the softmax waits on instruction issue, not on MUFU.

exp2_poly is Cody-Waite range reduction: x = n + f with n = round(x) (the 1.5 * 2^23
trick) and f in [-0.5, 0.5], 2^f from a minimax polynomial by Horner, then n added to the
result's exponent bits. Degree 3 has a relative error of 7.5e-5 (below half an fp16 ulp, so
a P rounded to 16 or 8 bits is unchanged in nearly every element); degree 5 has 2.3e-7.
"""

from __future__ import annotations

import gluon
from gluon import language as gl

# Minimax (relative error) polynomials for 2^f on [-0.5, 0.5], found by a Remez exchange in
# float64 and rounded to fp32: max relative error 7.5e-5 (degree 3) and 2.3e-7 (degree 5).
POLY3 = gl.constexpr((0.9999280571937561, 0.6932609677314758, 0.2426111251115799,
                     0.0551716685295105))
POLY5 = gl.constexpr((1.0000001192092896, 0.6931469440460205, 0.24022120237350464,
                     0.05550713092088699, 0.009675540961325169, 0.0013276472454890609))
ROUND_MAGIC = gl.constexpr(12582912.0)  # 1.5 * 2^23: x + this rounds x to an integer


@gluon.jit
def exp2_poly(x, DEGREE: gl.constexpr):
    """2^x on the FMA pipe (DEGREE 3 or 5). x is clamped at -126 so 2^n stays a normal
    number (the result there, ~1e-38, vanishes in any 16- or 8-bit P)."""
    x = gl.maximum(x, -126.0)
    shifted = x + ROUND_MAGIC          # rounds to nearest: n sits in the low mantissa bits
    f = x - (shifted - ROUND_MAGIC)
    if DEGREE == 3:
        p = gl.fma(f, POLY3[3], POLY3[2])
        p = gl.fma(p, f, POLY3[1])
        p = gl.fma(p, f, POLY3[0])
    else:
        p = gl.fma(f, POLY5[5], POLY5[4])
        p = gl.fma(p, f, POLY5[3])
        p = gl.fma(p, f, POLY5[2])
        p = gl.fma(p, f, POLY5[1])
        p = gl.fma(p, f, POLY5[0])
    n = shifted.to(gl.int32, bitcast=True) - 0x4B400000  # the bits of ROUND_MAGIC
    bits = p.to(gl.int32, bitcast=True) + (n << 23)
    return bits.to(gl.float32, bitcast=True)


__all__ = ["exp2_poly", "POLY3", "POLY5"]
