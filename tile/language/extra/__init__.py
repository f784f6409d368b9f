"""`tl.extra`: backend libraries. Triton 3.6's `tl.extra.libdevice` names the current backend's
library; this compiler targets NVIDIA GPUs only, so it is `tl.extra.cuda.libdevice`."""

from tile.language.extra import cuda, libdevice

__all__ = ["cuda", "libdevice"]
