"""`tl.extra.cuda.libdevice`: NVIDIA's libdevice math library, with Triton 3.6's names.

Every function dispatches on its operands' dtypes to one `__nv_*` symbol, as Triton's
`extern_elementwise` does: numbers become tensors (int -> int32, float -> fp32), and operand
dtypes that match no signature are first promoted to one common dtype (`x_fp32 + y_fp64` rules).
The kernel's LLVM module links libdevice's bitcode (`shared_codegen/lowering/libdevice.py`
says where it is found); the interpreter uses numpy (`shared_codegen/ops/extern/numpy_rules.py`).

`isnan`, `isinf`, `finitef` and `isfinited` return int1, like Triton's.
"""

from __future__ import annotations

from shared_codegen.frontend.values import builtin
from shared_codegen.ir.types import float32, float64, int1, int32, int64, uint32, uint64
from shared_codegen.ops.extern.definition import ExternElementwiseOp
from tile.language import _types as T

# name  signature:symbol ...   signature: operand dtypes '>' result dtype; symbol without __nv_
_SIGNATURES = """
clz               i32>i32:clz i64>i32:clzll
popc              i32>i32:popc i64>i32:popcll
byte_perm         i32,i32,i32>i32:byte_perm
mulhi             i32,i32>i32:mulhi u32,u32>u32:umulhi i64,i64>i64:mul64hi u64,u64>u64:umul64hi
mul24             i32,i32>i32:mul24 u32,u32>u32:umul24
brev              i32>i32:brev i64>i64:brevll
sad               i32,i32,u32>i32:sad u32,u32,u32>u32:usad
abs               i32>i32:abs i64>i64:llabs f32>f32:fabsf f64>f64:fabs
floor             f32>f32:floorf f64>f64:floor
rcp64h            f64>f64:rcp64h
rsqrt             f32>f32:rsqrtf f64>f64:rsqrt
ceil              f64>f64:ceil f32>f32:ceilf
trunc             f64>f64:trunc f32>f32:truncf
exp2              f32>f32:exp2f f64>f64:exp2
saturatef         f32>f32:saturatef
fma_rn            f32,f32,f32>f32:fmaf_rn f64,f64,f64>f64:fma_rn
fma_rz            f32,f32,f32>f32:fmaf_rz f64,f64,f64>f64:fma_rz
fma_rd            f32,f32,f32>f32:fmaf_rd f64,f64,f64>f64:fma_rd
fma_ru            f32,f32,f32>f32:fmaf_ru f64,f64,f64>f64:fma_ru
fast_dividef      f32,f32>f32:fast_fdividef
div_rn            f32,f32>f32:fdiv_rn f64,f64>f64:ddiv_rn
div_rz            f32,f32>f32:fdiv_rz f64,f64>f64:ddiv_rz
div_rd            f32,f32>f32:fdiv_rd f64,f64>f64:ddiv_rd
div_ru            f32,f32>f32:fdiv_ru f64,f64>f64:ddiv_ru
rcp_rn            f32>f32:frcp_rn f64>f64:drcp_rn
rcp_rz            f32>f32:frcp_rz f64>f64:drcp_rz
rcp_rd            f32>f32:frcp_rd f64>f64:drcp_rd
rcp_ru            f32>f32:frcp_ru f64>f64:drcp_ru
sqrt_rn           f32>f32:fsqrt_rn f64>f64:dsqrt_rn
sqrt_rz           f32>f32:fsqrt_rz f64>f64:dsqrt_rz
sqrt_rd           f32>f32:fsqrt_rd f64>f64:dsqrt_rd
sqrt_ru           f32>f32:fsqrt_ru f64>f64:dsqrt_ru
sqrt              f32>f32:sqrtf f64>f64:sqrt
add_rn            f64,f64>f64:dadd_rn f32,f32>f32:fadd_rn
add_rz            f64,f64>f64:dadd_rz f32,f32>f32:fadd_rz
add_rd            f64,f64>f64:dadd_rd f32,f32>f32:fadd_rd
add_ru            f64,f64>f64:dadd_ru f32,f32>f32:fadd_ru
mul_rn            f64,f64>f64:dmul_rn f32,f32>f32:fmul_rn
mul_rz            f64,f64>f64:dmul_rz f32,f32>f32:fmul_rz
mul_rd            f64,f64>f64:dmul_rd f32,f32>f32:fmul_rd
mul_ru            f64,f64>f64:dmul_ru f32,f32>f32:fmul_ru
double2float_rn   f64>f32:double2float_rn
double2float_rz   f64>f32:double2float_rz
double2float_rd   f64>f32:double2float_rd
double2float_ru   f64>f32:double2float_ru
double2int_rn     f64>i32:double2int_rn
double2int_rz     f64>i32:double2int_rz
double2int_rd     f64>i32:double2int_rd
double2int_ru     f64>i32:double2int_ru
double2uint_rn    f64>i32:double2uint_rn
double2uint_rz    f64>i32:double2uint_rz
double2uint_rd    f64>i32:double2uint_rd
double2uint_ru    f64>i32:double2uint_ru
int2double_rn     i32>f64:int2double_rn
uint2double_rn    u32>f64:uint2double_rn
float2int_rn      f32>i32:float2int_rn
float2int_rz      f32>i32:float2int_rz
float2int_rd      f32>i32:float2int_rd
float2int_ru      f32>i32:float2int_ru
float2uint_rn     f32>i32:float2uint_rn
float2uint_rz     f32>i32:float2uint_rz
float2uint_rd     f32>i32:float2uint_rd
float2uint_ru     f32>i32:float2uint_ru
int2float_rn      i32>f32:int2float_rn
int2float_rz      i32>f32:int2float_rz
int2float_rd      i32>f32:int2float_rd
int2float_ru      i32>f32:int2float_ru
uint2float_rn     u32>f32:uint2float_rn
uint2float_rz     u32>f32:uint2float_rz
uint2float_rd     u32>f32:uint2float_rd
uint2float_ru     u32>f32:uint2float_ru
hiloint2double    i32,i32>f64:hiloint2double
double2loint      f64>i32:double2loint
double2hiint      f64>i32:double2hiint
float2ll_rn       f32>i64:float2ll_rn
float2ll_rz       f32>i64:float2ll_rz
float2ll_rd       f32>i64:float2ll_rd
float2ll_ru       f32>i64:float2ll_ru
float2ull_rn      f32>i64:float2ull_rn
float2ull_rz      f32>i64:float2ull_rz
float2ull_rd      f32>i64:float2ull_rd
float2ull_ru      f32>i64:float2ull_ru
double2ll_rn      f64>i64:double2ll_rn
double2ll_rz      f64>i64:double2ll_rz
double2ll_rd      f64>i64:double2ll_rd
double2ll_ru      f64>i64:double2ll_ru
double2ull_rn     f64>i64:double2ull_rn
double2ull_rz     f64>i64:double2ull_rz
double2ull_rd     f64>i64:double2ull_rd
double2ull_ru     f64>i64:double2ull_ru
ll2float_rn       i64>f32:ll2float_rn
ll2float_rz       i64>f32:ll2float_rz
ll2float_rd       i64>f32:ll2float_rd
ll2float_ru       i64>f32:ll2float_ru
ull2float_rn      u64>f32:ull2float_rn
ull2float_rz      u64>f32:ull2float_rz
ull2float_rd      u64>f32:ull2float_rd
ull2float_ru      u64>f32:ull2float_ru
ll2double_rn      i64>f64:ll2double_rn
ll2double_rz      i64>f64:ll2double_rz
ll2double_rd      i64>f64:ll2double_rd
ll2double_ru      i64>f64:ll2double_ru
ull2double_rn     u64>f64:ull2double_rn
ull2double_rz     u64>f64:ull2double_rz
ull2double_rd     u64>f64:ull2double_rd
ull2double_ru     u64>f64:ull2double_ru
int_as_float      i32>f32:int_as_float
float_as_int      f32>i32:float_as_int
uint_as_float     u32>f32:uint_as_float
float_as_uint     f32>i32:float_as_uint
longlong_as_double i64>f64:longlong_as_double
double_as_longlong f64>i64:double_as_longlong
fast_sinf         f32>f32:fast_sinf
fast_cosf         f32>f32:fast_cosf
fast_log2f        f32>f32:fast_log2f
fast_logf         f32>f32:fast_logf
fast_expf         f32>f32:fast_expf
fast_tanf         f32>f32:fast_tanf
fast_exp10f       f32>f32:fast_exp10f
fast_log10f       f32>f32:fast_log10f
fast_powf         f32,f32>f32:fast_powf
hadd              i32,i32>i32:hadd u32,u32>u32:uhadd
rhadd             i32,i32>i32:rhadd u32,u32>u32:urhadd
sub_rn            f32,f32>f32:fsub_rn f64,f64>f64:dsub_rn
sub_rz            f32,f32>f32:fsub_rz f64,f64>f64:dsub_rz
sub_rd            f32,f32>f32:fsub_rd f64,f64>f64:dsub_rd
sub_ru            f32,f32>f32:fsub_ru f64,f64>f64:dsub_ru
rsqrt_rn          f32>f32:frsqrt_rn
ffs               i32>i32:ffs i64>i32:ffsll
rint              f32>f32:rintf f64>f64:rint
llrint            f32>i64:llrintf f64>i64:llrint
nearbyint         f32>f32:nearbyintf f64>f64:nearbyint
signbit           f32>i32:signbitf f64>i32:signbitd
copysign          f32,f32>f32:copysignf f64,f64>f64:copysign
nextafter         f32,f32>f32:nextafterf f64,f64>f64:nextafter
sin               f32>f32:sinf f64>f64:sin
cos               f32>f32:cosf f64>f64:cos
sinpi             f32>f32:sinpif f64>f64:sinpi
cospi             f32>f32:cospif f64>f64:cospi
tan               f32>f32:tanf f64>f64:tan
log2              f32>f32:log2f f64>f64:log2
exp               f32>f32:expf f64>f64:exp
exp10             f32>f32:exp10f f64>f64:exp10
cosh              f32>f32:coshf f64>f64:cosh
sinh              f32>f32:sinhf f64>f64:sinh
tanh              f32>f32:tanhf f64>f64:tanh
atan2             f32,f32>f32:atan2f f64,f64>f64:atan2
atan              f32>f32:atanf f64>f64:atan
asin              f32>f32:asinf f64>f64:asin
acos              f32>f32:acosf f64>f64:acos
log               f32>f32:logf f64>f64:log
log10             f32>f32:log10f f64>f64:log10
log1p             f32>f32:log1pf f64>f64:log1p
acosh             f32>f32:acoshf f64>f64:acosh
asinh             f32>f32:asinhf f64>f64:asinh
atanh             f32>f32:atanhf f64>f64:atanh
expm1             f32>f32:expm1f f64>f64:expm1
hypot             f32,f32>f32:hypotf f64,f64>f64:hypot
rhypot            f32,f32>f32:rhypotf f64,f64>f64:rhypot
norm3d            f32,f32,f32>f32:norm3df f64,f64,f64>f64:norm3d
rnorm3d           f32,f32,f32>f32:rnorm3df f64,f64,f64>f64:rnorm3d
norm4d            f32,f32,f32,f32>f32:norm4df f64,f64,f64,f64>f64:norm4d
rnorm4d           f32,f32,f32,f32>f32:rnorm4df f64,f64,f64,f64>f64:rnorm4d
cbrt              f32>f32:cbrtf f64>f64:cbrt
rcbrt             f32>f32:rcbrtf f64>f64:rcbrt
j0                f32>f32:j0f f64>f64:j0
j1                f32>f32:j1f f64>f64:j1
y0                f32>f32:y0f f64>f64:y0
y1                f32>f32:y1f f64>f64:y1
yn                i32,f32>f32:ynf i32,f64>f64:yn
jn                i32,f32>f32:jnf i32,f64>f64:jn
cyl_bessel_i0     f32>f32:cyl_bessel_i0f f64>f64:cyl_bessel_i0
cyl_bessel_i1     f32>f32:cyl_bessel_i1f f64>f64:cyl_bessel_i1
erf               f32>f32:erff f64>f64:erf
erfinv            f32>f32:erfinvf f64>f64:erfinv
erfc              f32>f32:erfcf f64>f64:erfc
erfcx             f32>f32:erfcxf f64>f64:erfcx
erfcinv           f32>f32:erfcinvf f64>f64:erfcinv
normcdfinv        f32>f32:normcdfinvf f64>f64:normcdfinv
normcdf           f32>f32:normcdff f64>f64:normcdf
lgamma            f32>f32:lgammaf f64>f64:lgamma
ldexp             f32,i32>f32:ldexpf f64,i32>f64:ldexp
scalbn            f32,i32>f32:scalbnf f64,i32>f64:scalbn
fmod              f32,f32>f32:fmodf f64,f64>f64:fmod
remainder         f32,f32>f32:remainderf f64,f64>f64:remainder
fma               f32,f32,f32>f32:fmaf f64,f64,f64>f64:fma
pow               f32,i32>f32:powif f64,i32>f64:powi f32,f32>f32:powf f64,f64>f64:pow
tgamma            f32>f32:tgammaf f64>f64:tgamma
round             f32>f32:roundf f64>f64:round
llround           f32>i64:llroundf f64>i64:llround
fdim              f32,f32>f32:fdimf f64,f64>f64:fdim
ilogb             f32>i32:ilogbf f64>i32:ilogb
logb              f32>f32:logbf f64>f64:logb
isnan             f32>i32:isnanf f64>i32:isnand
finitef           f32>i32:finitef
isinf             f32>i32:isinff f64>i32:isinfd
isfinited         f64>i32:isfinited
"""
_DTYPES = {"i32": int32, "i64": int64, "u32": uint32, "u64": uint64, "f32": float32,
           "f64": float64}
