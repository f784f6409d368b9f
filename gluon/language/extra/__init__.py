"""`gl.extra` (Triton 3.6's `triton.experimental.gluon.language.extra`): the tile language's
backend libraries, shared with Gluon. `gl.extra.libdevice` is NVIDIA's libdevice
(`tile.language.extra.libdevice`); its results take the operands' layout."""

from tile.language.extra import libdevice

__all__ = ["libdevice"]
