"""Host TensorDescriptors, the tile DSL's and Gluon's alike: descriptors over the same GPU memory,
shape, strides, block, layout and padding share one checked and encoded state (Triton's
tutorials build fresh descriptors on every call); anything that changes the map encodes anew."""

import types

import numpy as np
import pytest

from gluon import language as gl
from gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
from shared_codegen.ops.tma.definition import box_shape
from shared_codegen.runtime import driver
from shared_codegen.runtime import tensor_descriptor as shared_descriptor
from tile.tools.tensor_descriptor import TensorDescriptor as TileDescriptor

ADDRESS = 0x7F0000000000
SWIZZLE_128 = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
SWIZZLE_64 = gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2)


class _GpuTensor:
    """Stands for a CUDA tensor: an address and a dtype (never dereferenced here)."""

    def __init__(self, address, dtype=np.float16):
        self.address, self.dtype = address, np.dtype(dtype)

    def data_ptr(self):
        return self.address


@pytest.fixture
def encodes(monkeypatch):
    """Counts encodings; the stand-in for cuTensorMapEncodeTiled reads what the real
    `_encode` reads (the descriptor's type, layout, element and launch box), on an sm_90
    device."""
    calls = []

    def fake_encode(desc):
        box = box_shape(desc.type) if desc._box is None else list(desc._box)
        assert desc.layout is not None and desc.element is not None
        calls.append((desc.base.address, tuple(desc.block_shape), tuple(box)))
        return bytes([len(calls)]) * 128

    monkeypatch.setattr(driver, "current_device_index", lambda: 0)
    monkeypatch.setattr(driver, "get_device",
                        lambda index: types.SimpleNamespace(compute_capability=(9, 0)))
    monkeypatch.setattr(shared_descriptor.TensorDescriptor, "_encode", fake_encode)
    monkeypatch.setattr(shared_descriptor, "_ENCODED", {})
    return calls


def _tile(base=None, shape=(4096, 128), strides=(128, 1), block_shape=(128, 64),
          padding="zero", layout=None):
    return TileDescriptor(base or _GpuTensor(ADDRESS), shape, strides, block_shape, padding)


def _gluon(base=None, shape=(4096, 128), strides=(128, 1), block_shape=(128, 64),
           padding="zero", layout=SWIZZLE_128):
    return GluonDescriptor(base or _GpuTensor(ADDRESS), shape, strides, block_shape, layout,
                           padding)


MAKERS = {"tile": _tile, "gluon": _gluon}


@pytest.mark.parametrize("frontend", sorted(MAKERS))
def test_fresh_descriptors_over_the_same_tensor_share_one_encoded_map(encodes, frontend):
    make = MAKERS[frontend]
    first = make()
    second = make(block_shape=[1, 1] if frontend == "tile" else [128, 64])
    second.block_shape = [128, 64]  # as tutorial 06's pre-hook sets it
    assert first.tensor_map == second.tensor_map == bytes([1]) * 128
    assert first.type == second.type
    assert first.param_bytes() is second.param_bytes()  # packed once, too
    assert encodes == [(ADDRESS, (128, 64), (128, 64))]


def test_gluon_descriptors_check_and_encode_when_made(encodes):
    _gluon()
    assert encodes == [(ADDRESS, (128, 64), (128, 64))]
    with pytest.raises(ValueError, match="strides\\[0\\] = 100 elements = 200 bytes"):
        _gluon(strides=[100, 1])


@pytest.mark.parametrize("frontend", sorted(MAKERS))
@pytest.mark.parametrize("change", ["address", "dtype", "shape", "strides", "block", "padding",
                                    "layout"])
def test_anything_the_map_depends_on_encodes_again(encodes, frontend, change):
    if change == "layout" and frontend == "tile":
        pytest.skip("the tile DSL's layout follows from the block and dtype")
    make = MAKERS[frontend]
    make().tensor_map
    changed = {"address": dict(base=_GpuTensor(ADDRESS + 0x100000)),
               "dtype": dict(base=_GpuTensor(ADDRESS, np.float32)),
               "shape": dict(shape=[2048, 128]), "strides": dict(strides=[256, 1]),
               "block": dict(block_shape=[64, 64]), "padding": dict(padding="nan"),
               "layout": dict(layout=SWIZZLE_64)}[change]
    if change == "dtype" and frontend == "gluon":
        changed["layout"] = gl.NVMMASharedLayout(128, 32, rank=2)
    make(**changed).tensor_map
    assert len(encodes) == 2


@pytest.mark.parametrize("frontend", sorted(MAKERS))
def test_a_bad_descriptor_is_still_refused_after_a_good_one(encodes, frontend):
    make = MAKERS[frontend]
    make().tensor_map
    with pytest.raises(ValueError, match="strides\\[0\\] = 100 elements = 200 bytes"):
        make(strides=[100, 1]).tensor_map


def test_a_multicast_box_is_encoded_once_and_kept_apart_from_the_blocks_map(encodes):
    desc = _gluon()
    sliced = desc.with_box([64, 64])
    assert sliced is desc.with_box((64, 64))
    assert _gluon().with_box([64, 64]).tensor_map == sliced.tensor_map == bytes([2]) * 128
    assert desc.tensor_map == bytes([1]) * 128 and sliced.type == desc.type
    assert encodes == [(ADDRESS, (128, 64), (128, 64)), (ADDRESS, (128, 64), (64, 64))]


def test_host_descriptors_are_checked_but_never_encoded(encodes):
    x = np.zeros((256, 128), np.float16)
    for desc in (TileDescriptor.from_tensor(x, [128, 64]),
                 GluonDescriptor.from_tensor(x, [128, 64], SWIZZLE_128)):
        assert desc.tensor_map is None and desc.param_bytes()[:128] == bytes(128)
    assert encodes == []