# Triton converts these results to int1.
PREDICATES = frozenset({"isnan", "isinf", "finitef", "isfinited"})


def _parse(text: str) -> dict:
    functions = {}
    for line in text.strip().splitlines():
        name, *entries = line.split()
        overloads = {}
        for entry in entries:
            signature, symbol = entry.split(":")
            args, ret = signature.split(">")
            key = tuple(_DTYPES[a] for a in args.split(","))
            overloads[key] = ("__nv_" + symbol, _DTYPES[ret])
        functions[name] = overloads
    return functions


FUNCTIONS = _parse(_SIGNATURES)


def _signature_text(key) -> str:
    return "(" + ", ".join(T.type_name(t) for t in key) + ")"


def _dispatch(name: str, overloads: dict, args, sem):
    values = [sem._operand(T.plain_number(a), f"libdevice.{name}'s argument") for a in args]
    key = tuple(v.dtype for v in values)
    if key not in overloads:
        common = key[0]
        for other in key[1:]:
            common = sem.computation_type(common, False, other, False, False,
                                          f"libdevice.{name}")
        values = [sem.cast(v, common) for v in values]
        key = tuple(v.dtype for v in values)
    if key not in overloads:
        expected = ", ".join(_signature_text(k) for k in overloads)
        raise TypeError(f"libdevice.{name} does not take {_signature_text(key)}; it takes "
                        f"{expected} (cast the operands, e.g. x.to(tl.float32))")
    values = list(sem.broadcast_tensors(*values))
    symbol, ret = overloads[key]
    result = sem.make_tensor(ExternElementwiseOp.build(sem.builder, symbol,
                                                       [v.handle for v in values], ret))
    return sem.cast(result, int1) if name in PREDICATES else result


def _make(name: str, overloads: dict):
    arity = len(next(iter(overloads)))

    def fn(*args, _semantic=None):
        if len(args) != arity:
            raise TypeError(f"libdevice.{name} takes {arity} argument"
                            f"{'s' if arity > 1 else ''}, got {len(args)}")
        return _dispatch(name, overloads, args, _semantic)

    fn.__name__ = fn.__qualname__ = name
    symbols = ", ".join(f"{s} {_signature_text(k)}" for k, (s, _) in overloads.items())
    fn.__doc__ = f"libdevice's {name}: {symbols}."
    return builtin(fn)


for _name, _overloads in FUNCTIONS.items():
    globals()[_name] = _make(_name, _overloads)

__all__ = sorted(FUNCTIONS)
