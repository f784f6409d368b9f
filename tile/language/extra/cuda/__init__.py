"""`tl.extra.cuda`: NVIDIA-specific extras (Triton 3.6 `triton.language.extra.cuda`)."""

from tile.language.extra.cuda import libdevice

__all__ = ["libdevice"]
