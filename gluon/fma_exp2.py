"""exp2 on the FMA pipe, to share a softmax's exponentials between two units.

MUFU.EX2 (`gl.exp2`, ex2.approx) runs 16 per clock per SM; the FMA pipe runs 128 FMAs. When
the exponentials of a softmax are what a kernel waits for (FlashAttention-4's observation on
Blackwell, and Hopper attention at D = 64 or in fp8), computing some of them with a
polynomial on the FMA pipe shortens that wait:

    from gluon import fma_exp2
    p = fma_exp2.exp2_poly(x, 3)       # all of x on the FMA pipe (~9 instructions each)
    p = fma_exp2.exp2_mixed(x, 1, 3)   # x's first quarter of columns there, the rest on MUFU

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


@gluon.jit
def _quarters(x):
    """x [M, N] as its four column quarters (split along the two top column bits), in column
    order, each [M, N / 4]."""
    M: gl.constexpr = x.shape[0]
    N: gl.constexpr = x.shape[1]
    x = x.reshape([M, 2, 2, N // 4]).permute([0, 3, 1, 2])  # [M, N / 4, top bit, next bit]
    next0, next1 = x.split()
    c0, c2 = next0.split()
    c1, c3 = next1.split()
    return c0, c1, c2, c3


@gluon.jit
def _from_quarters(c0, c1, c2, c3):
    M: gl.constexpr = c0.shape[0]
    N: gl.constexpr = c0.shape[1] * 4
    x = gl.join(gl.join(c0, c2), gl.join(c1, c3))
    return x.permute([0, 2, 3, 1]).reshape([M, N])


@gluon.jit
def _exp2_quarter(x, POLY: gl.constexpr, DEGREE: gl.constexpr):
    if POLY:
        return exp2_poly(x, DEGREE)
    return gl.exp2(x)


@gluon.jit
def exp2_mixed(x, FMA_QUARTERS: gl.constexpr, DEGREE: gl.constexpr):
    """2^x of a 2-D tensor: the first FMA_QUARTERS (0 to 4) quarters of its columns on the
    FMA pipe (exp2_poly), the others on MUFU. The quarters are split along x's two top column
    bits: free when those are register bits of x's layout, as in a wgmma accumulator (a
    `NVMMADistributedLayout` with N >= 32), and a layout conversion otherwise."""
    if FMA_QUARTERS == 0:
        return gl.exp2(x)
    elif FMA_QUARTERS == 4:
        return exp2_poly(x, DEGREE)
    else:
        c0, c1, c2, c3 = _quarters(x)
        y = _from_quarters(exp2_poly(c0, DEGREE), _exp2_quarter(c1, FMA_QUARTERS > 1, DEGREE),
                           _exp2_quarter(c2, FMA_QUARTERS > 2, DEGREE), gl.exp2(c3))
        # Back in x's layout: the split and join reorder the registers, so this conversion
        # only renames them.
        return gl.convert_layout(y, x.type.layout)


__all__ = ["exp2_poly", "exp2_mixed", "POLY3", "POLY5"]
