"""Linear layouts: maps from hardware locations to tensor coordinates, linear over GF(2).

A worked example (the conventions are those of Triton's C++ ``LinearLayout``).
Take a 4x4 tensor held by a 2-thread "warp" with 8 registers per thread::

    register=1 -> (0, 1)       lane=1 -> (2, 0)
    register=2 -> (0, 2)
    register=4 -> (1, 0)

Input dimensions are named (``register``, ``lane``, ``warp``, ``block`` for tensors in
registers; ``offset``, ``block`` for shared memory; ``row``, ``col`` for tensor memory). Each
has one *basis vector* per input bit, so an input dimension with ``k`` bases has size ``2**k``.
Output dimensions (``dim0``, ``dim1``, ...) have power-of-two sizes; a basis vector has one
component per output dimension, listed in output-dimension order (here ``(dim0, dim1)``).

Applying the layout XORs the bases of the set input bits. Register 5 of lane 1 holds::

    L(register=5, lane=1) = L(register=1) ^ L(register=4) ^ L(lane=1)
                          = (0, 1) ^ (1, 0) ^ (2, 0) = (3, 1)

so thread 1's registers 0..7 hold elements (2,0) (2,1) (2,2) (2,3) (3,0) (3,1) (3,2) (3,3).
Built in Python::

    >>> L = LinearLayout({"register": [(0, 1), (0, 2), (1, 0)], "lane": [(2, 0)]},
    ...                  [("dim0", 4), ("dim1", 4)])
    >>> L.apply({"register": 5, "lane": 1})
    {'dim0': 3, 'dim1': 1}

A zero basis means the bit does not change the coordinates: that input is a broadcast copy.
The same layout as a bit matrix (``L.bit_matrix()``; rows are output bits, ``dim0`` bits low to
high then ``dim1``; columns are input bits, ``register`` bits then ``lane``)::

    dim0 bit0 | 0 0 1 0 |
    dim0 bit1 | 0 0 0 1 |
    dim1 bit0 | 1 0 0 0 |
    dim1 bit1 | 0 1 0 0 |

Layouts combine like functions: ``A * B`` is the tensor product (``B`` tiles copies of ``A``;
Triton's ``operator*``), ``A.compose(B)`` is ``B(A(x))``, ``A.invert_and_compose(B)`` is the
``C`` with ``B(C(x)) == A(x)``: the map from ``A``'s hardware locations to ``B``'s that a layout
conversion performs. Objects are immutable and hashable; expensive queries are cached on them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from shared_codegen.layouts import gf2

__all__ = ["LinearLayout"]


def _is_power_of_two(value: int) -> bool:
    return isinstance(value, (int, np.integer)) and value > 0 and (value & (value - 1)) == 0


def _log2(value: int) -> int:
    return int(value).bit_length() - 1


def _as_named_items(value, what: str) -> list[tuple]:
    if isinstance(value, Mapping):
        return list(value.items())
    items = list(value)
    for item in items:
        if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
            raise ValueError(f"{what} must be a dict or a list of (name, value) pairs, got {item!r}")
    return [tuple(item) for item in items]


def _cached_method(method):
    """Cache a no-argument method's result on the (immutable) instance itself, so the cache
    dies with the layout instead of pinning it in a global table."""
    attribute = "_cache_" + method.__name__

    @functools.wraps(method)
    def wrapper(self):
        try:
            return self.__dict__[attribute]
        except KeyError:
            value = self.__dict__[attribute] = method(self)
            return value

    return wrapper


def _check_size(what: str, size: int):
    if not _is_power_of_two(size):
        raise ValueError(f"{what} must be a power of two, got {size}")


class LinearLayout:
    """A linear map over GF(2) from named input dims to named output dims (see module doc).

    ``LinearLayout(bases, out_dims, require_surjective=True)``:

    - ``bases``: ``{in_dim: [basis, ...]}`` or a list of ``(in_dim, [basis, ...])``; each basis
      is a tuple with one int per output dim (a bare int is accepted when there is one output
      dim).
    - ``out_dims``: ``{name: size}``, a list of ``(name, size)``, or a list of names (sizes are
      then the smallest powers of two holding every basis value, Triton's inference rule).
    - ``require_surjective``: raise ``ValueError`` unless every output is reached.
    """

    def __init__(self, bases=None, out_dims=None, require_surjective: bool = True):
        bases_items = _as_named_items(bases or {}, "bases")
        if out_dims is None:
            out_dims = []
        out_items = self._parse_out_dims(out_dims, bases_items)
        num_out = len(out_items)
        normalized = []
        seen_in = set()
        for in_dim, vectors in bases_items:
            if in_dim in seen_in:
                raise ValueError(f"input dimension {in_dim!r} appears twice")
            seen_in.add(in_dim)
            normalized.append((in_dim, tuple(self._normalize_basis(in_dim, i, v, num_out)
                                             for i, v in enumerate(vectors))))
        for in_dim, vectors in normalized:
            for i, vector in enumerate(vectors):
                for (out_dim, size), component in zip(out_items, vector):
                    if component < 0 or component >= size:
                        raise ValueError(
                            f"basis {in_dim}={1 << i} -> {vector} has {out_dim}={component}, "
                            f"outside out dim size {size}")
        self._init(tuple(normalized), tuple(out_items), None)
        if require_surjective and not self.is_surjective():
            raise ValueError(f"layout is not surjective (rank {self.matrix_rank} < "
                             f"{self.num_out_bits} output bits):{self}")

    # -- construction ----------------------------------------------------------------------

    @staticmethod
    def _parse_out_dims(out_dims, bases_items) -> list[tuple[str, int]]:
        if isinstance(out_dims, Mapping):
            items = list(out_dims.items())
        else:
            items = list(out_dims)
        if items and all(isinstance(item, str) for item in items):
            # Triton infers each size as the smallest power of two above every basis value.
            inferred = []
            for index, name in enumerate(items):
                largest = 0
                for _, vectors in bases_items:
                    for vector in vectors:
                        vec = (vector,) if isinstance(vector, (int, np.integer)) else vector
                        if index < len(vec):
                            largest = max(largest, int(vec[index]))
                inferred.append((name, 1 << largest.bit_length()))
            return inferred
        parsed = []
        seen = set()
        for item in items:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise ValueError(f"out_dims entries must be (name, size), got {item!r}")
            name, size = item
            if name in seen:
                raise ValueError(f"output dimension {name!r} appears twice")
            seen.add(name)
            if not _is_power_of_two(size):
                raise ValueError(f"out dim {name!r} size must be a power of two, got {size}")
            parsed.append((str(name), int(size)))
        return parsed

    @staticmethod
    def _normalize_basis(in_dim, index, vector, num_out) -> tuple[int, ...]:
        if isinstance(vector, (int, np.integer)):
            vector = (vector,)
        vector = tuple(int(v) for v in vector)
        if len(vector) != num_out:
            raise ValueError(f"basis {in_dim}={1 << index} has {len(vector)} components, "
                             f"expected one per out dim ({num_out})")
        return vector

    def _init(self, bases, out_dims, surjective):
        self._bases = bases
        self._out_dims = out_dims
        self._surjective = surjective
        shifts = []
        shift = 0
        for _, size in out_dims:
            shifts.append(shift)
            shift += _log2(size)
        self._flat_bases = tuple(
            tuple(self._pack(vector, shifts) for vector in vectors) for _, vectors in bases)
        self._hash = hash((bases, out_dims))

    @staticmethod
    def _pack(vector, shifts) -> int:
        packed = 0
        for component, shift in zip(vector, shifts):
            packed |= component << shift
        return packed

    @classmethod
    def _trusted(cls, bases, out_dims, surjective=None) -> LinearLayout:
        """Build without validation; for results whose invariants follow from the inputs."""
        layout = cls.__new__(cls)
        layout._init(tuple((name, tuple(tuple(v) for v in vecs)) for name, vecs in bases),
                     tuple(out_dims), surjective)
        return layout

    @classmethod
    def from_bases(cls, bases, out_dims, require_surjective: bool = True) -> LinearLayout:
        return cls(bases, out_dims, require_surjective)

    @classmethod
    def empty(cls) -> LinearLayout:
        return cls._trusted((), (), True)

    @classmethod
    def identity_1d(cls, size: int, in_dim: str, out_dim: str) -> LinearLayout:
        """``in_dim=2**i -> 2**i``: the identity on a dimension of ``size`` elements."""
        _check_size("size", size)
        return cls._trusted([(in_dim, [(1 << i,) for i in range(_log2(size))])],
                            [(out_dim, size)], True)

    @classmethod
    def zeros_1d(cls, size: int, in_dim: str, out_dim: str, out_dim_size: int = 1):
        """Every input maps to 0: ``size`` broadcast copies."""
        _check_size("size", size)
        _check_size("out_dim_size", out_dim_size)
        return cls._trusted([(in_dim, [(0,)] * _log2(size))], [(out_dim, out_dim_size)],
                            out_dim_size == 1)

    @classmethod
    def strided_1d(cls, size: int, stride: int, in_dim: str, out_dim: str) -> LinearLayout:
        """``in_dim=2**i -> stride * 2**i``; the out dim has ``size * stride`` elements."""
        _check_size("size", size)
        _check_size("stride", stride)
        return cls._trusted([(in_dim, [(stride << i,) for i in range(_log2(size))])],
                            [(out_dim, size * stride)], stride == 1)

    # -- dimensions ----------------------------------------------------------------------

    @property
    def bases(self) -> dict[str, list[tuple[int, ...]]]:
        return {name: list(vectors) for name, vectors in self._bases}

    @property
    def in_dims(self) -> list[str]:
        return [name for name, _ in self._bases]

    @property
    def out_dims(self) -> list[str]:
        return [name for name, _ in self._out_dims]

    @property
    def out_dim_sizes(self) -> dict[str, int]:
        return dict(self._out_dims)

    @property
    def in_dim_sizes(self) -> dict[str, int]:
        return {name: 1 << len(vectors) for name, vectors in self._bases}

    def has_in_dim(self, name: str) -> bool:
        return any(n == name for n, _ in self._bases)

    def has_out_dim(self, name: str) -> bool:
        return any(n == name for n, _ in self._out_dims)

    def _in_index(self, name: str) -> int:
        for index, (n, _) in enumerate(self._bases):
            if n == name:
                return index
        raise KeyError(f"no input dimension {name!r} (have {self.in_dims})")

    def _out_index(self, name: str) -> int:
        for index, (n, _) in enumerate(self._out_dims):
            if n == name:
                return index
        raise KeyError(f"no output dimension {name!r} (have {self.out_dims})")

    def in_dim_size_log2(self, name: str) -> int:
        return len(self._bases[self._in_index(name)][1])

    def in_dim_size(self, name: str) -> int:
        return 1 << self.in_dim_size_log2(name)

    def out_dim_size(self, name: str) -> int:
        return self._out_dims[self._out_index(name)][1]

    def out_dim_size_log2(self, name: str) -> int:
        return _log2(self.out_dim_size(name))

    def basis(self, in_dim: str, index: int, out_dim: str | None = None):
        """Basis ``index`` of ``in_dim`` (a tuple), or one component of it."""
        vector = self._bases[self._in_index(in_dim)][1][index]
        return vector if out_dim is None else vector[self._out_index(out_dim)]

    @property
    def num_in_bits(self) -> int:
        return sum(len(vectors) for _, vectors in self._bases)

    @property
    def num_out_bits(self) -> int:
        return sum(_log2(size) for _, size in self._out_dims)

    @property
    def total_in_size(self) -> int:
        return 1 << self.num_in_bits

    @property
    def total_out_size(self) -> int:
        return 1 << self.num_out_bits

    # -- applying ------------------------------------------------------------------------

    def _check_inputs(self, inputs: Mapping[str, int]):
        for name in inputs:
            if not self.has_in_dim(name):
                raise KeyError(f"no input dimension {name!r} (have {self.in_dims})")

    def apply_flat(self, flat_input: int) -> int:
        """Apply to the flattened input index (first in dim in the low bits); the result is
        the flattened output (first out dim in the low bits)."""
        result = 0
        bit = 0
        for vectors in self._flat_bases:
            for packed in vectors:
                if (flat_input >> bit) & 1:
                    result ^= packed
                bit += 1
        return result

    def _unpack(self, packed: int) -> dict[str, int]:
        out = {}
        shift = 0
        for name, size in self._out_dims:
            out[name] = (packed >> shift) & (size - 1)
            shift += _log2(size)
        return out

    def apply(self, inputs: Mapping[str, int]) -> dict[str, int]:
        """Coordinates of the element at ``inputs`` (missing input dims count as 0)."""
        self._check_inputs(inputs)
        result = 0
        for (name, _), vectors in zip(self._bases, self._flat_bases):
            value = int(inputs.get(name, 0))
            if value < 0 or value >= 1 << len(vectors):
                raise ValueError(f"input {name}={value} outside size {1 << len(vectors)}")
            bit = 0
            while value:
                if value & 1:
                    result ^= vectors[bit]
                value >>= 1
                bit += 1
        return self._unpack(result)

    def apply_array(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Vectorized ``apply``: arrays broadcast against each other; results are int64."""
        self._check_inputs(inputs)
        arrays = {name: np.asarray(value, dtype=np.int64) for name, value in inputs.items()}
        shape = np.broadcast_shapes(*(a.shape for a in arrays.values())) if arrays else ()
        packed = np.zeros(shape, dtype=np.int64)
        for (name, _), vectors in zip(self._bases, self._flat_bases):
            if name not in arrays:
                continue
            values = arrays[name]
            for bit, vector in enumerate(vectors):
                if vector:
                    packed ^= ((values >> bit) & 1) * np.int64(vector)
        out = {}
        shift = 0
        for name, size in self._out_dims:
            out[name] = (packed >> shift) & (size - 1)
            shift += _log2(size)
        return out

    # -- matrices and rank ---------------------------------------------------------------

    def bit_matrix(self) -> np.ndarray:
        """The layout as a 0/1 matrix: rows are output bits (out dims in order, low bit
        first), columns are input bits (in dims in order, basis order); Triton's
        ``getMatrix`` ordering."""
        return self._matrix_cached().copy()

    get_matrix = bit_matrix

    @_cached_method
    def _matrix_cached(self) -> np.ndarray:
        columns = [packed for vectors in self._flat_bases for packed in vectors]
        rows = self.num_out_bits
        matrix = np.zeros((rows, len(columns)), dtype=np.uint8)
        for col, packed in enumerate(columns):
            for row in range(rows):
                matrix[row, col] = (packed >> row) & 1
        return matrix

    @functools.cached_property
    def matrix_rank(self) -> int:
        """Rank of the bit matrix over GF(2): log2 of the number of distinct outputs."""
        return gf2.rank(self._matrix_cached())

    def is_surjective(self) -> bool:
        if self._surjective is None:
            self._surjective = self.matrix_rank == self.num_out_bits
        return self._surjective

    def is_injective(self) -> bool:
        return self.matrix_rank == self.num_in_bits

    def is_invertible(self) -> bool:
        return self.is_surjective() and self.num_in_bits == self.num_out_bits

    def get_free_variable_masks(self) -> dict[str, int]:
        return dict(self._free_variable_masks())

    @_cached_method
    def _free_variable_masks(self) -> dict[str, int]:
        """Per in dim, a mask of the bits that add nothing new to the image: bits whose basis
        is zero or a combination of earlier bases (non-pivot columns of the RREF)."""
        _, pivots = gf2.rref(self._matrix_cached())
        basic = set(pivots)
        masks = {}
        column = 0
        for name, vectors in self._bases:
            mask = 0
            for bit in range(len(vectors)):
                if column not in basic:
                    mask |= 1 << bit
                column += 1
            masks[name] = mask
        return masks

    def get_num_consecutive_in_out(self) -> int:
        """How many consecutive values of the first in dim map to consecutive values of the
        first out dim with no other input touching those low bits (the vector width)."""
        if not self._bases or not self._out_dims:
            return 1
        first = self._bases[0][1]
        consecutive = 0
        while consecutive < len(first):
            vector = first[consecutive]
            if vector[0] != 1 << consecutive or any(vector[1:]):
                break
            consecutive += 1
        other_bits = 0
        for index, (_, vectors) in enumerate(self._bases):
            for bit, vector in enumerate(vectors):
                if index != 0 or bit >= consecutive:
                    other_bits |= vector[0]
        trailing_zeros = (other_bits & -other_bits).bit_length() - 1 if other_bits else 31
        return 1 << min(consecutive, trailing_zeros)

    # -- algebra -------------------------------------------------------------------------

    def __mul__(self, outer: LinearLayout) -> LinearLayout:
        """Tensor product: ``self`` is the minor (inner) part, ``outer`` tiles copies of it.
        Shared input dims get ``self``'s bases first; shared output dims get ``outer``'s
        components shifted above ``self``'s."""
        if not isinstance(outer, LinearLayout):
            return NotImplemented
        # Index maps built once: this product runs ~20 times per layout construction, so the
        # loops below use dict lookups only (layout building must stay well under 1 ms).
        out_log2: dict[str, int] = {}
        for name, size in self._out_dims:
            out_log2[name] = _log2(size)
        inner_log2 = dict(out_log2)
        for name, size in outer._out_dims:
            out_log2[name] = out_log2.get(name, 0) + _log2(size)
        position = {name: i for i, name in enumerate(out_log2)}
        width = len(position)
        inner_slots = [position[name] for name, _ in self._out_dims]
        outer_slots = [(position[name], inner_log2.get(name, 0)) for name, _ in outer._out_dims]
        inner_bases = dict(self._bases)
        outer_bases = dict(outer._bases)
        new_bases = []
        for in_dim in dict.fromkeys([n for n, _ in self._bases] + [n for n, _ in outer._bases]):
            vectors = []
            for vector in inner_bases.get(in_dim, ()):
                row = [0] * width
                for slot, component in zip(inner_slots, vector):
                    row[slot] = component
                vectors.append(row)
            for vector in outer_bases.get(in_dim, ()):
                row = [0] * width
                for (slot, shift), component in zip(outer_slots, vector):
                    row[slot] = component << shift
                vectors.append(row)
            new_bases.append((in_dim, vectors))
        if self._surjective is False or outer._surjective is False:
            surjective = False  # the rank of a tensor product is the sum of the ranks
        elif self._surjective and outer._surjective:
            surjective = True
        else:
            surjective = None
        return LinearLayout._trusted(new_bases, [(n, 1 << s) for n, s in out_log2.items()],
                                     surjective)

    def compose(self, outer: LinearLayout) -> LinearLayout:
        """``outer(self(x))``: ``self``'s out dims must be ``outer``'s in dims (any order)."""
        if set(self.out_dims) != set(outer.in_dims):
            raise ValueError(f"compose: out dims {self.out_dims} of the inner layout must be "
                             f"the in dims {outer.in_dims} of the outer layout")
        for name in self.out_dims:
            if self.out_dim_size(name) > outer.in_dim_size(name):
                raise ValueError(f"compose: out dim {name!r} has size {self.out_dim_size(name)}"
                                 f" > outer in dim size {outer.in_dim_size(name)}")
        new_bases = []
        for in_dim, vectors in self._bases:
            mapped = []
            for vector in vectors:
                image = outer.apply(dict(zip(self.out_dims, vector)))
                mapped.append(tuple(image.values()))
            new_bases.append((in_dim, mapped))
        return LinearLayout._trusted(new_bases, outer._out_dims)

    def _equal_ignoring_out_dim_sizes(self, other: LinearLayout) -> bool:
        return self._bases == other._bases and self.out_dims == other.out_dims

    def invert_and_compose(self, outer: LinearLayout) -> LinearLayout:
        """The ``C`` with ``outer(C(x)) == self(x)``, mapping ``self``'s inputs to ``outer``'s.

        Follows Triton: input dims on which both layouts agree map as the identity (nothing
        moves along them); the rest is solved with free variables set to zero, so broadcast
        copies map onto the first copy. ``outer`` must reach every output of ``self``.
        """
        out_names = self.out_dims
        if set(out_names) != set(outer.out_dims):
            raise ValueError(f"invert_and_compose: out dims differ: {self.out_dims} vs "
                             f"{outer.out_dims}")
        outer_aligned = outer.transpose_outs(out_names)
        for name in out_names:
            if outer_aligned.out_dim_size(name) < self.out_dim_size(name):
                raise ValueError(
                    f"invert_and_compose: out dim {name!r} has size {self.out_dim_size(name)}"
                    f" in this layout but only {outer_aligned.out_dim_size(name)} in outer")
        identity_dims = [
            name for name in outer_aligned.in_dims
            if self.has_in_dim(name) and outer_aligned.sublayout([name], out_names)
            ._equal_ignoring_out_dim_sizes(self.sublayout([name], out_names))]
        outer_rest = [d for d in outer_aligned.in_dims if d not in identity_dims]
        self_rest = [d for d in self.in_dims if d not in identity_dims]
        if bool(outer_rest) != bool(self_rest):
            raise ValueError("invert_and_compose: layouts differ but one has no input dims "
                             "left to solve with")
        if outer_rest:
            result = _least_squares(outer_aligned.sublayout(outer_rest, out_names),
                                    self.sublayout(self_rest, out_names))
        else:
            result = LinearLayout.empty()
        for name in identity_dims:
            result = result * LinearLayout.identity_1d(outer_aligned.in_dim_size(name), name,
                                                       name)
        return result.transpose_ins(self.in_dims).transpose_outs(outer_aligned.in_dims)

    def pseudo_invert(self) -> LinearLayout:
        """A right inverse ``P`` (``self(P(y)) == y``) of a surjective layout, choosing the
        input with zero free variables."""
        identity = LinearLayout.empty()
        for name, size in self._out_dims:
            identity = identity * LinearLayout.identity_1d(size, name, name)
        return identity.invert_and_compose(self)

    pseudoinvert = pseudo_invert

    def invert(self) -> LinearLayout:
        if not self.is_invertible():
            raise ValueError("invert: layout must be surjective with as many input bits as "
                             f"output bits ({self.num_in_bits} in, {self.num_out_bits} out, "
                             f"rank {self.matrix_rank})")
        return self.pseudo_invert()

    def concat_ins(self, other: LinearLayout) -> LinearLayout:
        """Both layouts' in dims side by side; out dims (names and sizes) must match."""
        if self._out_dims != other._out_dims:
            raise ValueError(f"concat_ins: out dims differ: {self._out_dims} vs "
                             f"{other._out_dims}")
        clash = set(self.in_dims) & set(other.in_dims)
        if clash:
            raise ValueError(f"concat_ins: in dims {sorted(clash)} appear in both layouts")
        return LinearLayout._trusted(self._bases + other._bases, self._out_dims)

    def concat_outs(self, other: LinearLayout) -> LinearLayout:
        """Both layouts' out dims side by side; in dims (names and sizes) must match."""
        if [(n, len(v)) for n, v in self._bases] != [(n, len(v)) for n, v in other._bases]:
            raise ValueError(f"concat_outs: in dims differ: {self.in_dim_sizes} vs "
                             f"{other.in_dim_sizes}")
        clash = set(self.out_dims) & set(other.out_dims)
        if clash:
            raise ValueError(f"concat_outs: out dims {sorted(clash)} appear in both layouts")
        new_bases = [(name, [a + b for a, b in zip(mine, theirs)])
                     for (name, mine), (_, theirs) in zip(self._bases, other._bases)]
        return LinearLayout._trusted(new_bases, self._out_dims + other._out_dims)

    def sublayout(self, in_dims: Iterable[str] | str, out_dims: Iterable[str] | str):
        """Restriction to the given in and out dims (kept in this layout's order)."""
        in_set = {in_dims} if isinstance(in_dims, str) else set(in_dims)
        out_set = {out_dims} if isinstance(out_dims, str) else set(out_dims)
        keep = [i for i, (name, _) in enumerate(self._out_dims) if name in out_set]
        new_bases = [(name, [tuple(v[i] for i in keep) for v in vectors])
                     for name, vectors in self._bases if name in in_set]
        return LinearLayout._trusted(new_bases, [self._out_dims[i] for i in keep])

    def transpose_ins(self, order: Sequence[str]) -> LinearLayout:
        if sorted(order) != sorted(self.in_dims):
            raise ValueError(f"transpose_ins: {list(order)} is not a permutation of "
                             f"{self.in_dims}")
        by_name = dict(self._bases)
        return LinearLayout._trusted([(n, by_name[n]) for n in order], self._out_dims,
                                     self._surjective)

    def transpose_outs(self, order: Sequence[str]) -> LinearLayout:
        if sorted(order) != sorted(self.out_dims):
            raise ValueError(f"transpose_outs: {list(order)} is not a permutation of "
                             f"{self.out_dims}")
        permutation = [self._out_index(n) for n in order]
        new_bases = [(name, [tuple(v[i] for i in permutation) for v in vectors])
                     for name, vectors in self._bases]
        return LinearLayout._trusted(new_bases, [self._out_dims[i] for i in permutation],
                                     self._surjective)

    def reshape_ins(self, new_in_dims) -> LinearLayout:
        """Flatten the in dims (first dim minor) and split into ``[(name, size), ...]``."""
        items = _as_named_items(new_in_dims, "new_in_dims")
        for name, size in items:
            _check_size(f"in dim {name!r}", size)
        if sum(_log2(size) for _, size in items) != self.num_in_bits:
            raise ValueError(f"reshape_ins: total size {self.total_in_size} cannot become "
                             f"{items}")
        flat = [vector for _, vectors in self._bases for vector in vectors]
        new_bases = []
        start = 0
        for name, size in items:
            new_bases.append((name, flat[start:start + _log2(size)]))
            start += _log2(size)
        return LinearLayout._trusted(new_bases, self._out_dims, self._surjective)

    def reshape_outs(self, new_out_dims) -> LinearLayout:
        """Flatten the out dims (first dim minor) and split into ``[(name, size), ...]``."""
        items = _as_named_items(new_out_dims, "new_out_dims")
        for name, size in items:
            _check_size(f"out dim {name!r}", size)
        if sum(_log2(size) for _, size in items) != self.num_out_bits:
            raise ValueError(f"reshape_outs: total size {self.total_out_size} cannot become "
                             f"{items}")
        new_bases = []
        for (name, _), packed_vectors in zip(self._bases, self._flat_bases):
            vectors = []
            for packed in packed_vectors:
                vector = []
                shift = 0
                for _, size in items:
                    vector.append((packed >> shift) & (size - 1))
                    shift += _log2(size)
                vectors.append(tuple(vector))
            new_bases.append((name, vectors))
        return LinearLayout._trusted(new_bases, [(n, int(s)) for n, s in items],
                                     self._surjective)

    def flatten_ins(self) -> LinearLayout:
        if not self._bases:
            return self
        return self.reshape_ins([(self.in_dims[0], self.total_in_size)])

    def flatten_outs(self) -> LinearLayout:
        if not self._out_dims:
            return self
        return self.reshape_outs([(self.out_dims[0], self.total_out_size)])

    # -- equality and printing ---------------------------------------------------------

    def __eq__(self, other) -> bool:
        if not isinstance(other, LinearLayout):
            return NotImplemented
        return self._bases == other._bases and self._out_dims == other._out_dims

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        out_text = "[" + ", ".join(f"{n} (size {s})" for n, s in self._out_dims) + "]"
        if not self._bases:
            if not self._out_dims:
                return "\n(empty layout)"
            return f"\n(empty layout with out-dims {out_text})"
        text = "\n"
        for name, vectors in self._bases:
            if not vectors:
                text += f" - {name} is a size 1 dimension\n"
                continue
            lines = [f"{name}={1 << i} -> (" + ", ".join(map(str, v)) + ")"
                     for i, v in enumerate(vectors)]
            text += " - " + "\n   ".join(lines) + "\n"
        return text + "where out dims are: " + out_text

    def __repr__(self) -> str:
        bases = "{" + ", ".join(f"{name!r}: {[tuple(v) for v in vectors]!r}"
                                for name, vectors in self._bases) + "}"
        return f"LinearLayout({bases}, {list(self._out_dims)!r}, require_surjective=False)"

    def to_string(self) -> str:
        return str(self)

    def __reduce__(self):
        return (LinearLayout, (self.bases, list(self._out_dims), False))


def _least_squares(a: LinearLayout, b: LinearLayout) -> LinearLayout:
    """The ``X`` with ``a(X(x)) == b(x)`` whose free variables are zero (Triton's lstsq).

    Both layouts have the same out dims in the same order; ``b``'s image must lie in ``a``'s.
    """
    a_matrix = a._matrix_cached()
    b_matrix = b._matrix_cached()
    rows = a_matrix.shape[0]
    if b_matrix.shape[0] < rows:
        # Out dims of ``b`` may be smaller than ``a``'s: pad each dim's bits with zero rows.
        padded = np.zeros((rows, b_matrix.shape[1]), dtype=np.uint8)
        a_row = b_row = 0
        for name in a.out_dims:
            width_a = a.out_dim_size_log2(name)
            width_b = b.out_dim_size_log2(name)
            padded[a_row:a_row + width_b] = b_matrix[b_row:b_row + width_b]
            a_row += width_a
            b_row += width_b
        b_matrix = padded
    try:
        solution = gf2.solve_matrix(a_matrix, b_matrix)
    except ValueError as error:
        raise ValueError("invert_and_compose: the image of this layout is not contained in "
                         "the image of outer") from error
    in_name = a.in_dims[0]
    flat_vectors = []
    for column in range(solution.shape[1]):
        value = 0
        for row in range(solution.shape[0]):
            value |= int(solution[row, column]) << row
        flat_vectors.append((value,))
    flattened = LinearLayout._trusted([(in_name, flat_vectors)], [(in_name, a.total_in_size)])
    return (flattened.reshape_ins([(n, b.in_dim_size(n)) for n in b.in_dims])
            .reshape_outs([(n, a.in_dim_size(n)) for n in a.in_dims]))


def reshape_coords(coords, old_shape, new_shape) -> tuple:
    """`coords` in `old_shape`, moved to `new_shape` through the row-major flat index (the
    element order of a row-major reshape). With power-of-two sizes this maps a basis vector
    of a layout to a basis vector of the reshaped layout."""
    flat = 0
    for c, size in zip(coords, old_shape):
        flat = flat * size + c
    out = []
    for size in reversed(new_shape):
        out.append(flat % size)
        flat //= size
    return tuple(reversed(out))
