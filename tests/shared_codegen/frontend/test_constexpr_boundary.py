"""The constexpr boundary: builtins never unwrap, because the code generator hands them plain
Python values, whether a constexpr comes from a parameter, a global, a literal
`tl.constexpr(...)`, or sits inside a tuple or list."""

import numpy as np

import tile
import tile.language as tl
from shared_codegen.frontend.launch import make_specialization
from shared_codegen.frontend.values import builtin

PROBE_GLOBAL = tl.constexpr(8)
PROBE_LIST = [tl.constexpr(2), 3]
PROBE_SEEN = []


@builtin
def _probe(*args, _semantic=None, **kwargs):
    PROBE_SEEN.append((args, kwargs))


@tile.jit
def _constexpr_probe_kernel(x_ptr, N: tl.constexpr):
    _probe(N, PROBE_GLOBAL, tl.constexpr(5), (N, (PROBE_GLOBAL,)), [N, PROBE_GLOBAL],
           PROBE_LIST, key=N, other=(PROBE_LIST,))


def _holds_constexpr(value) -> bool:
    if isinstance(value, tl.constexpr):
        return True
    if isinstance(value, (tuple, list)):
        return any(map(_holds_constexpr, value))
    if isinstance(value, dict):
        return any(map(_holds_constexpr, value.values()))
    return False


def test_builtins_receive_plain_values_for_constexprs():
    PROBE_SEEN.clear()
    kernel = _constexpr_probe_kernel
    kernel.make_ir(make_specialization(kernel, [np.zeros(4, np.float32), 4], 4, "sm_90a"))
    assert PROBE_SEEN
    for args, kwargs in PROBE_SEEN:  # one per trace (tools may trace again)
        assert args == (4, 8, 5, (4, (8,)), [4, 8], [2, 3])
        assert kwargs == {"key": 4, "other": ([2, 3],)}
        assert not _holds_constexpr(args) and not _holds_constexpr(kwargs)
    assert isinstance(PROBE_LIST[0], tl.constexpr)  # the global itself is left alone
