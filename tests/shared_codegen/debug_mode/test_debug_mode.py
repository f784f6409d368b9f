"""GPU debug mode without a GPU (issue 16, item 2): what the debug variants compile to for
sm_90a (bounds compares, the trap-free record path, the bounded try_wait loop), that debug off
emits nothing, the launch options, and the errors a device record decodes to, word for word.
The launches themselves are in tests/gpu/test_debug_mode_gpu.py."""

import re

import numpy as np
import pytest
from debug_kernels import (FILE, add_kernel, line_of, lonely_wait_kernel,
                           histogram_kernel, shifted_copy_kernel, walking_pointer_kernel)

import gluon
import tile
from shared_codegen.frontend.launch import instrumentation
from shared_codegen.lowering.debug_checks import RECORD_WORDS
from shared_codegen.runtime.debug_mode import UNKNOWN_EXTENT, argument_extent, decode_record

ADD_SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    monkeypatch.delenv("SC_DEVICE_DEBUG", raising=False)
    monkeypatch.delenv("SC_DEVICE_DEBUG_WAIT_MS", raising=False)


@pytest.fixture(scope="module")
def add_variants():
    plain = tile.compile(add_kernel, ADD_SIGNATURE, {"BLOCK": 256})
    debug = tile.compile(add_kernel, ADD_SIGNATURE, {"BLOCK": 256}, debug=True)
    return plain, debug


INSTRUMENTATION = ("%globaltimer", "atom.global.cas", "exit;", "sc_hidden", "trap")


def test_debug_off_emits_nothing(add_variants):
    plain, debug = add_variants
    again = tile.compile(add_kernel, ADD_SIGNATURE, {"BLOCK": 256}, debug=False)
    assert again.asm["ptx"] == plain.asm["ptx"]  # a debug compile in between changed nothing
    assert plain.asm["ptx"] != debug.asm["ptx"]
    for text in INSTRUMENTATION:
        assert text not in plain.asm["ptx"], text
    assert plain.metadata["param_kinds"] == ["ptr", "ptr", "ptr", "i32"]
    assert "debug" not in plain.metadata


def test_a_debug_variant_takes_the_record_and_one_extent_per_pointer(add_variants):
    _, debug = add_variants
    assert debug.metadata["param_kinds"] == ["ptr", "ptr", "ptr", "i32", "ptr", "u64", "u64",
                                             "u64"]
    # The hidden ones are plain 64-bit integers after the kernel's own parameters.
    assert re.findall(r"\.param \.u64 add_kernel_param_(\d+)", debug.asm["ptx"]) == \
        ["4", "5", "6", "7"]
    assert re.findall(r"\.param \.(\w+)[^\n]* add_kernel_param_3", debug.asm["ptx"]) == ["u32"]


def test_every_access_is_compared_against_its_arguments_extent(add_variants):
    _, debug = add_variants
    ptx = debug.asm["ptx"]
    loads = re.findall(r"@%p\d+ ld\.global\.\S+", ptx)
    stores = re.findall(r"@%p\d+ st\.global\.v?\d?\.?b32 \[ %rd\d+ \+ 0 \]", ptx)
    claims = ptx.count("atom.global.cas.b32 old, [")
    # One record path per vector access, each access predicated on its check.
    assert claims == len(loads) + len(stores) and claims >= 3
    assert len(re.findall(r"setp\.(?:lt|ge)\.u64", ptx)) >= claims
    # The record path writes the kind, the site, the program id, the thread and the offset,
    # and falls through: nothing traps or exits.
    assert "mov.u32 t, %ctaid.x;" in ptx and "mov.u32 t, %tid.x;" in ptx
    assert "st.global.u64 [%rd" in ptx
    assert "trap" not in ptx and "exit;" not in ptx
    assert debug.asm["cubin"][:4] == b"\x7fELF"


# The mask `offs < n` (n of unknown divisibility) keeps the accesses scalar.
ACCESS = {"partition": "default", "dtype": "float32", "elem_bytes": 4, "vec": 1}


