"""The Blackwell attention forward (examples/flash_attention/blackwell.py) on a GPU: on
sm_100 against a float32 computation (every dtype, D 64 and 128, causal and not); on any
other GPU (the H100 of the test runs) the clear error that points to hopper.py."""

import math
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


def _is_blackwell(torch):
    return torch.cuda.get_device_capability()[0] == 10


def test_a_non_blackwell_gpu_gets_a_clear_error(torch):
    if _is_blackwell(torch):
        pytest.skip("this GPU is a Blackwell")
    import blackwell
    q = torch.zeros((1, 2, 128, 64), device="cuda", dtype=torch.float16)
    major, minor = torch.cuda.get_device_capability()
    with pytest.raises(RuntimeError) as info:
        blackwell.attention_forward(q, q, q)
    assert str(info.value) == (
        f"attention_forward (Blackwell): needs an sm_100 GPU (tcgen05 and tensor memory); "
        f"{torch.cuda.get_device_name()} is sm_{major}{minor}: use "
        f"examples/flash_attention/hopper.py there")


@pytest.mark.parametrize("dtype, D, causal, N_q, N_kv", [
    ("float16", 128, False, 1000, 1000), ("bfloat16", 128, True, 700, 1500),
    ("float16", 64, True, 1500, 700), ("float8_e4m3fn", 128, True, 1000, 1000),
    ("float8_e4m3fn", 64, False, 777, 777)])
def test_blackwell_matches_float32(torch, dtype, D, causal, N_q, N_kv):
    if not _is_blackwell(torch):
        pytest.skip("needs an sm_100 GPU")
    import blackwell
    g = torch.Generator(device="cuda").manual_seed(0)
    shape = lambda n, h: (2, h, n, D)  # noqa: E731
    q, k, v = (torch.randn(shape(n, h), device="cuda", generator=g).to(getattr(torch, dtype))
               for n, h in ((N_q, 8), (N_kv, 2), (N_kv, 2)))
    o, lse = blackwell.attention_forward(q, k, v, causal=causal, return_lse=True)
    qf, kf, vf = q.float(), k.float().repeat_interleave(4, 1), v.float().repeat_interleave(4, 1)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(D)
    if causal:
        keep = torch.arange(N_kv, device="cuda")[None, :] <= \
            torch.arange(N_q, device="cuda")[:, None] + (N_kv - N_q)
        s = s.masked_fill(~keep, -float("inf"))
    ref = torch.softmax(s, -1).nan_to_num(0.0) @ vf
    tol = {"float16": 2e-3, "bfloat16": 1.5e-2, "float8_e4m3fn": 8e-2}[dtype]
    assert float((o.float() - ref).abs().max() / ref.abs().max()) <= tol
    ref_lse = torch.logsumexp(s, -1)
    finite = torch.isfinite(ref_lse)
    assert float((lse[finite] - ref_lse[finite]).abs().max()) < 1e-4
