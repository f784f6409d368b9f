"""`tl.extra.cuda`: NVIDIA-specific extras (Triton 3.6 `triton.language.extra.cuda`):
`libdevice`, and the grid dependency control of programmatic dependent launch
(`gdc_wait`, `gdc_launch_dependents`)."""

from tile.language.extra.cuda import libdevice
from tile.language.extra.cuda.gdc import gdc_launch_dependents, gdc_wait

__all__ = ["libdevice", "gdc_launch_dependents", "gdc_wait"]