def test_the_sites_name_the_kernel_line_and_the_argument(add_variants):
    _, debug = add_variants
    load_x, load_y = line_of("x = tl.load(x_ptr + offs, mask=mask)"), \
        line_of("y = tl.load(y_ptr + offs, mask=mask)")
    store = line_of("tl.store(out_ptr + offs, x + y, mask=mask)")
    assert debug.metadata["debug"] == {
        "sites": [dict(what="load", file=FILE, line=load_x, argument="x_ptr", **ACCESS),
                  dict(what="load", file=FILE, line=load_y, argument="y_ptr", **ACCESS),
                  dict(what="store", file=FILE, line=store, argument="out_ptr", **ACCESS)],
        "pointer_args": ["x_ptr", "y_ptr", "out_ptr"], "wait_ms": 1000}


def test_a_debug_wait_spins_on_try_wait_within_a_globaltimer_budget(monkeypatch):
    monkeypatch.setenv("SC_DEVICE_DEBUG_WAIT_MS", "250")
    plain = gluon.compile(lonely_wait_kernel, {"out_ptr": "*i32"})
    debug = gluon.compile(lonely_wait_kernel, {"out_ptr": "*i32"}, debug=True)
    assert "%globaltimer" not in plain.asm["ptx"] and "exit;" not in plain.asm["ptx"]
    ptx = debug.asm["ptx"]
    loop = ptx[ptx.index("mov.u64 t0, %globaltimer;"):]
    loop = loop[:loop.index("ok:")]
    assert loop.split("\n")[:8] == [
        "mov.u64 t0, %globaltimer;", "wait:",
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%rd1], %r1;", "@done bra ok;",
        "mov.u64 t1, %globaltimer;", "sub.u64 t1, t1, t0;",
        "setp.lt.u64 late, t1, 250000000;", "@late bra wait;"]
    # Past the budget: claim the record, write kind 3 (a wait), the phase and the barrier,
    # then exit (no trap: the context stays usable).
    assert "st.global.u32 [%rd2+4], 3;" in loop and "st.global.u32 [%rd2+28], %r1;" in loop
    assert loop.rstrip().endswith("quit:\nexit;")
    assert "trap" not in ptx
    assert debug.metadata["debug"]["sites"][0] == {
        "what": "wait", "file": FILE, "line": line_of("mbarrier.wait(bar, 0)  # nobody"),
        "argument": None, "partition": "default"}
    assert debug.metadata["debug"]["wait_ms"] == 250


def test_on_sm80_the_debug_wait_spins_on_test_wait():
    debug = gluon.compile(lonely_wait_kernel, {"out_ptr": "*i32"}, target="sm_80", debug=True)
    ptx = debug.asm["ptx"]
    assert "mbarrier.test_wait.parity.shared.b64 done, [%rd1], %r1;\n@done bra ok;" in ptx
    assert "setp.lt.u64 late, t1, 1000000000;" in ptx and "try_wait" not in ptx
    assert debug.asm["cubin"][:4] == b"\x7fELF"


def _record(kind, site, program, thread, phase, value, extent, arg):
    words = np.zeros(RECORD_WORDS, np.uint32)
    words[:8] = [1, kind, site, *program, thread, phase]
    words[8], words[9] = value & 0xFFFFFFFF, value >> 32
    words[10], words[11] = extent & 0xFFFFFFFF, extent >> 32
    words[12] = arg
    return words


