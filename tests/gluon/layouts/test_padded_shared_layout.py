"""`gl.PaddedSharedLayout` (Triton 3.6): the class, its checks and `with_identity_for`, and
the clear refusal when shared memory is allocated with it (padded addressing is not
implemented yet)."""

import pytest

import gluon
from gluon import language as gl


def test_with_identity_for_lists_the_order_bits_fastest_first():
    layout = gl.PaddedSharedLayout.with_identity_for([[32, 4]], [16, 64], [1, 0])
    assert layout.offset_bases == ((0, 1), (0, 2), (0, 4), (0, 8), (0, 16), (0, 32),
                                   (1, 0), (2, 0), (4, 0), (8, 0))
    assert layout == gl.PaddedSharedLayout([[32, 4]], layout.offset_bases, [], [16, 64])
    assert hash(layout) == hash(gl.PaddedSharedLayout([(32, 4)], layout.offset_bases, [],
                                                      (16, 64)))


@pytest.mark.parametrize("pairs, message", [
    ([], "must have at least one interval-padding pair"),
    ([[32, 4], [32, 8]], r"intervals must be distinct, got \[32, 32\]"),
    ([[24, 4]], "interval values must all be power of two"),
    ([[32, 3]], "padding values must all be power of two"),
])
def test_bad_pairs_say_what_is_wrong(pairs, message):
    with pytest.raises(ValueError, match=message):
        gl.PaddedSharedLayout(pairs, [[1]], [], [2])


def test_allocating_with_it_is_refused_in_the_users_terms():
    @gluon.jit
    def kernel():
        layout: gl.constexpr = gl.PaddedSharedLayout.with_identity_for([[64, 8]], [32, 64],
                                                                        [1, 0])
        gl.allocate_shared_memory(gl.float16, [32, 64], layout)

    with pytest.raises(gluon.CompilationError, match=r"shared memory layout: "
                       r"PaddedSharedLayout is not supported yet \(padded shared addressing"):
        gluon.compile(kernel, {})
