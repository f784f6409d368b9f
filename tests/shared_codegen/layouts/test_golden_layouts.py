"""Our layouts against what Triton 3.6.0 produced for the same parameters and shapes
(tests/data/layouts/README.md says how the data was made)."""

import json
import pathlib

import pytest

from gluon import layouts
from gluon.layouts import LinearLayout

DATA = pathlib.Path(__file__).parents[2] / "data" / "layouts"
IN_DIMS = ["register", "lane", "warp", "block"]


def _build(spec):
    spec = dict(spec)
    kind = spec.pop("kind")
    if "parent" in spec:
        spec["parent"] = _build(spec["parent"])
    return getattr(layouts, kind)(**spec)


def _load(name):
    with open(DATA / name) as f:
        return json.load(f)["cases"]


def _as_lists(layout: LinearLayout, names):
    return [[list(v) for v in layout.bases.get(name, [])] for name in names]


def test_every_distributed_layout_matches_triton():
    cases = _load("distributed_golden.json")
    assert len(cases) > 2000
    mismatches = []
    for case in cases:
        layout = _build(case["layout"])
        linear = layouts.to_linear_layout(layout, case["shape"])
        got = _as_lists(linear, IN_DIMS)
        if linear.in_dims != IN_DIMS or got != case["bases"] or \
                [linear.out_dim_size(f"dim{i}") for i in range(len(case["shape"]))] != \
                case["shape"]:
            mismatches.append((repr(layout), case["shape"], case["bases"], got))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[0]}"


def test_golden_sweep_covers_every_distributed_family():
    kinds = {case["layout"]["kind"] for case in _load("distributed_golden.json")}
    assert kinds == {"BlockedLayout", "SliceLayout", "NVMMADistributedLayout",
                     "DotOperandLayout"}


def _triton_layout(bases, out_dims):
    return LinearLayout([(name, [tuple(v) for v in vectors]) for name, vectors in bases],
                        [tuple(d) for d in out_dims], require_surjective=False)


def _same(ours: LinearLayout, bases, out_dims):
    # Triton's python binding does not keep the in-dim order it was given, so in dims are
    # compared as a mapping; out dims (names, order, sizes) must match exactly.
    theirs = _triton_layout(bases, out_dims)
    return ours.bases == theirs.bases and ours.out_dims == theirs.out_dims and \
        ours.out_dim_sizes == theirs.out_dim_sizes


@pytest.fixture(scope="module")
def algebra_cases():
    return _load("algebra_golden.json")


def test_tensor_product_matches_triton(algebra_cases):
    for case in algebra_cases:
        inner = _triton_layout(case["inner"], case["out_dims"])
        outer = _triton_layout(case["outer"], case["out_dims"])
        expected = case["product"]
        assert _same(inner * outer, expected["bases"], expected["out_dims"])


def test_pseudo_invert_matches_triton(algebra_cases):
    for case in algebra_cases:
        outer = _triton_layout(case["outer"], case["out_dims"])
        ours = outer.pseudo_invert()
        expected = {name: [tuple(v) for v in vectors]
                    for name, vectors in case["pseudo_invert"]}
        assert ours.bases == expected


def test_invert_and_compose_matches_triton(algebra_cases):
    checked = 0
    for case in algebra_cases:
        if "invert_and_compose" not in case:
            continue  # Triton rejected the pair (image not contained)
        inner = _triton_layout(case["inner"], case["out_dims"])
        outer = _triton_layout(case["outer"], case["out_dims"])
        expected = case["invert_and_compose"]
        assert _same(inner.invert_and_compose(outer), expected["bases"],
                     expected["out_dims"]), (inner, outer)
        checked += 1
    assert checked > 200
