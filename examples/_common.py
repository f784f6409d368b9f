"""What the examples share: choosing where to run and making inputs there."""

from __future__ import annotations

import numpy as np


def use_gpu() -> bool:
    """True when a GPU and torch are both present (the examples then run on the device)."""
    try:
        from shared_codegen.runtime.driver import has_gpu

        if not has_gpu():
            return False
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def to_device(array: np.ndarray, gpu: bool):
    if not gpu:
        return array
    import torch

    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(array).cuda()


def to_host(value) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    import torch

    if value.dtype == torch.bfloat16:
        import ml_dtypes

        return value.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return value.cpu().numpy()


def empty_like(x):
    if isinstance(x, np.ndarray):
        return np.empty_like(x)
    import torch

    return torch.empty_like(x)


def next_power_of_2(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()
