"""Linear algebra over GF(2) for layouts: bit-packed Gauss-Jordan, checked against sympy.

Matrices cross this module's boundary as numpy ``uint8`` arrays (rows x cols, entries 0/1);
inside, rows are packed into Python ints and eliminated with XOR, which is exact. sympy's
``DomainMatrix`` over ``GF(2)`` is the reference (``reference_rref``, ``reference_null_space``)
that the property tests compare every routine with; it is not on the compile path because
importing sympy alone takes 0.25-0.7 s and one elimination ~0.45 ms, against budgets of 0.5 s
per kernel compile and 2 ms per conversion plan. Every entry point is memoized on the matrix
bytes: the same layouts are solved again and again while a kernel compiles.

Solutions follow Triton's convention (``lstsq`` in ``lib/Tools/LinearLayout.cpp``): among all
solutions of ``A X = B`` we return the one whose free variables (non-pivot columns of the
reduced row echelon form of ``A``) are zero. That choice is what makes a layout conversion map
broadcast copies onto the first copy.
"""

from __future__ import annotations

import functools

import numpy as np

__all__ = [
    "FIELD",
    "rank",
    "rref",
    "inverse",
    "null_space",
    "solve",
    "solve_matrix",
]

_SYMPY = None


def _sympy():
    """(GF(2), DomainMatrix, zero, one), imported on first use: importing sympy costs ~0.25 s,
    more than compiling a kernel, and most kernels never solve anything."""
    global _SYMPY
    if _SYMPY is None:
        from sympy import GF
        from sympy.polys.matrices import DomainMatrix

        field = GF(2)
        _SYMPY = (field, DomainMatrix, field(0), field(1))
    return _SYMPY


def __getattr__(name):
    if name == "FIELD":
        return _sympy()[0]
    raise AttributeError(name)


def int_echelon(vectors) -> dict:
    """Bit-packed row echelon form: {top bit: row} of the GF(2) span of `vectors` (ints).

    This is the hot-path form for rank and span queries (every layout construction asks
    whether it is surjective): XOR on Python ints is exact and ~100x cheaper than building a
    DomainMatrix. `tests/gluon/layouts` checks it against the sympy results."""
    rows = {}
    for v in vectors:
        v = int(v)
        while v:
            top = v.bit_length() - 1
            if top not in rows:
                rows[top] = v
                break
            v ^= rows[top]
    return rows


def int_rank(vectors) -> int:
    """Rank over GF(2) of bit-packed vectors."""
    return len(int_echelon(vectors))


def _as_bits(matrix) -> np.ndarray:
    array = np.asarray(matrix, dtype=np.uint8)
    if array.ndim != 2:
        raise ValueError(f"GF(2) matrix must be 2-D, got shape {array.shape}")
    return array & 1


def _key(array: np.ndarray) -> tuple[tuple[int, int], bytes]:
    return array.shape, np.ascontiguousarray(array).tobytes()


def _from_key(key: tuple[tuple[int, int], bytes]) -> np.ndarray:
    shape, data = key
    return np.frombuffer(data, dtype=np.uint8).reshape(shape)


def _to_domain(array: np.ndarray):
    field, domain_matrix, zero, one = _sympy()
    rows = [[one if bit else zero for bit in row] for row in array.tolist()]
    return domain_matrix(rows, array.shape, field)


def _to_numpy(matrix) -> np.ndarray:
    rows, cols = matrix.shape
    out = np.zeros((rows, cols), dtype=np.uint8)
    for r, row in enumerate(matrix.to_list()):
        for c, value in enumerate(row):
            out[r, c] = int(value) & 1
    return out


@functools.lru_cache(maxsize=8192)
def _rank_cached(key) -> int:
    array = _from_key(key)
    if 0 in array.shape:
        return 0
    # Rows packed as ints: rank is the number of pivots (see int_echelon).
    packed = [int("".join(map(str, row)), 2) if len(row) else 0 for row in array.tolist()]
    return int_rank(packed)


