"""The layout relations both frontends use, checked against the LinearLayout algebra: a derived
layout must place every element where the relation says (same thread, same register)."""

from types import SimpleNamespace

import pytest

from shared_codegen.layouts import (BlockedLayout, DistributedLinearLayout, SliceLayout,
                                    to_linear_layout)
from shared_codegen.layouts.relations import (Prefer, Reshape, Slice, Trans, equivalent,
                                              reshaped_layout, transposed_layout)

BLOCKED = BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0])
COLUMN_MAJOR = BlockedLayout([2, 1], [8, 4], [1, 4], [0, 1])
LAYOUTS = [BLOCKED, COLUMN_MAJOR]
THREAD_DIMS = ("register", "lane", "warp")


def tensor(*shape):
    """A stand-in for an IR value: relations read only its shape."""
    return SimpleNamespace(type=SimpleNamespace(shape=tuple(shape)))


def flat_index(coords, shape):
    index = 0
    for c, s in zip(coords, shape):
        index = index * s + c
    return index


@pytest.mark.parametrize("layout", LAYOUTS)
def test_trans_forward_permutes_every_basis_vector(layout):
    rel = Trans(None, tensor(32, 64), tensor(64, 32), (1, 0))
    src = to_linear_layout(layout, [32, 64])
    dst = to_linear_layout(rel.forward(layout), [64, 32])
    for dim in THREAD_DIMS:
        assert [v[::-1] for v in src.bases[dim]] == [tuple(v) for v in dst.bases[dim]]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_trans_backward_undoes_forward(layout):
    rel = Trans(None, tensor(32, 64), tensor(64, 32), (1, 0))
    assert equivalent(rel.backward(rel.forward(layout)), layout, [32, 64])


def test_transposed_blocked_layout_stays_blocked():
    assert transposed_layout(BLOCKED, (1, 0), [32, 64]) == BlockedLayout(
        [4, 1], [8, 4], [2, 2], [0, 1])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reshape_keeps_every_element_in_its_register(layout):
    rel = Reshape(None, tensor(32, 64), tensor(128, 16))
    src = to_linear_layout(layout, [32, 64])
    dst = to_linear_layout(rel.forward(layout), [128, 16])
    for dim in THREAD_DIMS:
        before = [flat_index(v, (32, 64)) for v in src.bases[dim]]
        after = [flat_index(v, (128, 16)) for v in dst.bases[dim]]
        assert before == after


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reshape_backward_undoes_forward(layout):
    rel = Reshape(None, tensor(32, 64), tensor(8, 4, 64))
    there = rel.forward(layout)
    assert equivalent(rel.backward(there), layout, [32, 64])
    assert equivalent(reshaped_layout(there, [8, 4, 64], [32, 64]), layout, [32, 64])


@pytest.mark.parametrize("axis", [0, 1])
def test_slice_backward_drops_the_axis_from_the_parent(axis):
    rel = Slice(None, tensor(64 if axis == 0 else 32), tensor(32, 64), axis)
    sliced = rel.backward(BLOCKED)
    assert sliced == SliceLayout(axis, BLOCKED)
    parent = to_linear_layout(BLOCKED, [32, 64])
    child = to_linear_layout(sliced, list(rel.a.type.shape))

    def drop(v):
        return tuple(c for d, c in enumerate(v) if d != axis)

    for dim in ("lane", "warp"):
        assert [drop(v) for v in parent.bases[dim]] == [tuple(v) for v in child.bases[dim]]
    # Registers that only walked the dropped axis now hold copies, and are gone.
    kept = [drop(v) for v in parent.bases["register"] if any(drop(v))]
    assert kept == [tuple(v) for v in child.bases["register"]]


def test_slice_forward_recovers_only_a_slice_along_its_axis():
    rel = Slice(None, tensor(32), tensor(32, 64), 1)
    assert rel.forward(SliceLayout(1, BLOCKED)) == BLOCKED
    assert rel.forward(SliceLayout(0, BLOCKED)) is None
    assert rel.forward(BLOCKED) is None


def test_a_preference_keeps_the_layout_both_ways():
    rel = Prefer(None, tensor(32, 64), tensor(32, 64))
    assert rel.forward(BLOCKED) is BLOCKED and rel.backward(BLOCKED) is BLOCKED


def test_a_derived_linear_layout_that_is_blocked_prints_as_blocked():
    linear = DistributedLinearLayout(
        [(0, 1), (0, 2)], [(0, 4), (0, 8), (0, 16), (1, 0), (2, 0)], [(4, 0), (8, 0)], [],
        [16, 32])
    rel = Reshape(None, tensor(16, 32), tensor(16, 32))
    assert isinstance(rel.forward(linear), BlockedLayout)
