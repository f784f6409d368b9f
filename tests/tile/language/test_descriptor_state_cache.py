"""tile.tools.tensor_descriptor: descriptors over the same GPU memory, shape, strides, box and
padding share one checked and encoded state (Triton's tutorials build fresh descriptors on
every call); anything that changes the map encodes anew."""

import types

import numpy as np
import pytest

from shared_codegen.ops.tma.definition import box_shape
from shared_codegen.runtime import driver
from shared_codegen.runtime import tensor_descriptor as shared_descriptor
from tile.tools import tensor_descriptor as tile_descriptor
from tile.tools.tensor_descriptor import TensorDescriptor


class _GpuTensor:
    """Stands for a CUDA tensor: an address and a dtype (never dereferenced here)."""

    def __init__(self, address, dtype=np.float16):
        self.address, self.dtype = address, np.dtype(dtype)

    def data_ptr(self):
        return self.address


@pytest.fixture
def encodes(monkeypatch):
    """Counts encodings; the stand-in for cuTensorMapEncodeTiled reads what the real
    `_encode` reads (the descriptor's type, layout and element), on an sm_90 device."""
    calls = []

    def fake_encode(desc):
        box = box_shape(desc.type)
        assert desc.layout is not None and desc.element is not None
        calls.append((desc.base.address, tuple(desc.block_shape)))
        return bytes([len(calls)]) * 128 if box else b""

    monkeypatch.setattr(driver, "current_device_index", lambda: 0)
    monkeypatch.setattr(driver, "get_device",
                        lambda index: types.SimpleNamespace(compute_capability=(9, 0)))
    monkeypatch.setattr(shared_descriptor.TensorDescriptor, "_encode", fake_encode)
    monkeypatch.setattr(tile_descriptor, "_ENCODED", {})
    return calls


def test_fresh_descriptors_over_the_same_tensor_share_one_encoded_map(encodes):
    x = _GpuTensor(0x7F0000000000)
    first = TensorDescriptor(x, [4096, 128], [128, 1], [128, 64])
    second = TensorDescriptor(x, [4096, 128], [128, 1], [1, 1])
    second.block_shape = [128, 64]  # as tutorial 06's pre-hook sets it
    assert first.tensor_map == second.tensor_map == bytes([1]) * 128
    assert first.type == second.type
    assert encodes == [(0x7F0000000000, (128, 64))]


@pytest.mark.parametrize("change", ["address", "dtype", "shape", "strides", "block", "padding"])
def test_anything_the_map_depends_on_encodes_again(encodes, change):
    x = _GpuTensor(0x7F0000000000)
    TensorDescriptor(x, [4096, 128], [128, 1], [128, 64]).tensor_map
    other = dict(base=x, shape=[4096, 128], strides=[128, 1], block_shape=[128, 64],
                 padding="zero")
    other.update({"address": dict(base=_GpuTensor(0x7F0000100000)),
                  "dtype": dict(base=_GpuTensor(0x7F0000000000, np.float32)),
                  "shape": dict(shape=[2048, 128]), "strides": dict(strides=[256, 1]),
                  "block": dict(block_shape=[64, 64]), "padding": dict(padding="nan")}[change])
    TensorDescriptor(**other).tensor_map
    assert len(encodes) == 2


def test_a_bad_descriptor_is_still_refused_after_a_good_one(encodes):
    x = _GpuTensor(0x7F0000000000)
    TensorDescriptor(x, [4096, 128], [128, 1], [128, 64]).tensor_map
    with pytest.raises(ValueError, match="strides\\[0\\] = 100 elements = 200 bytes"):
        TensorDescriptor(x, [4096, 128], [100, 1], [128, 64]).tensor_map
