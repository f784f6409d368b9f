"""The host TensorDescriptor: our checks name the value and the limit before the driver sees
bad input; specialization keys separate descriptors that compile differently."""

import numpy as np
import pytest

from gluon import language as gl
from gluon.nvidia.hopper import TensorDescriptor
from shared_codegen.frontend.fastpath import arg_code
from shared_codegen.ir.types import TensorDescriptorType, float16
from shared_codegen.runtime.specialize import key_of, parameter_kinds

NVMMA = gl.NVMMASharedLayout(128, 16)


def test_from_tensor_takes_shape_and_strides_in_elements():
    x = np.zeros((100, 200), np.float16)
    d = TensorDescriptor.from_tensor(x, [64, 64], NVMMA)
    assert (d.shape, d.strides, d.block_shape) == ([100, 200], [200, 1], [64, 64])
    assert d.type == TensorDescriptorType((64, 64), float16, NVMMA)
    assert str(d.type) == ("!tt.tensordesc<64x64xfp16, NVMMASharedLayout(swizzle_byte_width=128, "
                           "element_bitwidth=16)>")
    assert d.on_host and d.tensor_map is None


def test_a_misaligned_base_names_the_address_and_the_16_byte_limit():
    x = np.zeros(64 * 64 + 8, np.float16)[1:1 + 64 * 64].reshape(64, 64)
    address = x.__array_interface__["data"][0]
    with pytest.raises(ValueError) as info:
        TensorDescriptor.from_tensor(x, [64, 64], NVMMA)
    assert str(info.value) == (
        f"TensorDescriptor: the base address {address:#x} is not 16-byte aligned (TMA needs the "
        f"tensor to start on a 16-byte boundary; it is {address % 16} bytes past one)")


def test_a_block_dim_over_256_names_the_dim_and_the_limit():
    with pytest.raises(ValueError) as info:
        TensorDescriptor.from_tensor(np.zeros((1024, 64), np.float16), [512, 64], NVMMA)
    assert str(info.value) == ("TensorDescriptor: block_shape[0] = 512 exceeds the TMA box "
                               "limit of 256 elements per dim")


@pytest.mark.parametrize("make, message", [
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 100), np.float16), [64, 64], NVMMA),
     "strides[0] = 100 elements = 200 bytes is not a positive multiple of 16 bytes"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 32], NVMMA),
     "the innermost block dim moves 32 x 2 = 64 bytes, less than the layout's 128-byte "
     "swizzle width; use an NVMMASharedLayout with swizzle_byte_width <= 64"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 4],
                                          gl.NVMMASharedLayout(0, 16)),
     "the innermost block dim moves 4 x 2 = 8 bytes; TMA needs at least 16"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.bool_), [64, 64], NVMMA),
     "dtype bool is not supported by TMA"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 64],
                                          gl.SwizzledSharedLayout(8, 1, 8, [1, 0])),
     "a TMA descriptor's layout must be an NVMMASharedLayout"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float32), [64, 64], NVMMA),
     "the layout's element_bitwidth 16 does not match the dtype float32 (32 bits)"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16).T, [64, 64], NVMMA),
     "the last dim must be contiguous (stride 1), got strides [1, 64]"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((1,) * 6 + (64,), np.float16),
                                          [1] * 6 + [64], NVMMA),
     "rank must be 1 to 5"),
    (lambda: TensorDescriptor.from_tensor(np.zeros((64, 64), np.float16), [64, 48], NVMMA),
     "block_shape[1] = 48 must be a power of two"),
])
def test_bad_input_is_rejected_with_the_value_and_the_limit(make, message):
    with pytest.raises(ValueError, match="TensorDescriptor: ") as info:
        make()
    assert message in str(info.value)


def test_specialization_keys_are_the_descriptor_type():
    x = np.zeros((128, 128), np.float16)
    a = TensorDescriptor.from_tensor(x, [64, 64], NVMMA)
    b = TensorDescriptor.from_tensor(x, [32, 64], NVMMA)
    assert key_of(a) == (a.type, "") and key_of(a) != key_of(b)
    # The launch fast path must not confuse them either.
    assert arg_code(a) != arg_code(b)
    assert parameter_kinds((key_of(a), ("*fp16", "D"))) == ("tensordesc2", "ptr")


def test_the_launcher_packs_the_encoded_bytes():
    from shared_codegen.runtime.launcher import _tensor_map_bytes

    class Fake:
        tensor_map = bytes(range(128))

    assert _tensor_map_bytes(Fake()) == bytes(range(128))


def test_dataclasses_replace_swaps_the_layout_and_rechecks():
    # Triton's TensorDescriptor is a dataclass; tutorial 11 turns the scales' swizzle off with
    # `dataclasses.replace(desc, layout=...)`.
    import dataclasses
    x = np.zeros((4, 2, 256), np.uint8)
    desc = TensorDescriptor.from_tensor(
        x, [1, 2, 256], gl.NVMMASharedLayout.get_default_for([1, 2, 256], gl.uint8))
    plain = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=8, rank=3)
    new = dataclasses.replace(desc, layout=plain)
    assert new.layout == plain and new.type.layout == plain
    assert (new.shape, new.strides, new.block_shape) == ([4, 2, 256], [512, 256, 1], [1, 2, 256])
    with pytest.raises(ValueError, match="the layout has rank 2 but block_shape"):
        dataclasses.replace(desc, layout=gl.NVMMASharedLayout(0, 8, rank=2))


def test_an_innermost_block_dim_over_256_is_split_into_boxes():
    # Tutorial 11 moves [128, 512] fp8 blocks: four 128-byte-swizzled boxes of 128 columns.
    from shared_codegen.ops.tma.definition import box_shape
    x = np.zeros((128, 1024), np.uint8)
    d = TensorDescriptor.from_tensor(x, [128, 512], gl.NVMMASharedLayout(128, 8))
    assert box_shape(d.type) == [128, 128]
    d = TensorDescriptor.from_tensor(x, [128, 512], gl.NVMMASharedLayout(0, 8))
    assert box_shape(d.type) == [128, 256]
