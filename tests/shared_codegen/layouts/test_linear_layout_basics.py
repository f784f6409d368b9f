"""LinearLayout construction, printing and the module docstring's worked example."""

import numpy as np
import pytest

from gluon.layouts import LinearLayout


def example():
    return LinearLayout({"register": [(0, 1), (0, 2), (1, 0)], "lane": [(2, 0)]},
                        [("dim0", 4), ("dim1", 4)])


def test_worked_example_from_the_module_docstring():
    layout = example()
    assert layout.apply({"register": 5, "lane": 1}) == {"dim0": 3, "dim1": 1}
    assert layout.bit_matrix().tolist() == [[0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0],
                                            [0, 1, 0, 0]]
    assert layout.in_dims == ["register", "lane"] and layout.out_dims == ["dim0", "dim1"]
    assert (layout.in_dim_size("register"), layout.in_dim_size_log2("lane")) == (8, 1)
    assert (layout.total_in_size, layout.total_out_size) == (16, 16)
    assert (layout.num_in_bits, layout.num_out_bits) == (4, 4)


def test_str_matches_triton_to_string():
    assert str(example()) == (
        "\n - register=1 -> (0, 1)\n   register=2 -> (0, 2)\n   register=4 -> (1, 0)\n"
        " - lane=1 -> (2, 0)\nwhere out dims are: [dim0 (size 4), dim1 (size 4)]")
    assert str(LinearLayout.empty()) == "\n(empty layout)"
    zeros = LinearLayout.zeros_1d(1, "register", "dim0")
    assert " - register is a size 1 dimension" in str(zeros)


def test_constructors():
    assert LinearLayout.identity_1d(8, "lane", "dim0").bases == {"lane": [(1,), (2,), (4,)]}
    assert LinearLayout.zeros_1d(4, "warp", "dim0", 2).out_dim_size("dim0") == 2
    strided = LinearLayout.strided_1d(4, 2, "register", "dim0")
    assert strided.bases["register"] == [(2,), (4,)] and strided.out_dim_size("dim0") == 8
    inferred = LinearLayout({"offset": [(1, 0), (0, 1), (0, 2)]}, ["dim0", "dim1"])
    assert inferred.out_dim_sizes == {"dim0": 2, "dim1": 4}
    assert LinearLayout.from_bases([("lane", [1, 2])], {"dim0": 4}) == \
        LinearLayout.identity_1d(4, "lane", "dim0")


def test_construction_errors_name_the_problem():
    with pytest.raises(ValueError, match="size must be a power of two, got 3"):
        LinearLayout({"lane": [(1,)]}, [("dim0", 3)])
    with pytest.raises(ValueError, match="outside out dim size 2"):
        LinearLayout({"lane": [(2,)]}, [("dim0", 2)])
    with pytest.raises(ValueError, match="not surjective"):
        LinearLayout({"lane": [(0,)]}, [("dim0", 2)])
    with pytest.raises(ValueError, match="expected one per out dim"):
        LinearLayout({"lane": [(1, 0)]}, [("dim0", 2)])
    with pytest.raises(ValueError, match="not a permutation"):
        example().transpose_outs(["dim0"])


def test_compose_and_invert_and_compose_follow_triton_argument_order():
    layout = example()
    inverse = layout.invert()
    assert inverse.in_dims == ["dim0", "dim1"] and inverse.out_dims == ["register", "lane"]
    identity = (LinearLayout.identity_1d(8, "register", "register")
                * LinearLayout.identity_1d(2, "lane", "lane"))
    assert layout.compose(inverse) == identity
    # A.invert_and_compose(B) = C with B(C(x)) = A(x); here B = A so C is the identity.
    assert layout.invert_and_compose(layout) == identity


def test_broadcast_lanes_map_to_the_first_copy_in_conversions():
    src = LinearLayout({"register": [(1,)], "lane": [(0,), (2,)]}, [("dim0", 4)])
    dst = LinearLayout({"register": [(2,), (1,)], "lane": [(0,), (0,)]}, [("dim0", 4)])
    conversion = src.invert_and_compose(dst)
    for lane in range(4):
        for register in range(2):
            target = conversion.apply({"register": register, "lane": lane})
            assert dst.apply(target) == src.apply({"register": register, "lane": lane})
            assert target["lane"] == 0  # free variables are zero


def test_sublayout_concat_and_free_variables():
    layout = example()
    assert layout.sublayout(["lane"], ["dim0"]).bases == {"lane": [(2,)]}
    lanes = LinearLayout({"lane": [(1,), (1,)]}, [("dim0", 2)])
    assert lanes.get_free_variable_masks() == {"lane": 0b10}
    both = LinearLayout.identity_1d(2, "register", "dim0").concat_ins(
        LinearLayout.zeros_1d(2, "lane", "dim0", 2))
    assert both.in_dims == ["register", "lane"]
    outs = LinearLayout.identity_1d(2, "lane", "a").concat_outs(
        LinearLayout.identity_1d(2, "lane", "b"))
    assert outs.bases == {"lane": [(1, 1)]}


def test_apply_array_broadcasts():
    out = example().apply_array({"register": np.arange(8), "lane": np.array([[0], [1]])})
    assert out["dim0"].shape == (2, 8)
    assert out["dim0"][1, 5] == 3 and out["dim1"][1, 5] == 1


def test_num_consecutive_in_out_is_the_vector_width():
    layout = (LinearLayout.identity_1d(4, "register", "dim0")
              * LinearLayout.identity_1d(8, "lane", "dim0"))
    assert layout.get_num_consecutive_in_out() == 4
    assert example().get_num_consecutive_in_out() == 1
