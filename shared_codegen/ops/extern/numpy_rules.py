"""numpy implementations of libdevice's `__nv_*` functions, for the interpreter.

Each rule takes numpy arrays already in the operand dtypes of the symbol's signature and
returns values the op casts to the result dtype. Where libdevice is correctly rounded (the
`_rn/_rz/_rd/_ru` arithmetic and conversions, sqrt, fma) so is the rule: the exact result is
formed as a rational number and rounded in the named direction. Transcendentals use numpy's
(or the math module's) double precision results rounded to the operand type, which is at
least as accurate as libdevice's documented ulp bounds. Bessel functions and the inverse
error functions come from scipy.special when it is installed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

_ROUNDING = ("rn", "rz", "rd", "ru")


# ---- correctly rounded arithmetic --------------------------------------------------------------

def _round_rational(q: Fraction, dtype, mode: str):
    """The float of `dtype` that `mode` rounds the exact value `q` to."""
    info = np.finfo(dtype)
    try:
        near = dtype.type(float(q))  # float() rounds to nearest; a second rounding may follow
    except OverflowError:
        near = dtype.type(math.copysign(math.inf, q))
    if np.isinf(near):
        big = dtype.type(info.max) * (1 if q > 0 else -1)
        if mode == "rz" or (mode == "rd" and q > 0) or (mode == "ru" and q < 0):
            return big
        return near
    exact_near = Fraction(float(near))
    if mode == "rn":
        # Double rounding (through float64) can land one step off: check the neighbours.
        best = near
        for other in (np.nextafter(near, dtype.type(np.inf)),
                      np.nextafter(near, dtype.type(-np.inf))):
            if not np.isfinite(other):
                continue
            d_other, d_best = abs(Fraction(float(other)) - q), abs(Fraction(float(best)) - q)
            if d_other < d_best or (d_other == d_best and
                                    int(other.view(_uint_of(dtype))) % 2 == 0):
                best = other
        return best
    if exact_near == q:
        return near
    down = (mode == "rd") or (mode == "rz" and q > 0)
    if down and exact_near > q:
        return np.nextafter(near, dtype.type(-np.inf))
    if not down and exact_near < q:
        return np.nextafter(near, dtype.type(np.inf))
    return near


def _uint_of(dtype):
    return {4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]


def _exact(fn, nearest, mode, native_nearest=True):
    """Elementwise `fn(*Fractions) -> Fraction`, rounded by `mode`; non-finite operands take
    the IEEE result of `nearest` (the rounding mode does not change inf/nan). numpy's own
    +, -, *, / are IEEE operations, correctly rounded to nearest, so `rn` uses them directly
    when `native_nearest` (not for fma, whose product and sum would round twice)."""

    def rule(*args):
        if mode == "rn" and native_nearest:
            args = np.broadcast_arrays(*(np.asarray(a) for a in args))
            with np.errstate(all="ignore"):
                return np.asarray(nearest(*args)).astype(args[0].dtype)
        args = np.broadcast_arrays(*(np.asarray(a) for a in args))
        dtype = args[0].dtype
        with np.errstate(all="ignore"):
            out = np.asarray(nearest(*args), dtype=dtype).copy()
        flat_out = out.reshape(-1)
        flats = [a.reshape(-1) for a in args]
        for i in range(flat_out.size):
            vals = [f[i] for f in flats]
            if not all(np.isfinite(v) for v in vals) or not np.isfinite(flat_out[i]) and \
                    mode == "rn":
                continue
            try:
                q = fn(*(Fraction(float(v)) for v in vals))
            except ZeroDivisionError:
                continue
            if q == 0:
                continue  # the sign of an exact zero follows IEEE, which `nearest` gives
            flat_out[i] = _round_rational(q, np.dtype(dtype), mode)
        return out
    return rule


def _sqrt_rounded(mode):
    def rule(x):
        x = np.asarray(x)
        out = np.sqrt(x).astype(x.dtype)  # IEEE sqrt: already right for rn
        if mode == "rn":
            return out
        flat, src = out.reshape(-1), x.reshape(-1)
        for i in range(flat.size):
            v = src[i]
            if not np.isfinite(v) or v <= 0:
                continue
            q = Fraction(float(v))
            r = flat[i]
            # Step until r is the rounding of sqrt(q): compare squares exactly.
            lo, hi = np.nextafter(r, -np.inf), np.nextafter(r, np.inf)
            for cand in (lo, r, hi):
                c2 = Fraction(float(cand)) ** 2
                n2 = Fraction(float(np.nextafter(cand, np.inf))) ** 2
                if c2 <= q < n2:
                    below, above = cand, np.nextafter(cand, np.inf)
                    break
            else:
                continue
            if Fraction(float(below)) ** 2 == q:
                flat[i] = below
            elif mode in ("rz", "rd"):
                flat[i] = below
            elif mode == "ru":
                flat[i] = above
            else:  # nearest: compare q with the square of the midpoint
                mid = (Fraction(float(below)) + Fraction(float(above))) / 2
                flat[i] = below if q < mid * mid else above
        return out
    return rule


def _convert_float(dtype, mode):
    def rule(x):
        x = np.asarray(x)
        out = x.astype(dtype)  # numpy's casts round to nearest even: right for rn
        if mode == "rn":
            return out
        flat, src = out.reshape(-1), x.reshape(-1)
        for i in range(flat.size):
            v = src[i]
            if isinstance(v, np.floating) and not np.isfinite(v):
                continue
            q = Fraction(int(v)) if np.issubdtype(x.dtype, np.integer) else Fraction(float(v))
            if q != 0:
                flat[i] = _round_rational(q, np.dtype(dtype), mode)
        return out
    return rule


_INT_ROUND = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}


def _float_to_int(dtype, mode):
    """cvt.{rni,rzi,rmi,rpi}.{s,u}{32,64}.f*: saturating, NaN -> 0."""
    info = np.iinfo(dtype)

    def rule(x):
        r = _INT_ROUND[mode](np.asarray(x).astype(np.float64))  # exact for fp32 and fp64
        r = np.where(np.isnan(r), 0, np.clip(r, float(info.min), float(info.max)))
        out = np.empty(r.shape, dtype=dtype)
        flat_r, flat = r.reshape(-1), out.reshape(-1)
        for i in range(flat.size):  # clip in float can round past the int range at 64 bits
            flat[i] = max(info.min, min(info.max, int(flat_r[i])))
        return out
    return rule


# ---- integer functions -----------------------------------------------------------------------

def _clz(bits):
    def rule(x):
        u = np.asarray(x).astype(np.uint64) & np.uint64((1 << bits) - 1)
        out = np.full(u.shape, bits, dtype=np.int32)
        flat, src = out.reshape(-1), u.reshape(-1)
        for i in range(flat.size):
            flat[i] = bits - int(src[i]).bit_length()
        return out
    return rule


def _popc(bits):
    def rule(x):
        u = np.asarray(x).astype(np.uint64) & np.uint64((1 << bits) - 1)
        return np.vectorize(lambda v: bin(int(v)).count("1"), otypes=[np.int32])(u)
    return rule


def _ffs(bits):
    def rule(x):
        u = np.asarray(x).astype(np.uint64) & np.uint64((1 << bits) - 1)
        return np.vectorize(lambda v: (int(v) & -int(v)).bit_length(), otypes=[np.int32])(u)
    return rule


def _brev(bits):
    def rule(x):
        x = np.asarray(x)
        fmt = f"{{:0{bits}b}}"
        u = x.astype(np.uint64) & np.uint64((1 << bits) - 1)
        rev = np.vectorize(lambda v: np.uint64(int(fmt.format(int(v))[::-1], 2)),
                           otypes=[np.uint64])(u)
        return rev.astype(_uint_of(x.dtype)).view(x.dtype)
    return rule


def _mulhi(bits):
    def rule(a, b):
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        dtype = a.dtype
        out = np.empty(a.shape, dtype=dtype)
        fa, fb, fo = a.reshape(-1), b.reshape(-1), out.reshape(-1)
        info = np.iinfo(dtype)
        for i in range(fo.size):
            high = (int(fa[i]) * int(fb[i])) >> bits
            fo[i] = _wrap(high, info)
        return out
    return rule


def _wrap(value: int, info) -> int:
    width = info.bits
    value &= (1 << width) - 1
    if info.min < 0 and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def _mul24(a, b):
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    if a.dtype == np.int32:  # the low 24 bits, sign-extended
        lo_a = ((a.astype(np.int64) << 40) >> 40)
        lo_b = ((b.astype(np.int64) << 40) >> 40)
    else:
        lo_a, lo_b = a.astype(np.int64) & 0xFFFFFF, b.astype(np.int64) & 0xFFFFFF
    return (lo_a * lo_b).astype(np.int64).astype(a.dtype)


def _hadd(rounding):
    def rule(a, b):
        a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        total = a.astype(np.int64) + b.astype(np.int64) + rounding
        return (total >> 1).astype(a.dtype)
    return rule


def _byte_perm(x, y, s):
    x, y, s = (np.asarray(v).astype(np.uint32).astype(np.uint64) for v in (x, y, s))
    pool = (y << np.uint64(32)) | x
    out = np.zeros(np.broadcast(x, y, s).shape, dtype=np.uint64)
    for k in range(4):
        sel = (s >> np.uint64(4 * k)) & np.uint64(7)
        byte = (pool >> (sel * np.uint64(8))) & np.uint64(0xFF)
        out |= byte << np.uint64(8 * k)
    return out.astype(np.uint32).view(np.int32)


def _sad(a, b, c):
    a, b, c = np.broadcast_arrays(*(np.asarray(v) for v in (a, b, c)))
    diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
    return (diff + c.astype(np.int64)).astype(np.int64).astype(a.dtype)


# ---- floating-point helpers ------------------------------------------------------------------

def _per_element(fn):
    """A math-module function applied per element in float64 (tiles are small)."""
    def rule(*args):
        args = np.broadcast_arrays(*(np.asarray(a) for a in args))
        out = np.empty(args[0].shape, dtype=np.float64)
        flats = [a.reshape(-1) for a in args]
        flat = out.reshape(-1)
        for i in range(flat.size):
            try:
                flat[i] = fn(*(float(f[i]) for f in flats))
            except (ValueError, OverflowError):
                flat[i] = _domain_result(fn, *(float(f[i]) for f in flats))
        return out.astype(args[0].dtype if args[0].dtype.kind == "f" else np.float64)
    return rule


def _domain_result(fn, *args):
    if fn is math.lgamma or fn is math.gamma:
        x = args[0]
        if x == -math.inf:
            return math.inf if fn is math.lgamma else math.nan
        if x == math.floor(x) and x <= 0:
            return math.inf if fn is math.lgamma else math.nan
        return math.inf
    return math.nan


def _scipy(name):
    def rule(*args):
        try:
            import scipy.special as special
        except ImportError:
            raise NotImplementedError(
                f"the interpreter computes libdevice's {name} with scipy.special; install "
                f"scipy (pip install scipy)") from None
        wide = [np.asarray(a).astype(np.float64) if np.asarray(a).dtype.kind == "f"
                else np.asarray(a) for a in args]
        return getattr(special, name)(*wide)
    return rule


def _as_float(fn):
    """A float rule computed in float64 (for fp32 inputs) and rounded once."""
    def rule(*args):
        dtype = next((np.asarray(a).dtype for a in args if np.asarray(a).dtype.kind == "f"),
                     np.dtype(np.float64))
        wide = [np.asarray(a).astype(np.float64) for a in args]
        return np.asarray(fn(*wide)).astype(dtype)
    return rule


def _round(x):
    """Half away from zero. |x| - trunc(|x|) is exact, so the test is too (floor(|x| + 0.5)
    is not: 0.49999997f + 0.5 rounds up to 1)."""
    x = np.asarray(x)
    ax = np.abs(x)
    whole = np.trunc(ax)
    r = whole + (ax - whole >= 0.5)
    return np.where(np.isfinite(x), np.copysign(r, x), x).astype(x.dtype)


def _sinpi(x):
    x = np.asarray(x, dtype=np.float64)
    r = np.fmod(x, 2.0)  # exact, so sin(pi * r) sees no large argument
    # Integers give exact zeros carrying the sign of x, as libdevice's sinpi does.
    return np.where(r == np.trunc(r), np.copysign(0.0, x), np.sin(np.pi * r))


def _cospi(x):
    x = np.asarray(x).astype(np.float64)
    r = np.fmod(np.abs(x), 2.0)
    out = np.cos(np.pi * r)
    out = np.where(r == 0.5, 0.0, out)
    out = np.where(r == 1.5, 0.0, out)
    return np.where(np.isfinite(x), out, np.nan)


def _ilogb(x):
    x = np.asarray(x)
    _, exp = np.frexp(x)
    out = (exp - 1).astype(np.int64)
    out = np.where(x == 0, -2 ** 31, out)
    out = np.where(np.isnan(x), -2 ** 31, out)
    out = np.where(np.isinf(x), 2 ** 31 - 1, out)
    return out.astype(np.int32)


def _logb(x):
    x = np.asarray(x)
    _, exp = np.frexp(x)
    out = (exp - 1).astype(x.dtype)
    out = np.where(x == 0, -np.inf, out)
    out = np.where(np.isinf(x), np.inf, out)
    return np.where(np.isnan(x), x, out).astype(x.dtype)


def _saturate(x):
    x = np.asarray(x)
    return np.where(np.isnan(x), 0, np.clip(x, 0, 1)).astype(x.dtype)


def _rcp64h(x):
    r = 1.0 / np.asarray(x, dtype=np.float64)
    bits = r.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)
    return bits.view(np.float64)


def _erfcx(x):
    try:
        import scipy.special as special
        return special.erfcx(x)
    except ImportError:
        return _per_element(lambda v: math.exp(v * v) * math.erfc(v))(x)


def _powi(x, n):
    return np.power(np.asarray(x), np.asarray(n).astype(np.asarray(x).dtype))


def _hilo(hi, lo):
    bits = (np.asarray(hi).astype(np.int64).astype(np.uint64) << np.uint64(32)) | \
        np.asarray(lo).astype(np.uint32).astype(np.uint64)
    return bits.view(np.float64)


def _view(dtype):
    def rule(x):
        return np.ascontiguousarray(np.asarray(x)).view(dtype)
    return rule


def _isfinite(x):
    return np.isfinite(x).astype(np.int32)


def _remainder(x, y):
    return _per_element(math.remainder)(x, y)


def _norm(*args):
    return np.sqrt(sum(np.asarray(a, dtype=np.float64) ** 2 for a in args))


def _int_abs(x):
    x = np.asarray(x)
    return np.abs(x).astype(x.dtype)  # abs(INT_MIN) wraps, as in PTX


def _jn(n, x):
    return _scipy("jv")(np.asarray(n).astype(np.float64), x)


def _yn(n, x):
    return _scipy("yn")(n, x)


def _normcdfinv(x):
    return _scipy("ndtri")(x)


def _normcdf(x):
    return 0.5 * _per_element(math.erfc)(-np.asarray(x, dtype=np.float64) / math.sqrt(2))


# ---- the table: symbol -> rule -----------------------------------------------------------------

NUMPY_RULES: dict = {}


def _add(rule, *symbols):
    for s in symbols:
        NUMPY_RULES[f"__nv_{s}"] = rule


_add(_clz(32), "clz"), _add(_clz(64), "clzll")
_add(_popc(32), "popc"), _add(_popc(64), "popcll")
_add(_ffs(32), "ffs"), _add(_ffs(64), "ffsll")
_add(_brev(32), "brev"), _add(_brev(64), "brevll")
_add(_mulhi(32), "mulhi", "umulhi"), _add(_mulhi(64), "mul64hi", "umul64hi")
_add(_mul24, "mul24", "umul24")
_add(_hadd(0), "hadd", "uhadd"), _add(_hadd(1), "rhadd", "urhadd")
_add(_byte_perm, "byte_perm")
_add(_sad, "sad", "usad")
_add(_int_abs, "abs", "llabs")

_SIMPLE = {
    "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "exp2": np.exp2, "exp": np.exp, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh, "atan2": np.arctan2, "hypot": np.hypot, "cbrt": np.cbrt,
    "copysign": np.copysign, "nextafter": np.nextafter, "fmod": np.fmod, "pow": np.power,
    "ldexp": np.ldexp, "scalbn": np.ldexp,
}
for _name, _fn in _SIMPLE.items():
    # nextafter must step in the operand's own precision; everything else is computed wide.
    _rule = _fn if _name in ("nextafter", "copysign", "fabs", "floor", "ceil", "trunc", "rint",
                             "nearbyint", "ldexp", "scalbn") else _as_float(_fn)
    _add(_rule, _name + "f", _name)
NUMPY_RULES["__nv_fabsf"] = np.abs
_add(_as_float(lambda x: np.power(10.0, x)), "exp10f", "exp10")
_add(_as_float(lambda x: 1 / np.sqrt(x)), "rsqrtf", "rsqrt", "frsqrt_rn")
_add(_as_float(np.sqrt), "sqrtf", "sqrt")
_add(_as_float(lambda x: 1 / np.cbrt(x)), "rcbrtf", "rcbrt")
_add(_as_float(lambda x, y: 1 / np.hypot(x, y)), "rhypotf", "rhypot")
_add(_as_float(_norm), "norm3df", "norm3d", "norm4df", "norm4d")
_add(_as_float(lambda *a: 1 / _norm(*a)), "rnorm3df", "rnorm3d", "rnorm4df", "rnorm4d")
_add(_as_float(_sinpi), "sinpif", "sinpi")
_add(_as_float(_cospi), "cospif", "cospi")
_add(_as_float(lambda x, y: np.where(x > y, x - y, np.where(np.isnan(x) | np.isnan(y),
                                                            np.nan, 0.0))), "fdimf", "fdim")
_add(_round, "roundf", "round")
_add(lambda x: _float_to_int(np.int64, "rn")(_round(x)), "llroundf", "llround")
_add(_float_to_int(np.int64, "rn"), "llrintf", "llrint")
_add(_as_float(_per_element(math.erf)), "erff", "erf")
_add(_as_float(_per_element(math.erfc)), "erfcf", "erfc")
_add(_as_float(_erfcx), "erfcxf", "erfcx")
_add(_as_float(_per_element(math.lgamma)), "lgammaf", "lgamma")
_add(_as_float(_per_element(math.gamma)), "tgammaf", "tgamma")
_add(_as_float(_normcdf), "normcdff", "normcdf")
_add(_as_float(_scipy("erfinv")), "erfinvf", "erfinv")
_add(_as_float(_scipy("erfcinv")), "erfcinvf", "erfcinv")
_add(_as_float(_normcdfinv), "normcdfinvf", "normcdfinv")
_add(_as_float(_scipy("j0")), "j0f", "j0")
_add(_as_float(_scipy("j1")), "j1f", "j1")
_add(_as_float(_scipy("y0")), "y0f", "y0")
_add(_as_float(_scipy("y1")), "y1f", "y1")
_add(lambda n, x: np.asarray(_jn(n, x)).astype(np.asarray(x).dtype), "jnf", "jn")
_add(lambda n, x: np.asarray(_yn(n, x)).astype(np.asarray(x).dtype), "ynf", "yn")
_add(_as_float(_scipy("i0")), "cyl_bessel_i0f", "cyl_bessel_i0")
_add(_as_float(_scipy("i1")), "cyl_bessel_i1f", "cyl_bessel_i1")
_add(_as_float(_remainder), "remainderf", "remainder")
_add(_powi, "powif", "powi")
_add(_ilogb, "ilogbf", "ilogb")
_add(_logb, "logbf", "logb")
_add(lambda x: np.signbit(x).astype(np.int32), "signbitf", "signbitd")
_add(lambda x: np.isnan(x).astype(np.int32), "isnanf", "isnand")
_add(lambda x: np.isinf(x).astype(np.int32), "isinff", "isinfd")
_add(_isfinite, "finitef", "isfinited")
_add(_saturate, "saturatef")
_add(_rcp64h, "rcp64h")
_add(_as_float(lambda x, y: x / y), "fast_fdividef")
for _name, _fn in {"sinf": np.sin, "cosf": np.cos, "log2f": np.log2, "logf": np.log,
                   "expf": np.exp, "tanf": np.tan, "log10f": np.log10, "powf": np.power,
                   "exp10f": lambda x: np.power(10.0, x)}.items():
    _add(_as_float(_fn), "fast_" + _name)

_FRACTION_OPS = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
}
for _mode in _ROUNDING:
    for _name, (_exact_fn, _near) in _FRACTION_OPS.items():
        _add(_exact(_exact_fn, _near, _mode), f"f{_name}_{_mode}", f"d{_name}_{_mode}")
    _add(_exact(lambda a: 1 / a, lambda a: 1 / a, _mode), f"frcp_{_mode}", f"drcp_{_mode}")
    _add(_exact(lambda a, b, c: a * b + c, lambda a, b, c: a * b + c, _mode, False),
         f"fmaf_{_mode}", f"fma_{_mode}")
    _add(_sqrt_rounded(_mode), f"fsqrt_{_mode}", f"dsqrt_{_mode}")
    _add(_convert_float(np.float32, _mode), f"double2float_{_mode}", f"int2float_{_mode}",
         f"uint2float_{_mode}", f"ll2float_{_mode}", f"ull2float_{_mode}")
    _add(_convert_float(np.float64, _mode), f"ll2double_{_mode}", f"ull2double_{_mode}")
    _add(_float_to_int(np.int32, _mode), f"double2int_{_mode}", f"float2int_{_mode}")
    _add(_float_to_int(np.uint32, _mode), f"double2uint_{_mode}", f"float2uint_{_mode}")
    _add(_float_to_int(np.int64, _mode), f"double2ll_{_mode}", f"float2ll_{_mode}")
    _add(_float_to_int(np.uint64, _mode), f"double2ull_{_mode}", f"float2ull_{_mode}")
# fma with one rounding: the exact product-sum rounded to nearest (also `tl.fma` of fp64).
fma_nearest = _exact(lambda a, b, c: a * b + c, lambda a, b, c: a * b + c, "rn", False)
_add(fma_nearest, "fmaf", "fma")
_add(_convert_float(np.float64, "rn"), "int2double_rn", "uint2double_rn")
_add(_hilo, "hiloint2double")
_add(lambda x: np.asarray(x, dtype=np.float64).view(np.uint64).astype(np.uint32).view(np.int32),
     "double2loint")
_add(lambda x: (np.asarray(x, dtype=np.float64).view(np.uint64) >> np.uint64(32))
     .astype(np.uint32).view(np.int32), "double2hiint")
_add(_view(np.float32), "int_as_float", "uint_as_float")
_add(_view(np.int32), "float_as_int", "float_as_uint")
_add(_view(np.float64), "longlong_as_double")
_add(_view(np.int64), "double_as_longlong")