def test_an_out_of_bounds_record_reads_word_for_word():
    kernel = tile.compile(shifted_copy_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32",
                                                "n": "i32"}, {"SHIFT": 4, "BLOCK": 128},
                          debug=True)
    info = kernel.metadata["debug"]
    site = next(i for i, s in enumerate(info["sites"]) if s["what"] == "store")
    error = decode_record("shifted_copy_kernel", info,
                          _record(2, site, (1, 0, 0), 124, 0, 512, 512, 1))
    vector = decode_record("shifted_copy_kernel", dict(info, sites=[
        dict(info["sites"][site], vec=4)]), _record(2, 0, (0, 0, 0), 31, 0, 504, 512, 1))
    assert "elements [126, 130) of a 4-element access are not all inside [0, 128) (128 " \
           "elements of float32)" in str(vector)
    below = decode_record("shifted_copy_kernel", info,
                          _record(1, site, (0, 0, 0), 0, 0, (1 << 64) - 8, 512, 0))
    assert "element offset -2 is outside [0, 128)" in str(below)
    line = line_of("# the shifted store")
    assert isinstance(error, tile.DeviceOutOfBoundsError)
    assert isinstance(error, tile.DeviceCheckError) and isinstance(error, tile.KernelError)
    assert str(error) == (
        f"{FILE}:{line}: out-of-bounds store of `out_ptr` in `shifted_copy_kernel`: element "
        f"offset 128 is outside [0, 128) (128 elements of float32) (program id (1, 0, 0), "
        f"thread 124, default partition); the store was not performed\n"
        f"    tl.store(out_ptr + offs + SHIFT, x, mask=offs < n)  # the shifted store")
    assert (error.file, error.line) == (FILE, line)
    assert error.record["argument"] == "out_ptr" and error.record["offset"] == 512


def test_a_deadlock_record_reads_word_for_word():
    kernel = gluon.compile(lonely_wait_kernel, {"out_ptr": "*i32"}, debug=True)
    error = decode_record("lonely_wait_kernel", kernel.metadata["debug"],
                          _record(3, 0, (0, 0, 0), 0, 0, 0x10, 0, 0xFFFFFFFF))
    assert isinstance(error, gluon.DeviceDeadlockError)
    assert str(error) == (
        f"{FILE}:{line_of('# nobody arrives')}: deadlock: mbarrier.wait for phase 0 of the "
        f"mbarrier at shared address 0x10 in `lonely_wait_kernel` did not complete within 1000 "
        f"ms; the waiting threads gave up (program id (0, 0, 0), thread 0, default partition)\n"
        f"    mbarrier.wait(bar, 0)  # nobody arrives")


def test_a_pointer_carried_through_a_loop_is_checked_against_every_argument():
    kernel = tile.compile(walking_pointer_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"},
                          {"STEPS": 4}, debug=True)
    info = kernel.metadata["debug"]
    load = next(i for i, s in enumerate(info["sites"]) if s["what"] == "load")
    assert info["sites"][load]["argument"] is None  # the IR does not show which argument
    # Inside x_ptr or inside out_ptr: two range compares or-ed, the address itself recorded.
    ptx = kernel.asm["ptx"]
    assert re.search(r"or\.pred\s+%p\d+, %p\d+, %p\d+;", ptx)
    assert "st.global.u32 [%rd" in ptx and "+48], -1;" in ptx.replace("4294967295", "-1")
    error = decode_record("walking_pointer_kernel", info,
                          _record(1, load, (0, 0, 0), 3, 0, 0x7F00001000, 0, 0xFFFFFFFF))
    assert str(error) == (
        f"{FILE}:{line_of('# a pointer carried')}: out-of-bounds load in "
        f"`walking_pointer_kernel`: address 0x7f00001000 is inside no pointer argument "
        f"(program id (0, 0, 0), thread 3, default partition); the load was not performed\n"
        f"    acc += tl.load(p)  # a pointer carried through the loop")


