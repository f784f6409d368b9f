"""`TensorDescriptor` (Triton 3.6's `triton.tools.tensor_descriptor.TensorDescriptor`): a
host tensor descriptor passed to tile kernels, whose `desc.load` / `desc.store` are TMA copies.

    from tile.tools.tensor_descriptor import TensorDescriptor
    desc = TensorDescriptor.from_tensor(x, block_shape=[64, 64])
    kernel[grid](desc, ...)

It is the host descriptor Gluon kernels take (`shared_codegen/runtime/tensor_descriptor.py`:
the same checks, encoding and interpreter view) with the shared-memory layout the tile compiler picks for TMA, the widest
NVMMA swizzle the block allows (`NVMMASharedLayout.get_default_for`), as Triton's tile
compiler does. `padding="nan"` is not supported for host descriptors yet (the error says so);
`tl.make_tensor_descriptor(..., padding_option="nan")` in the kernel is.
"""

from __future__ import annotations

from typing import Any, List

from shared_codegen.runtime.tensor_descriptor import TensorDescriptor as _SharedTensorDescriptor
from shared_codegen.runtime.tensor_descriptor import _key, _strides_of
from shared_codegen.ir.types import from_host_dtype
from shared_codegen.layouts import NVMMASharedLayout
from shared_codegen.ops.tma.definition import TMA_DTYPES
from shared_codegen.runtime.specialize import register_handler

__all__ = ["TensorDescriptor"]


class TensorDescriptor(_SharedTensorDescriptor):
    """`base` (a CUDA tensor, or a numpy array / CPU tensor for the interpreter), `shape` and
    `strides` in elements (last stride 1), `block_shape` (the block each access moves),
    `padding` ("zero")."""

    def __init__(self, base: Any, shape: List[int], strides: List[int], block_shape: List[int],
                 padding: str = "zero"):
        super().__init__(base, shape, strides, block_shape,
                         _default_layout(base, block_shape), padding)

    @staticmethod
    def from_tensor(tensor: Any, block_shape: List[int], padding: str = "zero"):
        """A descriptor over all of `tensor` (its shape and strides)."""
        return TensorDescriptor(tensor, list(tensor.shape), _strides_of(tensor), block_shape,
                                padding)

    def __repr__(self):
        return (f"TensorDescriptor(shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape}, padding={self.padding!r})")


def _default_layout(base, block_shape):
    element = from_host_dtype(getattr(base, "dtype", None))
    if element is None or element.name not in TMA_DTYPES:
        raise ValueError(f"TensorDescriptor: dtype {getattr(base, 'dtype', None)} is not "
                         f"supported by TMA; supported: {', '.join(sorted(TMA_DTYPES))}")
    block = [int(b) for b in block_shape]
    try:
        return NVMMASharedLayout.get_default_for(block, element)
    except ValueError as exc:
        raise ValueError(f"TensorDescriptor: block_shape {block}: {exc}") from None


register_handler(TensorDescriptor, _key, fast_key=True)
