"""`gl.distributed`: the same peer-access, signal and token builtins as `tl.distributed`
(tile/language/distributed.py, docs/distributed.md). Tensors keep the layouts they come
with: a translated pointer has its pointer's layout, an ordered load its pointer's."""

from tile.language.distributed import (atomic_add, atomic_and, atomic_cas, atomic_max,
                                       atomic_min, atomic_or, atomic_xchg, atomic_xor,
                                       consume_token, fence, get, load, notify, put, store,
                                       symm_at, wait)

__all__ = ["symm_at", "load", "store", "get", "put", "atomic_add", "atomic_max", "atomic_min",
           "atomic_and", "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas", "notify",
           "wait", "consume_token", "fence"]