def test_atomics_are_checked_and_reported_as_atomics():
    kernel = tile.compile(histogram_kernel, {"x_ptr": "*i32", "bins_ptr": "*i32"},
                          {"BLOCK": 128}, debug=True)
    info = kernel.metadata["debug"]
    site = next(i for i, s in enumerate(info["sites"]) if s["what"] == "atomic")
    assert info["sites"][site]["argument"] == "bins_ptr"
    ptx = kernel.asm["ptx"]
    assert re.search(r"@%p\d+ atom\.acq_rel\.gpu\.global\.add\.u32", ptx)
    assert re.search(r"st\.global\.u32 \[%rd\d+\+4\], 4;", ptx)  # kind 4: an atomic
    error = decode_record("histogram_kernel", info,
                          _record(4, site, (0, 0, 0), 9, 0, 4 * 70, 4 * 64, 1))
    assert str(error) == (
        f"{FILE}:{line_of('# the bin update')}: out-of-bounds atomic of `bins_ptr` in "
        f"`histogram_kernel`: element offset 70 is outside [0, 64) (64 elements of int32) "
        f"(program id (0, 0, 0), thread 9, default partition); the atomic was not performed\n"
        f"    tl.atomic_add(bins_ptr + x, 1)  # the bin update")


class _CudaArray:
    def __init__(self, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (4096, False), "strides": strides,
                                         "version": 3}


def test_argument_extents_come_from_the_array_interface():
    assert argument_extent(_CudaArray((3, 5), "<f4")) == 60
    # A transposed view of a 4 x 6 fp16 array: the last element is at 5 * 8 + 3 * 2 bytes.
    assert argument_extent(_CudaArray((6, 4), "<f2", strides=(2, 12))) == 5 * 2 + 3 * 12 + 2
    assert argument_extent(_CudaArray((0, 4), "<f4")) == 0
    assert argument_extent(0x7000) == UNKNOWN_EXTENT  # a bare address is not checked


def test_debug_comes_from_the_launch_the_decorator_or_the_environment(monkeypatch):
    assert instrumentation(add_kernel) == ()
    assert instrumentation(add_kernel, debug=True) == (("debug", 1000),)
    monkeypatch.setenv("SC_DEVICE_DEBUG", "1")
    monkeypatch.setenv("SC_DEVICE_DEBUG_WAIT_MS", "3000")
    assert instrumentation(add_kernel) == (("debug", 3000),)
    assert instrumentation(add_kernel, debug=False) == ()
    with pytest.raises(tile.ArgumentError) as info:
        instrumentation(add_kernel, debug="yes")
    assert str(info.value) == "add_kernel: debug must be True or False, got 'yes'"
    monkeypatch.setenv("SC_DEVICE_DEBUG_WAIT_MS", "0")
    with pytest.raises(tile.ArgumentError) as info:
        instrumentation(add_kernel)
    assert str(info.value) == ("SC_DEVICE_DEBUG_WAIT_MS must be a positive number of "
                               "milliseconds, got 0")


def test_debug_launches_in_the_interpreter_compute_as_usual():
    x = np.arange(300, dtype=np.float32)
    y = np.full(300, 0.5, np.float32)
    out = np.zeros(300, np.float32)
    add_kernel[(3,)](x, y, out, 300, BLOCK=128, debug=True)
    np.testing.assert_array_equal(out, x + 0.5)
    # The interpreter checks bounds always, debug or not.
    with pytest.raises(tile.InterpreterError, match="out-of-bounds store of `out_ptr`"):
        shifted_copy_kernel[(1,)](x, np.zeros(128, np.float32), 128, SHIFT=4, BLOCK=128,
                                  debug=True)


def test_debug_and_plain_variants_have_their_own_cache_entries(monkeypatch, tmp_path):
    monkeypatch.delenv("SC_CACHE_DISABLE")
    monkeypatch.setenv("SC_CACHE_DIR", str(tmp_path))
    plain = tile.compile(add_kernel, ADD_SIGNATURE, {"BLOCK": 64})
    debug = tile.compile(add_kernel, ADD_SIGNATURE, {"BLOCK": 64}, debug=True)
    plain_again = tile.compile(add_kernel, ADD_SIGNATURE, {"BLOCK": 64})
    assert "atom.global.cas" in debug.asm["ptx"]
    assert plain_again.asm["ptx"] == plain.asm["ptx"]
    assert "atom.global.cas" not in plain_again.asm["ptx"]
