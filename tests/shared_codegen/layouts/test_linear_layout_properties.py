"""Algebraic identities of LinearLayout, on random layouts (hypothesis)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared_codegen.layouts import LinearLayout, gf2

IN_NAMES = ["register", "lane", "warp"]
settings.register_profile("layouts", max_examples=60, deadline=None)
settings.load_profile("layouts")


@st.composite
def layouts(draw, out_dims=None, in_names=None, surjective=False):
    if out_dims is None:
        out_dims = [(f"dim{i}", 2 ** draw(st.integers(0, 3)))
                    for i in range(draw(st.integers(1, 2)))]
    if in_names is None:
        in_names = draw(st.lists(st.sampled_from(IN_NAMES), min_size=1, max_size=3,
                                 unique=True))
    bases = {}
    for name in in_names:
        count = draw(st.integers(0, 3))
        bases[name] = [tuple(draw(st.integers(0, size - 1)) for _, size in out_dims)
                       for _ in range(count)]
    if surjective:
        # Append the identity so every output is reachable.
        first = in_names[0]
        for index, (_, size) in enumerate(out_dims):
            for bit in range(size.bit_length() - 1):
                bases[first].append(tuple((1 << bit) if j == index else 0
                                          for j in range(len(out_dims))))
    return LinearLayout(bases, out_dims, require_surjective=surjective)


def _all_inputs(layout):
    ranges = [range(layout.in_dim_size(name)) for name in layout.in_dims]
    for values in itertools.product(*ranges):
        yield dict(zip(layout.in_dims, values))


def _flat(layout, inputs):
    flat, shift = 0, 0
    for name in layout.in_dims:
        flat |= inputs[name] << shift
        shift += layout.in_dim_size_log2(name)
    return flat


def _bits(value, count):
    return np.array([(value >> i) & 1 for i in range(count)], dtype=np.uint8)


@given(layouts())
def test_apply_is_the_bit_matrix_times_the_input_bits(layout):
    matrix = layout.bit_matrix().astype(np.int64)
    for inputs in _all_inputs(layout):
        flat_in = _flat(layout, inputs)
        expected = matrix @ _bits(flat_in, layout.num_in_bits) % 2
        flat_out = layout.apply_flat(flat_in)
        assert list(_bits(flat_out, layout.num_out_bits)) == list(expected)
        out = layout.apply(inputs)
        assert layout.reshape_outs([("x", layout.total_out_size)]).apply(inputs)["x"] == \
            flat_out
        assert list(out) == layout.out_dims


@given(layouts())
def test_apply_array_agrees_with_apply(layout):
    grids = np.meshgrid(*[np.arange(layout.in_dim_size(n)) for n in layout.in_dims],
                        indexing="ij")
    arrays = layout.apply_array(dict(zip(layout.in_dims, grids)))
    for inputs in _all_inputs(layout):
        index = tuple(inputs[n] for n in layout.in_dims)
        assert {k: int(v[index]) for k, v in arrays.items()} == layout.apply(inputs)


@given(layouts(surjective=True))
def test_pseudo_inverse_is_a_right_inverse(layout):
    inverse = layout.pseudo_invert()
    assert inverse.compose(layout).transpose_outs(layout.out_dims) == _identity(layout)


def _identity(layout):
    result = LinearLayout.empty()
    for name in layout.out_dims:
        result = result * LinearLayout.identity_1d(layout.out_dim_size(name), name, name)
    return result


@given(layouts(out_dims=[("dim0", 4), ("dim1", 8)], surjective=True),
       layouts(out_dims=[("dim0", 4), ("dim1", 8)]))
def test_invert_and_compose_solves_outer_of_c_equals_self(outer, inner):
    try:
        conversion = inner.invert_and_compose(outer)
    except ValueError:
        return  # the identity-dim shortcut can leave a dim Triton also cannot solve
    assert conversion.in_dims == inner.in_dims
    for inputs in _all_inputs(inner):
        assert outer.apply(conversion.apply(inputs)) == inner.apply(inputs)


@given(layouts(surjective=True))
def test_invertible_layouts_invert_both_ways(layout):
    square = layout.sublayout(layout.in_dims, layout.out_dims)
    if not square.is_invertible():
        return
    inverse = square.invert()
    assert square.compose(inverse).transpose_outs(square.in_dims) == _identity_in(square)
    assert inverse.compose(square).transpose_outs(square.out_dims) == _identity(square)


def _identity_in(layout):
    result = LinearLayout.empty()
    for name in layout.in_dims:
        result = result * LinearLayout.identity_1d(layout.in_dim_size(name), name, name)
    return result


@given(layouts(), layouts())
def test_tensor_product_applies_blockwise(inner, outer):
    product = inner * outer
    for a in itertools.islice(_all_inputs(inner), 16):
        for b in itertools.islice(_all_inputs(outer), 16):
            combined = {}
            for name in product.in_dims:
                low = a.get(name, 0)
                high = b.get(name, 0)
                shift = inner.in_dim_size_log2(name) if inner.has_in_dim(name) else 0
                combined[name] = low | (high << shift)
            got = product.apply(combined)
            inner_out, outer_out = inner.apply(a), outer.apply(b)
            for name in product.out_dims:
                shift = inner.out_dim_size_log2(name) if inner.has_out_dim(name) else 0
                expected = inner_out.get(name, 0) ^ (outer_out.get(name, 0) << shift)
                assert got[name] == expected


@given(layouts())
def test_free_variable_masks_mark_dependent_columns(layout):
    masks = layout.get_free_variable_masks()
    matrix = layout.bit_matrix()
    column = 0
    kept = []
    for name in layout.in_dims:
        for bit in range(layout.in_dim_size_log2(name)):
            if not (masks[name] >> bit) & 1:
                kept.append(column)
            column += 1
    assert len(kept) == layout.matrix_rank
    assert gf2.rank(matrix[:, kept]) == layout.matrix_rank


@given(layouts())
def test_injective_and_surjective_follow_the_rank(layout):
    rank = gf2.rank(layout.bit_matrix())
    assert layout.is_injective() == (rank == layout.num_in_bits)
    assert layout.is_surjective() == (rank == layout.num_out_bits)


@given(layouts())
def test_reshape_and_flatten_round_trip(layout):
    flat = layout.flatten_ins().flatten_outs()
    assert flat.num_in_bits == layout.num_in_bits
    back = flat.reshape_ins([(n, layout.in_dim_size(n)) for n in layout.in_dims]) \
        .reshape_outs([(n, layout.out_dim_size(n)) for n in layout.out_dims])
    assert back == layout


@given(layouts())
def test_transpose_outs_permutes_components(layout):
    order = list(reversed(layout.out_dims))
    moved = layout.transpose_outs(order)
    for inputs in itertools.islice(_all_inputs(layout), 32):
        assert moved.apply(inputs) == {n: layout.apply(inputs)[n] for n in order}


@given(layouts())
def test_equal_layouts_hash_equal_and_repr_round_trips(layout):
    again = eval(repr(layout), {"LinearLayout": LinearLayout})
    assert again == layout and hash(again) == hash(layout)


def test_gf2_solve_inverse_and_null_space():
    a = np.array([[1, 1, 0], [0, 1, 1]], dtype=np.uint8)
    x = gf2.solve(a, [1, 0])
    assert list(a.astype(int) @ x % 2) == [1, 0]
    kernel = gf2.null_space(a)
    assert kernel.shape == (1, 3) and not (a.astype(int) @ kernel[0] % 2).any()
    square = np.array([[1, 1], [0, 1]], dtype=np.uint8)
    assert (gf2.inverse(square).astype(int) @ square % 2 == np.eye(2)).all()
    assert gf2.solve(np.zeros((1, 1), dtype=np.uint8), [1]) is None
    with pytest.raises(ValueError, match="singular"):
        gf2.inverse(np.zeros((2, 2), dtype=np.uint8))


@given(st.lists(st.integers(min_value=0, max_value=(1 << 12) - 1), min_size=1, max_size=14))
def test_bit_packed_rank_agrees_with_sympy(vectors):
    # The hot-path rank (bit-packed elimination) must equal sympy's DomainMatrix rank.
    from sympy import GF
    from sympy.polys.matrices import DomainMatrix

    from shared_codegen.layouts import gf2

    field = GF(2)
    rows = [[field((v >> b) & 1) for b in range(12)] for v in vectors]
    assert gf2.int_rank(vectors) == DomainMatrix(rows, (len(vectors), 12), field).rank()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 7), st.integers(1, 9), st.data())
def test_bit_packed_elimination_agrees_with_sympy(rows, cols, data):
    bits = data.draw(st.lists(st.integers(0, 1), min_size=rows * cols, max_size=rows * cols))
    matrix = np.array(bits, dtype=np.uint8).reshape(rows, cols)
    reduced, pivots = gf2.rref(matrix)
    ref_reduced, ref_pivots = gf2.reference_rref(matrix)
    assert pivots == ref_pivots
    np.testing.assert_array_equal(reduced, ref_reduced)
    np.testing.assert_array_equal(gf2.null_space(matrix), gf2.reference_null_space(matrix))
    if rows == cols and gf2.rank(matrix) == rows:
        inv = gf2.inverse(matrix)
        np.testing.assert_array_equal((matrix.astype(int) @ inv) % 2, np.eye(rows, dtype=int))
