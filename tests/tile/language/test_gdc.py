"""`tl.extra.cuda.gdc_wait` / `gdc_launch_dependents` (programmatic dependent launch, Triton
3.6): the IR ops, the PTX they lower to on sm_90+ (before the loads they guard, pipelined ones
included), the compile error before sm_90, the same builtins in a Gluon kernel, and a
producer / consumer pair launched with `launch_pdl=True` in the interpreter."""

import re

import numpy as np
import pytest

import gluon
import tile
import tile.language as tl
from gluon import language as gl
from shared_codegen.errors import CompilationError
from tile.language.extra.cuda import gdc_launch_dependents, gdc_wait


@tile.jit
def _producer(x_ptr, y_ptr, n, BLOCK: tl.constexpr, USE_GDC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if USE_GDC:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(y_ptr + offs, x * 2.0, mask=mask)


@tile.jit
def _consumer(y_ptr, z_ptr, n, BLOCK: tl.constexpr, USE_GDC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if USE_GDC:
        gdc_wait()  # y_ptr is what the producer wrote: read it only after the wait
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(z_ptr + offs, y + 1.0, mask=mask)


@tile.jit
def _both(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.extra.cuda.gdc_wait()
    x = tl.load(x_ptr + offs, mask=mask)
    gdc_launch_dependents()
    tl.store(y_ptr + offs, x + 1.0, mask=mask)


@tile.jit
def _pipelined(a, b, c, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    tl.extra.cuda.gdc_wait()
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


@gluon.jit
def _gluon_both(x_ptr, y_ptr, n, BLOCK: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offs < n
    # Upstream Gluon has no gdc builtins of its own: its kernels call triton.language's.
    tl.extra.cuda.gdc_wait()
    x = gl.load(x_ptr + offs, mask=mask)
    tl.extra.cuda.gdc_launch_dependents()
    gl.store(y_ptr + offs, x + 1.0, mask=mask)


SIGNATURE = {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16", "n": "i32"}


def _ordered(ptx: str):
    """The griddepcontrol instructions and global accesses of `ptx`, in order."""
    kinds = ("griddepcontrol.wait", "griddepcontrol.launch_dependents", "ld.global",
             "st.global", "cp.async.cg")
    found = []
    for line in ptx.splitlines():
        found += [k for k in kinds if k in line][:1]
    return found


def test_the_builtins_are_ops_of_their_own():
    ir = tile.compile(_both, SIGNATURE, {"BLOCK": 128}, target="sm_90a").asm["ir"]
    ops = [line.strip() for line in ir.splitlines() if "gdc" in line]
    assert ops == ["ttng.gdc_wait", "ttng.gdc_launch_dependents"]


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_the_ptx_waits_before_the_loads_and_releases_where_written(target):
    ptx = tile.compile(_both, SIGNATURE, {"BLOCK": 128}, target=target).asm["ptx"]
    assert "\tgriddepcontrol.wait;" in ptx and "\tgriddepcontrol.launch_dependents;" in ptx
    order = _ordered(ptx)
    assert order == ["griddepcontrol.wait", "ld.global", "griddepcontrol.launch_dependents",
                     "st.global"]


def test_a_pipelined_loop_issues_its_first_loads_after_the_wait():
    ptx = tile.compile(_pipelined, {"a": "*fp16:16", "b": "*fp16:16", "c": "*fp32:16",
                                    "K": "i32:16"}, {"BM": 64, "BN": 64, "BK": 32},
                       target="sm_90a").asm["ptx"]
    order = _ordered(ptx)
    assert "cp.async.cg" in order and order[0] == "griddepcontrol.wait"


def test_gluon_kernels_call_the_same_builtins():
    ptx = gluon.compile(_gluon_both, SIGNATURE, {"BLOCK": 128}, target="sm_90a").asm["ptx"]
    assert _ordered(ptx) == ["griddepcontrol.wait", "ld.global",
                             "griddepcontrol.launch_dependents", "st.global"]


def test_before_sm90_the_compile_names_the_builtin_and_the_target():
    # Triton 3.6 emits the instruction anyway and ptxas rejects the module; here the compile
    # stops at the call, whose line it shows.
    with pytest.raises(CompilationError) as info:
        tile.compile(_both, SIGNATURE, {"BLOCK": 128}, target="sm_80")
    message = str(info.value)
    assert re.search(r"test_gdc\.py:\d+: ttng\.gdc_wait: gdc_wait\(\) needs sm_90 or newer "
                     r"\(griddepcontrol, programmatic dependent launch\); the target is "
                     r"sm_80\.", message), message
    assert "tl.extra.cuda.gdc_wait()" in message
    # Behind a constexpr flag, as Triton's tutorial 11 does, the kernel compiles for sm_80.
    ptx = tile.compile(_consumer, {"y_ptr": "*fp32", "z_ptr": "*fp32", "n": "i32"},
                       {"BLOCK": 128, "USE_GDC": False}, target="sm_80").asm["ptx"]
    assert "griddepcontrol" not in ptx


@pytest.mark.parametrize("use_gdc", [True, False])
def test_a_producer_consumer_pair_runs_in_the_interpreter(use_gdc):
    # Launches run one after another there, so the wait finds the producer done.
    n, block = 1000, 256
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    grid = (tile.cdiv(n, block),)
    for _ in range(3):
        _producer[grid](x, y, n, BLOCK=block, USE_GDC=use_gdc, launch_pdl=use_gdc)
        _consumer[grid](y, z, n, BLOCK=block, USE_GDC=use_gdc, launch_pdl=use_gdc)
    np.testing.assert_array_equal(z, x * 2.0 + 1.0)


def test_the_builtins_are_at_triton_paths():
    assert tl.extra.cuda.gdc_wait is gdc_wait
    assert tl.extra.cuda.gdc_launch_dependents is gdc_launch_dependents
    with pytest.raises(RuntimeError, match="gdc_wait\\(\\) is a kernel builtin"):
        gdc_wait()


def test_the_converter_prints_the_builtins_and_the_gluon_source_runs(load_source):
    # Gluon has no names of its own for them (as upstream): the printed kernel calls tile's.
    from tile.convert import to_gluon
    x = np.arange(300, dtype=np.float32)
    text = to_gluon(_both, x, x, 300, BLOCK=128)
    assert "from tile.language.extra import cuda\n" in text
    assert text.index("cuda.gdc_wait()") < text.index("gl.load(") < \
        text.index("cuda.gdc_launch_dependents()") < text.index("gl.store(")
    converted = load_source("converted_gdc", text)
    y = np.zeros_like(x)
    converted._both[(3,)](x, y, 300)
    np.testing.assert_array_equal(y, x + 1.0)
    ptx = gluon.compile(converted._both, {"x_ptr": "*fp32:16", "y_ptr": "*fp32:16",
                                          "n": "i32"}, target="sm_90a").asm["ptx"]
    assert "griddepcontrol.wait;" in ptx and "griddepcontrol.launch_dependents;" in ptx
