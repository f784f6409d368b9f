"""Which host memory a real address may reach: the interpreter's answer for pointer tables.

Kernels like Triton's grouped GEMM (tutorial 08) load pointers from an argument, built on the
host from `tensor.data_ptr()` (or `array.ctypes.data`). The interpreter maps arguments at
fake addresses, so such a pointer is a real address of this process. It may be used only if
it lies inside a live host array: then the array's memory is accessed in place, and checked
against the array's extent, so a wrong pointer is reported instead of corrupting the process.

Live arrays are found without any registry: CPU torch tensors are tracked by the garbage
collector; numpy arrays are not, so they are looked for among what tracked objects refer to
and among the local variables of the calling frames (where the host code that built the
table holds them).
"""

from __future__ import annotations

import gc
import sys
import warnings
from typing import List, Tuple

import numpy as np


def live_host_spans() -> List[Tuple[int, int]]:
    """Merged [low, high) byte ranges of the memory of live CPU torch tensors and numpy
    arrays."""
    spans = _torch_spans() + _numpy_spans()
    merged: List[Tuple[int, int]] = []
    for low, high in sorted(spans):
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _torch_spans():
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    with warnings.catch_warnings():
        # isinstance on some of torch's deprecated module proxies warns; nothing to report.
        warnings.simplefilter("ignore")
        tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
    spans = []
    for tensor in tensors:
        if tensor.device.type != "cpu":
            continue
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # no storage (meta, sparse)
            continue
        if storage.nbytes():
            spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return spans


def _numpy_spans():
    arrays = {}
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            _collect(value, arrays)
        frame = frame.f_back
    for obj in gc.get_referents(*gc.get_objects()):
        if type(obj) is np.ndarray:
            arrays[id(obj)] = obj
    spans = []
    for arr in arrays.values():
        owner = arr
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        if owner.nbytes:
            spans.append(_byte_bounds(owner))
    return spans


def _collect(value, arrays) -> None:
    if type(value) is np.ndarray:
        arrays[id(value)] = value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if type(item) is np.ndarray:
                arrays[id(item)] = item


def _byte_bounds(arr: np.ndarray):
    try:
        from numpy.lib.array_utils import byte_bounds
    except ImportError:  # numpy 1.x
        byte_bounds = np.byte_bounds
    return byte_bounds(arr)
