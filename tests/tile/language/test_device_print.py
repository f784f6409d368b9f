"""`tl.device_print` / `print` / `tl.static_print`: the interpreter's lines (the same text the
GPU's vprintf writes, one line per element with pid and index) and the vprintf lowering."""

import re

import numpy as np
import pytest

import tile
import tile.language as tl


@tile.jit
def print_kernel(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.device_print("x", x)
    tl.device_print("x and offs", x, offs, hex=True)
    tl.device_print("pid ", tl.program_id(0))
    print("python print", offs * 2)


@tile.jit
def banner_kernel(N: tl.constexpr):
    tl.static_print("N is", N)
    tl.device_print("no values")


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("SC_INTERPRET", "1")


def test_interpreter_prints_one_line_per_element_in_tritons_format(interpret, capsys):
    print_kernel[(2,)](np.array([0.5, -1.0, 2.0, 3.25], np.float32), N=4)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [f"pid (0, 0, 0) idx ({i}) x: {v:f}"
                         for i, v in enumerate([0.5, -1.0, 2.0, 3.25])]
    assert lines[4:6] == ["pid (0, 0, 0) idx (0) x and offs: (operand 0) 0x3f000000",
                          "pid (0, 0, 0) idx (1) x and offs: (operand 0) 0xbf800000"]
    assert lines[8:10] == ["pid (0, 0, 0) idx (0) x and offs: (operand 1) 0x00000000",
                           "pid (0, 0, 0) idx (1) x and offs: (operand 1) 0x00000001"]
    assert lines[12] == "pid (0, 0, 0) idx () pid: 0"
    assert lines[13:17] == [f"pid (0, 0, 0) idx ({i}) python print: {2 * i}" for i in range(4)]
    assert lines[17] == "pid (1, 0, 0) idx (0) x: 0.500000"
    assert len(lines) == 34


def test_index_fields_are_padded_to_the_dimension_size(interpret, capsys):
    @tile.jit
    def grid_kernel(M: tl.constexpr, N: tl.constexpr):
        v = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
        tl.device_print("", v.to(tl.int64))

    grid_kernel[(1,)](M=2, N=16)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "pid (0, 0, 0) idx (0,  0): 0"  # Triton turns "" into ": "
    assert lines[17] == "pid (0, 0, 0) idx (1,  1): 17"
    assert len(lines) == 32


def test_static_print_runs_at_compile_time_and_a_bare_prefix_prints_once(interpret, capsys):
    banner_kernel[(1,)](N=8)
    assert capsys.readouterr().out.splitlines() == ["N is 8", "pid (0, 0, 0) no values"]


def test_device_print_lowers_to_vprintf_with_the_same_formats():
    compiled = tile.compile(print_kernel, signature={"x_ptr": "*fp32"}, constexprs={"N": 256},
                            target="sm_90a")
    ptx = compiled.asm["ptx"]
    assert "vprintf" in ptx and compiled.asm["cubin"]
    formats = {bytes(int(c) for c in body.split(", ")).decode() for body in
               re.findall(r"\.b8 printf_format\S*\[\d+\] = \{([\d, ]+)\}", ptx)}
    assert formats == {"pid (%u, %u, %u) idx (%3u) x: %f\n",
                       "pid (%u, %u, %u) idx (%3u) x and offs: (operand 0) 0x%08x\n",
                       "pid (%u, %u, %u) idx (%3u) x and offs: (operand 1) 0x%08x\n",
                       "pid (%u, %u, %u) idx () pid: %i\n",
                       "pid (%u, %u, %u) idx (%3u) python print: %i\n"}
    # 256 elements over 128 threads: two vprintf calls per thread for each tensor operand,
    # one (thread 0 only) for the scalar.
    assert ptx.count("call.uni") == 2 * 4 + 1


@tile.jit
def dtypes_print_kernel(x_ptr):
    r = tl.arange(0, 2)
    tl.device_print("p", x_ptr)
    tl.device_print("b", r > 0)
    tl.device_print("h", r.to(tl.int64), r.to(tl.float16), hex=True)
    tl.device_print("f", r.to(tl.bfloat16), r.to(tl.int8), r.to(tl.uint32))


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_every_dtype_prints_with_its_spec(target):
    ptx = tile.compile(dtypes_print_kernel, signature={"x_ptr": "*fp32"}, target=target).asm["ptx"]
    formats = {bytes(int(c) for c in body.split(", ")).decode() for body in
               re.findall(r"\.b8 printf_format\S*\[\d+\] = \{([\d, ]+)\}", ptx)}
    assert formats == {"pid (%u, %u, %u) idx () p: %p\n",
                       "pid (%u, %u, %u) idx (%1u) b: %u\n",
                       "pid (%u, %u, %u) idx (%1u) h: (operand 0) 0x%016llx\n",
                       "pid (%u, %u, %u) idx (%1u) h: (operand 1) 0x%04x\n",
                       "pid (%u, %u, %u) idx (%1u) f: (operand 0) %f\n",
                       "pid (%u, %u, %u) idx (%1u) f: (operand 1) %i\n",
                       "pid (%u, %u, %u) idx (%1u) f: (operand 2) %u\n"}


def test_pointers_bools_and_hex_in_the_interpreter(interpret, capsys):
    dtypes_print_kernel[(1,)](np.zeros(2, np.float32))
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"pid \(0, 0, 0\) idx \(\) p: 0x[0-9a-f]+", lines[0])
    assert lines[1:3] == ["pid (0, 0, 0) idx (0) b: 0", "pid (0, 0, 0) idx (1) b: 1"]
    assert lines[4] == "pid (0, 0, 0) idx (1) h: (operand 0) 0x0000000000000001"
    assert lines[6] == "pid (0, 0, 0) idx (1) h: (operand 1) 0x3c00"
    assert lines[8:] == ["pid (0, 0, 0) idx (1) f: (operand 0) 1.000000",
                         "pid (0, 0, 0) idx (0) f: (operand 1) 0",
                         "pid (0, 0, 0) idx (1) f: (operand 1) 1",
                         "pid (0, 0, 0) idx (0) f: (operand 2) 0",
                         "pid (0, 0, 0) idx (1) f: (operand 2) 1"]