@functools.lru_cache(maxsize=8192)
def _rref_cached(key) -> tuple[bytes, tuple[int, ...]]:
    array = _from_key(key)
    rows, cols = array.shape
    if 0 in array.shape:
        return array.tobytes(), ()
    # Gauss-Jordan on rows packed as ints (bit c = column c): exact, and ~100x cheaper than
    # sympy, whose DomainMatrix over GF(2) is the reference the tests compare against.
    packed = [sum(1 << c for c in range(cols) if row[c]) for row in array.tolist()]
    pivots = []
    r = 0
    for c in range(cols):
        bit = 1 << c
        sel = next((i for i in range(r, rows) if packed[i] & bit), None)
        if sel is None:
            continue
        packed[r], packed[sel] = packed[sel], packed[r]
        for i in range(rows):
            if i != r and packed[i] & bit:
                packed[i] ^= packed[r]
        pivots.append(c)
        r += 1
        if r == rows:
            break
    out = np.array([[(v >> c) & 1 for c in range(cols)] for v in packed], dtype=np.uint8)
    return out.tobytes(), tuple(pivots)


def reference_rref(matrix):
    """rref through sympy's DomainMatrix over GF(2): the reference the tests check against."""
    array = _as_bits(matrix)
    reduced, pivots = _to_domain(array).rref()
    return _to_numpy(reduced), tuple(int(p) for p in pivots)


def reference_null_space(matrix):
    kernel = _to_domain(_as_bits(matrix)).nullspace()
    return _to_numpy(kernel) if kernel.shape[0] else np.zeros((0, _as_bits(matrix).shape[1]),
                                                                dtype=np.uint8)


def rank(matrix) -> int:
    """Rank of ``matrix`` over GF(2)."""
    return _rank_cached(_key(_as_bits(matrix)))


def rref(matrix) -> tuple[np.ndarray, tuple[int, ...]]:
    """Reduced row echelon form over GF(2) and the pivot column of each nonzero row."""
    array = _as_bits(matrix)
    data, pivots = _rref_cached(_key(array))
    return np.frombuffer(data, dtype=np.uint8).reshape(array.shape).copy(), pivots


def inverse(matrix) -> np.ndarray:
    """Inverse over GF(2); ``ValueError`` when the matrix is not square or is singular."""
    array = _as_bits(matrix)
    rows, cols = array.shape
    if rows != cols:
        raise ValueError(f"only a square matrix has an inverse, got {rows}x{cols}")
    if rank(array) != rows:
        raise ValueError(f"matrix is singular over GF(2) (rank {rank(array)} < {rows})")
    if rows == 0:
        return array.copy()
    reduced, _ = rref(np.concatenate([array, np.eye(rows, dtype=np.uint8)], axis=1))
    return reduced[:, cols:].copy()


def null_space(matrix) -> np.ndarray:
    """Basis of ``{x : A x = 0}`` as the rows of the result (shape k x cols)."""
    array = _as_bits(matrix)
    rows, cols = array.shape
    if cols == 0:
        return np.zeros((0, 0), dtype=np.uint8)
    if rows == 0:
        return np.eye(cols, dtype=np.uint8)
    reduced, pivots = rref(array)
    free = [c for c in range(cols) if c not in pivots]
    if not free:
        return np.zeros((0, cols), dtype=np.uint8)
    # One basis vector per free column f: x_f = 1, each pivot variable cancels its row's f bit
    # (the same basis and order as sympy's nullspace).
    basis = np.zeros((len(free), cols), dtype=np.uint8)
    for k, f in enumerate(free):
        basis[k, f] = 1
        for row, p in enumerate(pivots):
            basis[k, p] = reduced[row, f]
    return basis


def solve_matrix(a, b) -> np.ndarray:
    """Solve ``A X = B`` over GF(2), free variables set to zero.

    ``A`` is m x n, ``B`` is m x k; the result is n x k. ``ValueError`` when some column of
    ``B`` is outside the column space of ``A``.
    """
    a_bits = _as_bits(a)
    b_bits = _as_bits(b)
    rows, cols_a = a_bits.shape
    if b_bits.shape[0] != rows:
        raise ValueError(f"A has {rows} rows but B has {b_bits.shape[0]}")
    cols_b = b_bits.shape[1]
    solution = np.zeros((cols_a, cols_b), dtype=np.uint8)
    if rows == 0 or cols_b == 0:
        return solution
    reduced, pivots = rref(np.concatenate([a_bits, b_bits], axis=1))
    for row, pivot in enumerate(pivots):
        if pivot >= cols_a:
            raise ValueError("A X = B has no solution: B is not in the column space of A")
        solution[pivot, :] = reduced[row, cols_a:]
    return solution


def solve(a, b) -> np.ndarray | None:
    """Solve ``A x = b`` for one vector ``b``; ``None`` when there is no solution."""
    b_column = _as_bits(np.asarray(b, dtype=np.uint8).reshape(-1, 1))
    try:
        return solve_matrix(a, b_column)[:, 0]
    except ValueError:
        return None
