"""Tensor descriptors in the tile DSL: built in the kernel (`tl.make_tensor_descriptor`) and
passed from the host (`tile.tools.tensor_descriptor.TensorDescriptor`, TMA), against numpy in
the interpreter, their PTX, and their errors."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tile.tools.tensor_descriptor import TensorDescriptor


@tile.jit
def device_descriptors(x, y, M, N, ys, BM: tl.constexpr, BN: tl.constexpr,
                       PAD: tl.constexpr):
    src = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN],
                                    padding_option=PAD)
    dst = tl.make_tensor_descriptor(y, shape=[M, N], strides=[ys, 1], block_shape=[BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]) + src.load([m, n + BN]))


@pytest.mark.parametrize("pad,fill", [("zero", 0.0), ("nan", np.nan)])
def test_device_descriptor_load_pads_and_store_clips(pad, fill):
    x = np.random.default_rng(0).standard_normal((10, 20)).astype(np.float32)
    y = np.full((10, 24), -1.0, np.float32)  # row stride 24: columns 20.. are not y's
    device_descriptors[(3, 3)](x, y, 10, 20, 24, BM=4, BN=8, PAD=pad)
    shifted = np.full_like(x, fill)
    shifted[:, :12] = x[:, 8:]
    np.testing.assert_array_equal(y[:, :20], x + shifted)
    assert (y[:, 20:] == -1).all()


@tile.jit
def descriptor_attributes_and_atomics(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    desc = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    acc = tl.make_tensor_descriptor(out, shape=[BM, BN], strides=[BN, 1], block_shape=[BM, BN])
    tl.static_assert(desc.block_shape == [BM, BN])
    tl.static_assert(desc.dtype == tl.float32)
    for m in range(0, desc.shape[0], BM):
        for n in range(0, desc.shape[1], BN):
            acc.atomic_add([0, 0], desc.load([m, n]))
    # strides[0] is N: this is max(out, 0.5).
    acc.atomic_max([0, 0], (desc.strides[0] - N + 1).to(tl.float32) * 0.5)


def test_device_descriptor_atomics_and_attributes():
    x = np.random.default_rng(1).random((13, 32)).astype(np.float32)
    out = np.zeros((16, 16), np.float32)
    descriptor_attributes_and_atomics[(1,)](x, out, 13, 32, BM=16, BN=16)
    expected = np.zeros((16, 16), np.float32)
    expected[:13] = x[:, :16] + x[:, 16:]
    np.testing.assert_allclose(out, np.maximum(expected, 0.5), rtol=1e-6)


@tile.jit
def descriptor_3d(x, y, A, B, C, BB: tl.constexpr, BC: tl.constexpr):
    src = tl.make_tensor_descriptor(x, shape=[A, B, C], strides=[B * C, C, 1],
                                    block_shape=[1, BB, BC])
    dst = tl.make_tensor_descriptor(y, shape=[A, C, B], strides=[B * C, B, 1],
                                    block_shape=[1, BC, BB])
    a = tl.program_id(0)
    dst.store([a, 0, 0], tl.permute(src.load([a, 0, 0]), (0, 2, 1)))


def test_three_dim_descriptor_transposes_each_slice():
    x = np.arange(3 * 5 * 6, dtype=np.float32).reshape(3, 5, 6)
    y = np.zeros((3, 6, 5), np.float32)
    descriptor_3d[(3,)](x, y, 3, 5, 6, BB=8, BC=8)
    np.testing.assert_array_equal(y, x.transpose(0, 2, 1))


def _compile_device_descriptors(target):
    return tile.compile(device_descriptors, signature={"x": "*fp16", "y": "*fp16", "M": "i32",
                                                       "N": "i32", "ys": "i32"},
                        constexprs={"BM": 64, "BN": 64, "PAD": "nan"}, target=target)


def test_device_descriptors_on_sm90_write_tensor_maps_for_tma():
    k = _compile_device_descriptors("sm_90a")
    ptx = k.asm["ptx"]
    # Two maps, each built in shared memory by thread 0 and published by warp 0.
    assert ptx.count("tensormap.replace.tile.global_address.shared::cta.b1024.b64") == 2
    assert ptx.count("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release"
                     ".gpu.sync.aligned") == 2
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 2
    # fp16 (6), 128-byte swizzle (3); NaN fill (1) only for the source.
    assert ptx.count("tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%rd2], 6;") == 2
    assert ptx.count("swizzle_mode.shared::cta.b1024.b32 [%rd2], 3;") == 2
    assert ptx.count("fill_mode.shared::cta.b1024.b32 [%rd2], 1;") == 1
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx and "ld.global" not in ptx
    assert ".version 8.6" in ptx and k.asm["cubin"]
    # The maps live in a hidden scratch parameter: 2 x 128 bytes per program.
    assert k.metadata["param_kinds"] == ["ptr", "ptr", "i32", "i32", "i32", "ptr"]
    assert k.metadata["global_scratch_bytes"] == 256
    ttgir = k.asm["ttgir"]
    assert ttgir.count("ttg.global_scratch_alloc {alignment = 128, nbytes = 128") == 2
    assert "ttng.reinterpret_tensor_descriptor" in ttgir


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_device_descriptors_without_tensormap_replace_are_plain_accesses(target):
    # Before sm_90, and on targets that are not architecture-specific (sm_90 without "a").
    k = _compile_device_descriptors(target)
    assert "st.global" in k.asm["ptx"] and "tensormap" not in k.asm["ptx"]
    assert k.metadata["global_scratch_bytes"] == 0 and k.asm["cubin"]


# ---- descriptors from the host: TMA ------------------------------------------------------------

@tile.jit
def host_copy(a_desc, b_desc, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    b_desc.store([m, n], a_desc.load([m, n]) * 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_host_descriptor_copy_zero_fills_and_clips(dtype):
    x = np.random.default_rng(2).standard_normal((100, 72)).astype(dtype)
    y = np.zeros_like(x)
    a = TensorDescriptor.from_tensor(x, [32, 16])
    b = TensorDescriptor(y, y.shape, [72, 1], [32, 16])
    host_copy[(4, 5)](a, b, BM=32, BN=16)
    np.testing.assert_array_equal(y, x * 2)


def test_host_descriptor_nan_padding():
    x = np.random.default_rng(3).standard_normal((40, 20)).astype(np.float32)
    y = np.zeros((64, 32), np.float32)
    host_copy[(2, 2)](TensorDescriptor.from_tensor(x, [32, 16], padding="nan"),
                      TensorDescriptor.from_tensor(y, [32, 16]), BM=32, BN=16)
    expected = np.full((64, 32), np.nan, np.float32)
    expected[:40, :20] = 2 * x
    np.testing.assert_array_equal(y, expected)
    with pytest.raises(ValueError, match="^TensorDescriptor: padding='nan' needs a "
                                         "floating-point tensor, got int32$"):
        TensorDescriptor.from_tensor(np.zeros((8, 8), np.int32), [8, 8], padding="nan").type


def test_host_descriptor_loads_are_tma_with_an_mbarrier():
    x = np.zeros((128, 128), np.float16)
    desc = TensorDescriptor.from_tensor(x, [64, 64])
    k = tile.compile(host_copy, signature={"a_desc": desc, "b_desc": desc},
                     constexprs={"BM": 64, "BN": 64}, target="sm_90a")
    ptx = k.asm["ptx"]
    for instruction in ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx",
                        "mbarrier.arrive.expect_tx", "mbarrier.try_wait.parity",
                        "fence.proxy.async.shared::cta",
                        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
                        "cp.async.bulk.wait_group.read 0"):
        assert instruction in ptx, instruction
    assert "ld.global" not in ptx and "st.global" not in ptx
    assert k.asm["cubin"]
    # The IR a pipeliner would multi-buffer: buffer + barrier per load, then a local_load.
    ttgir = k.asm["ttgir"]
    assert ttgir.index("ttng.async_tma_copy_global_to_local") < ttgir.index("ttng.wait_barrier") \
        < ttgir.index("ttg.local_load")


def test_host_descriptor_layout_is_the_widest_swizzle():
    x = np.zeros((64, 64), np.float16)
    assert TensorDescriptor.from_tensor(x, [64, 64]).layout.swizzle_byte_width == 128
    assert TensorDescriptor.from_tensor(x, [64, 16]).layout.swizzle_byte_width == 32
    assert repr(TensorDescriptor.from_tensor(x, [64, 16])) == (
        "TensorDescriptor(shape=[64, 64], strides=[64, 1], block_shape=[64, 16], "
        "padding='zero')")


def test_triton_path_resolves_after_import_as():
    import tile as triton
    assert triton.tools.tensor_descriptor.TensorDescriptor is TensorDescriptor


@tile.jit
def bad_descriptor(x, desc, CASE: tl.constexpr):
    if CASE == "stride":
        tl.make_tensor_descriptor(x, shape=[8, 8], strides=[1, 8], block_shape=[8, 8])
    elif CASE == "narrow":
        tl.make_tensor_descriptor(x, shape=[8, 8], strides=[8, 1], block_shape=[8, 2])
    elif CASE == "offsets":
        d = tl.make_tensor_descriptor(x, shape=[8, 8], strides=[8, 1], block_shape=[8, 8])
        d.load([0])
    elif CASE == "store_shape":
        d = tl.make_tensor_descriptor(x, shape=[8, 8], strides=[8, 1], block_shape=[8, 8])
        d.store([0, 0], tl.zeros([8, 4], tl.float32))
    elif CASE == "padding":
        tl.make_tensor_descriptor(x, shape=[8, 8], strides=[8, 1], block_shape=[8, 8],
                                  padding_option="inf")
    elif CASE == "host_xor":
        desc.atomic_xor([0, 0], tl.zeros([16, 16], tl.float32))
    else:
        desc.atomic_max([0, 0], tl.zeros([16, 16], tl.float32))


@pytest.mark.parametrize("case,message", [
    ("stride", "tl.make_tensor_descriptor: the last stride must be the compile-time constant 1 "
               "(the innermost dim is contiguous), got 8"),
    ("narrow", "tl.make_tensor_descriptor: the last block dim must span at least 16 bytes, got "
               "2 x fp32 = 8 bytes"),
    ("offsets", "desc.load: `offsets` must have 2 entries (the descriptor's rank), got [0]"),
    ("store_shape", "desc.store: the value's shape [8, 4] must match the block shape [8, 8]"),
    ("padding", "tl.make_tensor_descriptor: `padding_option` must be 'zero' or 'nan', got "
                "'inf'"),
    ("host_xor", "desc.atomic_xor through a TMA descriptor supports u32, i32, u64, i64, got "
                 "fp32"),
    ("host_max", "desc.atomic_max through a TMA descriptor supports u32, i32, u64, i64, fp16, "
                 "bf16, got fp32"),
])
def test_descriptor_errors(case, message):
    x = np.zeros((16, 16), np.float32)
    with pytest.raises(tile.CompilationError) as e:
        bad_descriptor[(1,)](x, TensorDescriptor.from_tensor(x, [16, 16]), CASE=case)
    assert e.value.message == message


def test_host_descriptors_below_sm90_are_plain_accesses_through_the_parameter_fields():
    x = np.zeros((64, 64), np.float16)
    desc = TensorDescriptor.from_tensor(x, [32, 32])
    k = tile.compile(host_copy, signature={"a_desc": desc, "b_desc": desc},
                     constexprs={"BM": 32, "BN": 32}, target="sm_80")
    ptx = k.asm["ptx"]
    assert "cp.async.bulk" not in ptx and "ld.global" in ptx and "st.global" in ptx
    # base, shape and strides come from the fields after the map (rank 2: 176 bytes).
    assert ".param .align 64 .b8 host_copy_param_0[176]" in ptx
    assert "host_copy_param_0+128]" in ptx and k.asm["cubin"]


@pytest.mark.parametrize("padding", ["zero", "nan"])
def test_host_descriptor_fallback_numerics(monkeypatch, padding):
    # Trace as for sm_80 but run in the interpreter: the fallback's address arithmetic.
    from tile.language import _descriptors
    monkeypatch.setattr(_descriptors, "compile_target", lambda sem: "sm_80")

    @tile.jit
    def fallback_copy(a_desc, b_desc, BM: tl.constexpr, BN: tl.constexpr):
        m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
        b_desc.store([m, n], a_desc.load([m, n]) * 2)
        b_desc.atomic_add([m, n], tl.full([BM, BN], 1.0, tl.float32))

    x = np.random.default_rng(5).standard_normal((40, 20)).astype(np.float32)
    y = np.zeros((48, 32), np.float32)
    fallback_copy[(2, 2)](TensorDescriptor.from_tensor(x, [32, 16], padding=padding),
                          TensorDescriptor.from_tensor(y, [32, 16]), BM=32, BN=16)
    expected = np.full((48, 32), np.nan if padding == "nan" else 0.0, np.float32) + 1
    expected[:40, :20] = 2 * x + 1
    np.testing.assert_array_equal(y, expected)


def test_descriptor_parameter_bytes():
    import struct
    x = np.zeros((48, 40), np.float32)
    desc = TensorDescriptor(x, [48, 32], [40, 1], [16, 16], padding="nan")
    raw = desc.param_bytes()
    assert len(raw) == desc.type.param_bytes == 176 and raw[:128] == bytes(128)
    address = x.__array_interface__["data"][0]
    assert struct.unpack("<Q5q", raw[128:]) == (address, 48, 32, 40, 1, 1)


def test_launch_scratch_is_grid_times_bytes_per_program():
    from shared_codegen.frontend import launch
    from shared_codegen.frontend.errors import ArgumentError

    class Variant:
        scratch, scratch_align = 256, 128

    class Buffer:
        def __init__(self, address):
            self.address = address

        def data_ptr(self):
            return self.address

    asked = []
    try:
        tile.set_allocator(lambda size, align, stream: asked.append((size, align, stream)) or
                           Buffer(4096))
        buffer = launch._global_scratch(host_copy, Variant, (3, 2, 1), 7)
        assert buffer.data_ptr() == 4096 and asked == [(3 * 2 * 256, 128, 7)]
        tile.set_allocator(lambda size, align, stream: Buffer(4096 + 64))
        with pytest.raises(ArgumentError, match="host_copy: the allocator returned an address "
                                                "0x1040 that is not 128-byte aligned"):
            launch._global_scratch(host_copy, Variant, (1, 1, 1), 0)
    finally:
        from shared_codegen.runtime.allocation import NullAllocator
        tile.set_allocator(NullAllocator())


def test_block_shape_can_be_set_after_construction_like_tutorial_09():
    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    y = np.zeros_like(x)
    a, b = TensorDescriptor.from_tensor(x, [1, 1]), TensorDescriptor.from_tensor(y, [1, 1])
    # A [1, 1] fp32 block is too narrow for TMA: the error comes when a launch needs it.
    with pytest.raises(ValueError, match=r"^TensorDescriptor: the innermost block dim moves 1 x "
                                         r"4 = 4 bytes; TMA needs at least 16$"):
        host_copy[(1, 1)](a, b, BM=1, BN=1)
    a.block_shape = b.block_shape = [32, 16]
    host_copy[(2, 2)](a, b, BM=32, BN=16)
    np.testing.assert_array_equal(y, 2 * x)
    assert a.type.block_shape == (32, 16)


@tile.jit
def host_reduce(d, v, OP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    vals = tl.load(v + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :])
    if OP == "add":
        d.atomic_add([m, n], vals)
    elif OP == "max":
        d.atomic_max([m, n], vals)
    else:
        d.atomic_xor([m, n], vals)


@pytest.mark.parametrize("dtype,op", [(np.float16, "add"), (np.float16, "max"),
                                      (np.float32, "add"), (np.int32, "max"),
                                      (np.int32, "xor")])
def test_host_descriptor_atomics_are_tma_reductions(dtype, op):
    x = np.full((40, 24), 3, dtype)
    v = (np.arange(16 * 8).reshape(16, 8) % 5).astype(dtype)
    desc = TensorDescriptor.from_tensor(x, [16, 8])
    host_reduce[(3, 3)](desc, v, OP=op, BM=16, BN=8)
    tiled = np.tile(v, (3, 3))[:40, :24]  # blocks past the edge are clipped
    start = np.full((40, 24), 3, dtype)
    expected = {"add": start + tiled, "max": np.maximum(start, tiled),
                "xor": start ^ tiled if op == "xor" else None}[op]
    np.testing.assert_array_equal(x, expected)
    name = {np.float16: "fp16", np.float32: "fp32", np.int32: "i32"}[dtype]
    k = tile.compile(host_reduce, signature={"d": desc, "v": "*" + name},
                     constexprs={"OP": op, "BM": 16, "BN": 8}, target="sm_90a")
    assert (f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group"
            in k.asm["ptx"]) and k.asm["cubin"]


@tile.jit
def _maybe_make_tensor_desc(desc_or_ptr, shape, strides, block_shape):
    # Triton 3.6's tutorial 06 helper: host descriptors pass through.
    if isinstance(desc_or_ptr, tl.tensor_descriptor):
        return desc_or_ptr
    else:
        return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)


@tile.jit
def either_descriptor(a, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    src = _maybe_make_tensor_desc(a, [M, N], [N, 1], [BM, BN])
    dst = _maybe_make_tensor_desc(y, [M, N], [N, 1], [BM, BN])
    tl.static_assert(isinstance(dst, tl.tensor_descriptor))
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dst.store([m, n], src.load([m, n]) * 2)


@pytest.mark.parametrize("host", [True, False])
def test_isinstance_tensor_descriptor_holds_for_both_kinds(host):
    x = np.random.default_rng(4).standard_normal((48, 40)).astype(np.float32)
    y = np.zeros_like(x)
    a = TensorDescriptor.from_tensor(x, [16, 16]) if host else x
    either_descriptor[(3, 3)](a, y, 48, 40, BM=16, BN=16)
    np.testing.assert_array_equal(y, 2 * x)
