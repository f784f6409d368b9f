"""Shared-memory layouts against Triton 3.6.0's own linear form (read through a 1-D
``memdesc_reshape``; tests/data/layouts/README.md says how the data was made)."""

import json
import pathlib

import pytest

from gluon import layouts

DATA = pathlib.Path(__file__).parents[2] / "data" / "layouts"


@pytest.fixture(scope="module")
def cases():
    with open(DATA / "shared_golden.json") as f:
        return json.load(f)["cases"]


def _build(spec):
    spec = dict(spec)
    return getattr(layouts, spec.pop("kind"))(**spec)


def _bases(linear, name):
    return [list(v) for v in linear.bases.get(name, [])]


def test_every_shared_layout_matches_triton(cases):
    mismatches = []
    for case in cases:
        if "error" in case:
            continue
        linear = layouts.to_linear_layout(_build(case["layout"]), case["shape"])
        got = {"offset": _bases(linear, "offset"), "block": _bases(linear, "block")}
        sizes = [linear.out_dim_size("dim0"), linear.out_dim_size("dim1")]
        if got != case["bases"] or sizes != case["shape"]:
            mismatches.append((case["layout"], case["shape"], case["bases"], got))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[0]}"


def test_shapes_triton_rejects_raise_value_error(cases):
    rejected = [case for case in cases if "error" in case]
    assert rejected
    for case in rejected:
        with pytest.raises(ValueError):
            layouts.to_linear_layout(_build(case["layout"]), case["shape"])


def test_sweep_covers_every_swizzle_width_bitwidth_and_transposition(cases):
    nvmma = {(c["layout"]["swizzle_byte_width"], c["layout"]["element_bitwidth"],
              c["layout"]["transposed"])
             for c in cases if c["layout"]["kind"] == "NVMMASharedLayout" and "error" not in c}
    assert nvmma == {(s, b, t) for s in (0, 32, 64, 128) for b in (8, 16, 32)
                     for t in (False, True)}
    swizzled = [c for c in cases if c["layout"]["kind"] == "SwizzledSharedLayout"]
    assert len(swizzled) > 400
    assert any(c["layout"].get("cga_layout") for c in cases if "error" not in c)
