"""tl.map_elementwise: a scalar @jit function (with per-element branches) over broadcast
tensors, with pack > 1 (also with fewer elements per thread than the pack) and several
results, in the interpreter against numpy and in PTX
(one branch per element: the function runs on scalars), and its error messages."""

import numpy as np
import pytest

import tile
import tile.language as tl


@tile.jit
def selu_scalar(x, alpha):
    if x > 0:
        y = x
    else:
        y = alpha * (tl.exp(x) - 1)
    return y


@tile.jit
def pair_scalar(a0, a1, b0, b1):
    # Which elements share a pack is the compiler's choice: results depend on their own only.
    return a0 * b0 + 1, a1 * b1 + 1, a0 > b0, a1 > b1


@tile.jit
def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@tile.jit
def map_kernel(x_ptr, n_ptr, out_ptr, out2_ptr, gt_ptr, steps_ptr, M: tl.constexpr,
               N: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.map_elementwise(selu_scalar, x, 1.5))
    y, gt = tl.map_elementwise(pair_scalar, x, x * 2, pack=2)
    tl.store(out2_ptr + offs, y)
    tl.store(gt_ptr + offs, gt.to(tl.int8))
    n = tl.load(n_ptr + tl.arange(0, N))
    tl.store(steps_ptr + tl.arange(0, N), tl.map_elementwise(collatz_steps, n))


def _collatz(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@pytest.mark.parametrize("shape", [(4, 32), (16, 16)])
def test_map_elementwise_matches_numpy(shape):
    M, N = shape
    x = np.random.default_rng(M).uniform(-2, 2, shape).astype(np.float32)
    n = np.random.default_rng(N).integers(1, 50, N).astype(np.int32)
    out, out2 = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    gt, steps = np.zeros(shape, np.int8), np.zeros(N, np.int32)
    map_kernel[(1,)](x, n, out, out2, gt, steps, M=M, N=N)
    np.testing.assert_allclose(out, np.where(x > 0, x, 1.5 * (np.exp(x) - 1)), rtol=1e-6)
    np.testing.assert_allclose(out2, x * x * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(gt, (x > 2 * x).astype(np.int8))
    np.testing.assert_array_equal(steps, [_collatz(int(v)) for v in n])


def test_map_elementwise_compiles_the_scalar_function_per_element():
    sig = {"x_ptr": "*fp32:16", "n_ptr": "*i32:16", "out_ptr": "*fp32:16",
           "out2_ptr": "*fp32:16", "gt_ptr": "*i8:16", "steps_ptr": "*i32:16"}
    for target in ("sm_90a", "sm_80"):
        ptx = tile.compile(map_kernel, signature=sig, constexprs={"M": 16, "N": 16},
                           target=target).asm["ptx"]
        # 256 elements on 128 threads: selu's branch and exp run for each of a thread's two.
        assert ptx.count("ex2.approx") == 2 and "bra" in ptx
    # One element per thread with pack=2: the pack repeats it.
    ptx = tile.compile(map_kernel, signature=sig, constexprs={"M": 4, "N": 32}).asm["ptx"]
    assert ptx.count("ex2.approx") == 1


@tile.jit
def map_errors(x_ptr, CASE: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 8))
    if CASE == "pack_count":
        tl.map_elementwise(selu_scalar, x, 1.0, pack=2)
    elif CASE == "pack_value":
        tl.map_elementwise(selu_scalar, x, 1.0, pack=0)
    else:
        tl.map_elementwise(selu_scalar, 1.0, 2.0)


@pytest.mark.parametrize("case,message", [
    ("pack_count", "bad call of `selu_scalar`"),
    ("pack_value", "tl.map_elementwise: `pack` must be a compile-time int >= 1, got 0"),
    ("scalars", "tl.map_elementwise needs at least one tensor input"),
])
def test_map_elementwise_errors(case, message):
    with pytest.raises(tile.CompilationError) as e:
        map_errors[(1,)](np.zeros(8, np.float32), CASE=case)
    assert message in e.value.message
