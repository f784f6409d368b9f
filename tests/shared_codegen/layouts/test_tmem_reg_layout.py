"""``get_tmem_reg_layout`` against Triton 3.6.0's ``compute_tmem_reg_layout`` (golden data in
tests/data/layouts/tmem_reg_golden.json), plus its argument checks."""

import json
import pathlib
from types import SimpleNamespace

import pytest

from gluon.layouts import (DistributedLinearLayout, TensorMemoryLayout, get_tmem_reg_layout,
                           to_linear_layout)

DATA = pathlib.Path(__file__).parents[2] / "data" / "layouts"
BITS = {"float32": 32, "float16": 16, "int8": 8}


@pytest.fixture(scope="module")
def cases():
    with open(DATA / "tmem_reg_golden.json") as f:
        return json.load(f)["cases"]


def _arguments(case):
    spec = case["layout"]
    layout = TensorMemoryLayout(spec["block"], spec["col_stride"], spec.get("cta_split_num"),
                                spec.get("two_ctas", False))
    return (BITS[case["dtype"]], case["shape"], layout, case["num_warps"],
            case["instr_variant"], case.get("cga_layout", ()))


def _bases(layout: DistributedLinearLayout):
    return [[list(v) for v in bases] for bases in
            (layout.reg_bases, layout.lane_bases, layout.warp_bases, layout.block_bases)]


def test_every_tmem_register_layout_matches_triton(cases):
    mismatches = []
    for case in cases:
        if "error" in case:
            continue
        try:
            got = get_tmem_reg_layout(*_arguments(case))
        except ValueError as error:
            mismatches.append((case, str(error)))
            continue
        if _bases(got) != case["bases"] or list(got.shape) != case["shape"]:
            mismatches.append((case, _bases(got)))
    assert not mismatches, f"{len(mismatches)} mismatches, first: {mismatches[0]}"


def test_cases_triton_rejects_raise_value_error(cases):
    rejected = [case for case in cases if "error" in case]
    assert len(rejected) > 100
    for case in rejected:
        with pytest.raises(ValueError):
            get_tmem_reg_layout(*_arguments(case))


def test_sweep_covers_each_variant_dtype_and_warp_count(cases):
    accepted = [case for case in cases if "error" not in case]
    assert {c["instr_variant"] for c in accepted} == {"32x32b", "16x64b", "16x128b",
                                                      "16x256b", "32x32b_splitn"}
    assert {(c["dtype"], c["layout"]["col_stride"]) for c in accepted} == {
        ("float32", 1), ("float16", 1), ("float16", 2), ("int8", 1), ("int8", 4)}
    assert {c["num_warps"] for c in accepted} == {4, 8, 16}
    assert {c["shape"][0] for c in accepted} >= {64, 128}


def test_32x32b_gives_each_thread_one_row():
    layout = get_tmem_reg_layout(32, [128, 64], TensorMemoryLayout((128, 64), 1), 4)
    assert layout.lane_bases == ((1, 0), (2, 0), (4, 0), (8, 0), (16, 0))
    assert layout.warp_bases == ((32, 0), (64, 0))
    assert layout.reg_bases == tuple((0, 1 << i) for i in range(6))
    assert to_linear_layout(layout, [128, 64]).is_surjective()


def test_dtype_objects_with_a_bitwidth_are_accepted():
    fp16 = SimpleNamespace(primitive_bitwidth=16)
    layout = TensorMemoryLayout((128, 64), 1)
    assert get_tmem_reg_layout(fp16, [128, 64], layout, 4) == \
        get_tmem_reg_layout(16, [128, 64], layout, 4)


def test_packed_fp16_keeps_column_pairs_in_one_thread():
    layout = get_tmem_reg_layout(16, [128, 64], TensorMemoryLayout((128, 64), 1), 4,
                                 "16x256b")
    assert layout.reg_bases[0] == (0, 1)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_warps": 6}, "num_warps must be a power of two >= 4"),
    ({"num_warps": 2}, "num_warps must be a power of two >= 4"),
    ({"instr_variant": "16x32bx2"}, "cannot be requested"),
    ({"instr_variant": "32x64b"}, "instr_variant must be one of"),
    ({"shape": [128]}, "shape must be [M, N]"),
    ({"shape": [128, 48]}, "shape must be [M, N] with powers of two"),
    ({"shape": [64, 64]}, "must be at least block * cta_split_num = [128, 64]"),
    ({"element_ty": 64}, "element_ty must be an 8-, 16- or 32-bit dtype"),
    ({"layout": TensorMemoryLayout((128, 64), 2)}, "bitwidth * layout.col_stride"),
    ({"layout": "tmem"}, "layout must be a TensorMemoryLayout"),
    ({"cga_layout": [[64, 0]]}, "cga_layout bases must be [0, 0]"),
    ({"cga_layout": [[0]]}, "must have 2 entries"),
    # Packed fp16 [128, 8] fills 4 TMEM columns; one 16x256b message reads 8.
    ({"element_ty": 16, "shape": [128, 8], "layout": TensorMemoryLayout((128, 8), 1),
      "instr_variant": "16x256b"}, "has no register layout"),
])
def test_bad_arguments_name_the_parameter(kwargs, message):
    arguments = {"element_ty": 32, "shape": [128, 64],
                 "layout": TensorMemoryLayout((128, 64), 1), "num_warps": 4}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match="get_tmem_reg_layout") as error:
        get_tmem_reg_layout(**arguments)
    assert message in str(error.value)


def test_m64_tensor_memory_rows_are_tensor_rows():
    # Regression: the 64-lane block used to list its row bases against the wrong out dim.
    memory = to_linear_layout(TensorMemoryLayout((64, 8), 1), [64, 8])
    applied = [memory.apply({"row": row, "col": 0}) for row in (1, 8, 16, 32, 64)]
    assert [(a["dim0"], a["dim1"]) for a in applied] == [(1, 0), (8, 0), (0, 0), (16, 0),
                                                        (32, 0)]
