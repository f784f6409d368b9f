"""`gluon.distributed`: the host side of `gl.distributed`, shared with `tile.distributed`."""

from tile.distributed import RankContext, SimulatedWorld, SymmetricHeap, SymmetricTensor

__all__ = ["SimulatedWorld", "SymmetricHeap", "SymmetricTensor", "RankContext"]
