"""fp32 -> fp16 / bf16 conversions in the PTX: two values per `cvt.rn.f16x2.f32` /
`cvt.rn.bf16x2.f32` (sm_80+, every supported target: one instruction writing a packed
register, where scalar cvts need a PRMT each to pack pairs, as attention's P does every
iteration); the interpreter's values are numpy's rounding."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tl_test_util import NP

N = 1024
SIG = {"x_ptr": "*fp32", "out_ptr": "*fp16"}


@tile.jit
def narrow_kernel(x_ptr, out_ptr, DT: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(DT))


@pytest.mark.parametrize("dt,name", [(tl.float16, "f16"), (tl.bfloat16, "bf16")])
def test_fp32_narrows_two_values_per_cvt_on_sm_80_and_later(dt, name):
    sig = dict(SIG, out_ptr=f"*{'fp16' if name == 'f16' else 'bf16'}")
    for target in ("sm_80", "sm_90a"):
        ptx = tile.compile(narrow_kernel, signature=sig, constexprs={"DT": dt, "N": N},
                           target=target).asm["ptx"]
        assert ptx.count(f"cvt.rn.{name}x2.f32") == N // 128 // 2  # 8 values per thread
        assert f"cvt.rn.{name}.f32" not in ptx


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_interpreted_values_round_to_nearest_even(name):
    x = (np.random.default_rng(3).standard_normal(N) * 1000).astype(np.float32)
    out = np.zeros(N, NP[name])
    narrow_kernel[(1,)](x, out, DT=getattr(tl, name), N=N)
    np.testing.assert_array_equal(out, x.astype(NP[name]))
