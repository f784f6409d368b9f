"""`TensorDescriptor` (Triton 3.6's `triton.tools.tensor_descriptor.TensorDescriptor`): a
host tensor descriptor passed to tile kernels, whose `desc.load` / `desc.store` are TMA copies.

    from tile.tools.tensor_descriptor import TensorDescriptor
    desc = TensorDescriptor.from_tensor(x, block_shape=[64, 64])
    kernel[grid](desc, ...)

It is the host descriptor Gluon kernels take (`shared_codegen/runtime/tensor_descriptor.py`: the
same checks, encoding and interpreter view) with the shared-memory layout the tile compiler
picks for TMA, the widest NVMMA swizzle the block allows (`NVMMASharedLayout.get_default_for`),
as Triton's tile compiler does. `padding="nan"` makes out-of-bounds elements of `desc.load` read
NaN.
"""

from __future__ import annotations

import functools
from typing import Any, List

from shared_codegen.runtime.tensor_descriptor import TensorDescriptor as _SharedTensorDescriptor
from shared_codegen.runtime.tensor_descriptor import (_is_host, _key, _strides_of,
                                                      dataclass_fields)
from shared_codegen.ir.types import from_host_dtype
from shared_codegen.layouts import NVMMASharedLayout
from shared_codegen.ops.tma.definition import TMA_DTYPES
from shared_codegen.runtime.specialize import register_handler

__all__ = ["TensorDescriptor"]


class TensorDescriptor(_SharedTensorDescriptor):
    """`base` (a CUDA tensor, or a numpy array / CPU tensor for the interpreter), `shape` and
    `strides` in elements (last stride 1), `block_shape` (the block each access moves),
    `padding` ("zero" or "nan").

    As in Triton, `block_shape` may be assigned after construction (tutorial 09's autotune
    pre-hooks set it per config on a descriptor made with a dummy [1, 1] block): the block
    checks, the layout and the encoded map follow the current `block_shape` and are computed
    when a launch first needs them. Encoded maps are shared as the base class says."""

    __dataclass_fields__ = dataclass_fields("base", "shape", "strides", "block_shape", "padding")

    def __init__(self, base: Any, shape: List[int], strides: List[int], block_shape: List[int],
                 padding: str = "zero"):
        self.base = base
        self.shape = [int(s) for s in shape]
        self.strides = [int(s) for s in strides]
        self.padding = padding
        self.on_host = _is_host(base)
        self._prepared = {}
        self.block_shape = block_shape  # checked when a launch first needs it

    @property
    def layout(self):
        return _default_layout(self.base, self._block_shape)

    def _layout_identity(self):
        # The layout follows from the dtype and the block, both in the state's identity.
        return "default"

    @staticmethod
    def from_tensor(tensor: Any, block_shape: List[int], padding: str = "zero"):
        """A descriptor over all of `tensor` (its shape and strides)."""
        return TensorDescriptor(tensor, list(tensor.shape), _strides_of(tensor), block_shape,
                                padding)

    def __repr__(self):
        return (f"TensorDescriptor(shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape}, padding={self.padding!r})")


@functools.lru_cache(maxsize=256)
def _layout_for(block: tuple, element):
    return NVMMASharedLayout.get_default_for(list(block), element)


def _default_layout(base, block_shape):
    element = from_host_dtype(getattr(base, "dtype", None))
    if element is None or element.name not in TMA_DTYPES:
        raise ValueError(f"TensorDescriptor: dtype {getattr(base, 'dtype', None)} is not "
                         f"supported by TMA; supported: {', '.join(sorted(TMA_DTYPES))}")
    block = tuple(int(b) for b in block_shape)
    try:
        return _layout_for(block, element)
    except ValueError as exc:
        raise ValueError(f"TensorDescriptor: block_shape {list(block)}: {exc}") from None


register_handler(TensorDescriptor, _key, fast_key=True)
