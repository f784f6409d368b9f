"""Loop nest flattening: `tl.range(..., flatten=True)`, as Triton's FuseNestedLoops
(lib/Dialect/TritonGPU/Transforms/FuseNestedLoops.cpp).

Why: in a persistent kernel the outer loop walks the tiles a program owns and the inner loop
the K steps of one tile. Pipelined as written, the inner loop fills its ring at the start of
every tile and drains it at the end, so the next tile's first loads wait for this tile's
epilogue. One loop over every (tile, K step) lets the pipeliner, which runs next, issue the
next tile's loads during this tile's last steps and its epilogue.

    for i in range(lbi, ubi, si), carrying o:        P: the prologue, before the inner loop
        P(i, o)                                      x: the inner loop's initial values
        for j in range(lbj, ubj, sj), carrying c = x:
            c = B(i, j, c)                           B: the inner body
        o = E(i, c, o)                               E: the epilogue, after it
becomes (n_i, n_j: the trip counts, computed before the loops)
    if n_j <= 0:                                     the inner loop never runs: the nest
        for i ...: P(i, o); o = E(i, x, o)           without it (Triton's speculation)
    else:
        for t in range(0, n_i * n_j), carrying k = -1, i = lbi - si, o, j, c = x, p:
            k = 0 if k == n_j - 1 else k + 1         where this step is in the inner loop
            if k == 0:                               scf.if: a tile starts
                i += si; p = P(i, o); j = lbj        p: what P computes for B and E
            c = B(i, j, c); j += sj                  every step: no predicate around the loads
            if k == n_j - 1:                         scf.if: the tile ends
                o = E(i, c, o); c = x                x from outside the nest: the reset of
                                                     the accumulator for the next tile

An initial value x computed by P itself (a pointer to the tile's first K step) comes out of
the prologue's `if` instead. The body B is unconditional because every tile runs n_j > 0
steps: that is what the `if n_j <= 0` around the loop buys (none when n_j is known), and what
lets tile/passes/pipelining.py ring B's loads across tile boundaries. What nothing holds
before the first tile (j, p, an x from P) starts as `arith.constant {undef}`: zeros, which
the axis analysis ignores, so the offsets keep their contiguity. `num_stages` of the nest
(the larger of the two loops' when both say) and the outer loop's other options go to the
flattened loop.

Before fusing, as Triton does: the outer body's pure scalar and tensor ops that read nothing
the outer loop computes move in front of it (its LICM: the accumulator's zeros, the inner
loop's bounds), and pure prologue ops only the epilogue reads move into the epilogue (fewer
values carried from the prologue's `if`).

Nests left as they are, with a UserWarning at the loop (Triton's `shouldFuse` and
`speculateInnerLoopLength` decline the same): an outer body holding no `for` loop, or
several, directly (a loop inside an `if` is not the nest's); an inner loop with a loop of its
own; inner bounds computed from what changes with the outer iteration (a tile-dependent K
range); values of another kind than scalars and tensors crossing from the prologue.

Where we differ from Triton: the emptiness test is n_j <= 0 (Triton tests n_j == 0, which
would run B once per tile for a range whose bounds are reversed); a marked loop nested in
another loop is flattened too (Triton only flattens nests rooted at an outermost loop); a
`tl.assume(ub > lb)` on the inner range neither drops the guard nor admits tile-dependent
bounds (Triton's newer pass does both, computing the varying trip counts in a first loop).
"""

from __future__ import annotations

import warnings
from typing import Dict, List, Optional, Sequence, Set

from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import (Block, Module, Operation, Value, clone_op,
                                    replace_all_uses)
from shared_codegen.ir.passes import encloses, insert_after, insert_before, move_to_end
from shared_codegen.ir.types import IRType, PointerType, ScalarType, TensorType, scalar_of
from shared_codegen.ops.arith.definition import (INT_COMPARE, BinaryOp, CastOp, CompareOp,
                                                 ConstantOp, SelectOp, cast_op_name,
                                                 operator_op_name)
from shared_codegen.ops.control.definition import ForOp, IfOp, YieldOp
from tile.passes.loop_unroll import _known, _trip_count
from tile.passes.loop_building import _At
from tile.passes.wgmma_schedule import _is

FLATTEN = "flatten"  # the scf.for attribute tl.range(flatten=True) sets (ForOp.build)

# Integer division by a value the compiler does not know may trap on zero: those stay where
# the user wrote them (MLIR's LICM does not speculate them either).
_DIVISIONS = frozenset(operator_op_name(o, False, s) for o in ("floordiv", "mod")
                       for s in (True, False))


def flatten_loops(module: Module) -> None:
    """The `loop_flatten` pass: every `scf.for` marked `flatten`, innermost first."""
    for fn in module.functions.values():
        marked = [op for op in fn.walk() if _is(op, ForOp) and op.attrs.get(FLATTEN)]
        for loop in reversed(marked):
            del loop.attrs[FLATTEN]
            reason = flatten_nest(loop)
            if reason is not None:
                warnings.warn_explicit(f"tl.range(flatten=True) leaves this loop nest as it is: "
                                       f"{reason}", UserWarning, loop.loc.file, loop.loc.line)


def flatten_nest(outer: Operation) -> Optional[str]:
    """Flatten the nest under `outer` in place; the reason, in the user's terms, when it is
    left as it is."""
    inner, reason = _only_inner_loop(outer)
    if inner is None:
        return reason
    body = outer.regions[0].block
    hoist = _loop_invariant_ops(outer, inner)
    hoisted = {r for op in hoist for r in op.results}
    if any(encloses(outer, v) and v not in hoisted for v in inner.operands[:3]):
        return ("the inner loop's bounds are computed from values that change with the outer "
                "loop's iteration; only an inner loop whose range every outer iteration "
                "shares is flattened")
    for loop in (outer, inner):
        if not scalar_of(loop.operands[0].type).is_int_signed():
            return f"a loop counts in {loop.operands[0].type}; flattening needs signed integers"
    prologue = [op for op in body.ops[:body.ops.index(inner)] if op not in hoist]
    sink = _epilogue_only_ops(body, inner, prologue)
    prologue = [op for op in prologue if op not in sink]
    crossing = _outputs(prologue, _after_prologue(body, inner))
    crossing += [v for v in inner.operands[3:] if encloses(outer, v)]
    for v in crossing:
        if _zero_type(v.type) is None:
            return (f"a {v.type} computed before the inner loop is read after it; only "
                    f"scalars and tensors are carried through the flattened loop")
    for op in hoist:
        body.ops.remove(op)
        insert_before(outer, op)
    for op in reversed(sink):
        body.ops.remove(op)
        insert_after(inner, op)
    _fuse_guarded(outer, inner)
    return None


# ---- the nest ----------------------------------------------------------------------------------

def _only_inner_loop(outer: Operation):
    """(the inner loop, None), or (None, why the nest is not one Triton flattens)."""
    loops = [op for op in outer.regions[0].block.ops if _is(op, ForOp)]
    if not loops:
        return None, ("its body has no `for` loop of its own (a loop inside an `if` does not "
                      "count); flattening needs exactly one inner loop")
    if len(loops) > 1:
        return None, (f"its body holds {len(loops)} `for` loops; flattening needs exactly one "
                      f"inner loop")
    inner = loops[0]
    if any(_is(op, ForOp) for op in inner.regions[0].block.ops):
        return None, ("the inner loop holds a `for` loop of its own; flattening takes two "
                      "levels of loops")
    return inner, None


def _movable(op: Operation) -> bool:
    """Pure (casts included), without regions, and unable to trap."""
    if op.regions or not (op.opdef.is_pure(op) or _is(op, CastOp)):
        return False
    return op.name not in _DIVISIONS or _known(op.operands[1]) not in (None, 0)


def _loop_invariant_ops(outer: Operation, inner: Operation) -> List[Operation]:
    """The outer body's ops that read only values from outside the outer loop (or from ops
    hoisted before them), in order: what Triton's LICM moves out before fusing."""
    hoist: List[Operation] = []
    hoisted: Set[Value] = set()
    for op in outer.regions[0].block.ops:
        if op is inner or not _movable(op):
            continue
        if all(v in hoisted or not encloses(outer, v) for v in op.operands):
            hoist.append(op)
            hoisted.update(op.results)
    return hoist


def _top_level_users(block: Block) -> Dict[Value, Set[Operation]]:
    users: Dict[Value, Set[Operation]] = {}
    for top in block.ops:
        for op in top.walk():
            for v in op.operands:
                users.setdefault(v, set()).add(top)
    return users


def _epilogue_only_ops(body: Block, inner: Operation, prologue) -> List[Operation]:
    """The prologue's pure ops that only the epilogue reads (directly or through each other):
    they move after the inner loop, so the prologue's `if` does not carry their values."""
    users = _top_level_users(body)
    epilogue = set(body.ops[body.ops.index(inner) + 1:-1])
    sunk: Set[Operation] = set()
    for op in reversed(prologue):
        readers = set().union(*(users.get(r, set()) for r in op.results))
        if _movable(op) and readers and readers <= (epilogue | sunk):
            sunk.add(op)
    return [op for op in prologue if op in sunk]


def _after_prologue(body: Block, inner: Operation) -> List[Operation]:
    """The inner loop's body ops, then the epilogue's and the outer yield: what reads the
    prologue's values (the inner loop's initial values go their own way)."""
    return inner.regions[0].block.ops + body.ops[body.ops.index(inner) + 1:]


def _outputs(ops: Sequence[Operation], later: Sequence[Operation]) -> List[Value]:
    """The results of `ops` that `later` reads."""
    read = {v for top in later for op in top.walk() for v in op.operands}
    return [r for op in ops for r in op.results if r in read]


def _zero_type(ty: IRType) -> Optional[IRType]:
    """The element type of `ty` when a zero of it can stand for a value not computed yet."""
    elem = scalar_of(ty)
    return elem if isinstance(elem, (ScalarType, PointerType)) and (
        elem is ty or isinstance(ty, TensorType)) else None


# ---- the flattened loop ----------------------------------------------------------------------

class _Scalars(_At):
    """Index arithmetic built into a scratch block (pipelining's `_At`)."""

    def binary(self, operator: str, x: Value, y: Value) -> Value:
        return BinaryOp.build(self.b, operator_op_name(operator, False, True), x, y)

    def compare(self, predicate: str, x: Value, y: Value) -> Value:
        return CompareOp.build(self.b, INT_COMPARE, predicate, x, y)

    def undef(self, ty: IRType) -> Value:
        """The initial value of what the first tile's prologue sets before it is read."""
        elem = _zero_type(ty)
        value = 0.0 if isinstance(elem, ScalarType) and elem.is_floating() else 0
        return ConstantOp.build(self.b, value, ty, undef=True)

    def widened(self, x: Value, ty: IRType) -> Value:
        return x if x.type == ty else CastOp.build(self.b, cast_op_name(x.type, ty), x, ty)

    def trip_count(self, lb: Value, ub: Value, step: Value) -> Value:
        """ceil((ub - lb) / step): the iterations of range(lb, ub, step) when it runs, zero
        or less when it does not."""
        distance = self.binary("sub", ub, lb)
        s = _known(step)
        if s == 1:
            return distance
        if s is not None and s > 0:  # divsi rounds toward zero: <= 0 for an empty range
            return self.binary("floordiv", self.binary("add", distance, self.const(
                s - 1, lb.type)), step)
        # A runtime step of either sign: round the quotient up when the remainder has the
        # step's sign.
        q = self.binary("floordiv", distance, step)
        r = self.binary("mod", distance, step)
        zero = self.const(0, lb.type)
        up = BinaryOp.build(self.b, operator_op_name("and", False, True),
                            self.compare("ne", r, zero),
                            self.compare("sge", self.binary("xor", r, step), zero))
        return SelectOp.build(self.b, up, self.binary("add", q, self.const(1, lb.type)), q)


def _fuse_guarded(outer: Operation, inner: Operation) -> None:
    """Replace the nest by the flattened loop, behind `if n_j <= 0` unless the inner loop's
    trip count is known to be positive."""
    lbj, ubj, sj = inner.operands[:3]
    known = [_known(v) for v in (lbj, ubj, sj)]
    if None not in known:
        if _trip_count(*known) > 0:
            at = _Scalars(outer.loc)
            n_j = at.const(_trip_count(*known), lbj.type)
            at.place_before(outer)
            _fuse(outer, inner, n_j)
        return  # an inner loop that never runs: nothing to overlap
    at = _Scalars(outer.loc)
    n_j = at.trip_count(lbj, ubj, sj)
    empty = at.compare("sle", n_j, at.const(0, lbj.type))
    guard = IfOp.build(at.b, empty, [r.type for r in outer.results])
    at.place_before(outer)
    parent = outer.parent
    rest = parent.ops[parent.ops.index(outer) + 1:]
    for old, new in zip(outer.results, guard.results):
        replace_all_uses(rest, old, new)
    skip = _without_inner_loop(outer, inner)
    then_block, else_block = guard.regions[0].block, guard.regions[1].block
    Builder(then_block, outer.loc).insert(skip)
    YieldOp.build(Builder(then_block, outer.loc), skip.results)
    parent.ops.remove(outer)
    Builder(else_block, outer.loc).insert(outer)
    YieldOp.build(Builder(else_block, outer.loc), outer.results)
    _fuse(outer, inner, n_j)


def _without_inner_loop(outer: Operation, inner: Operation) -> Operation:
    """A copy of the nest whose inner loop is gone: its results are its initial values."""
    copy = clone_op(outer, {})
    copy.attrs.pop("warp_specialize", None)  # no loop left to specialize (as Triton does)
    block = copy.regions[0].block
    gone = block.ops[outer.regions[0].block.ops.index(inner)]
    for result, init in zip(gone.results, gone.operands[3:]):
        replace_all_uses(block.ops, result, init)
    block.ops.remove(gone)
    return copy


def _name(values: Sequence[Value], names: Sequence[str]) -> None:
    for v, name in zip(values, names):
        v.name_hint = name


def _rewire(ops: Sequence[Operation], subst: Dict[Value, Value]) -> None:
    for top in ops:
        for op in top.walk():
            op.operands = [subst.get(v, v) for v in op.operands]


class _Fusion:
    """The flattened loop of one nest, built step by step in front of the outer loop: its
    iter_args are (k, i, *o, j, *c, *p) as the module docstring draws them."""

    def __init__(self, outer: Operation, inner: Operation):
        self.outer, self.inner = outer, inner
        self.body, self.inner_body = outer.regions[0].block, inner.regions[0].block
        split = self.body.ops.index(inner)
        self.prologue, self.epilogue = self.body.ops[:split], self.body.ops[split + 1:-1]
        self.outputs = _outputs(self.prologue, _after_prologue(self.body, inner))
        self.x = list(inner.operands[3:])
        # Initial values from outside the nest: the epilogue resets them for the next tile;
        # those the prologue computes come out of its `if`.
        self.reset = [n for n, v in enumerate(self.x) if not encloses(outer, v)]
        self.fresh = [n for n in range(len(self.x)) if n not in self.reset]
        self.loc = outer.loc

    def build_loop(self, n_j: Value) -> Operation:
        """The trip count n_i * n_j, the iter_args' initial values and the empty loop."""
        (lbi, ubi, si), lbj = self.outer.operands[:3], self.inner.operands[0]
        wide = max(lbi.type, lbj.type, key=lambda t: t.bits)
        at = _Scalars(self.loc)
        n_j = at.widened(n_j, wide)
        total = at.binary("mul", at.widened(at.trip_count(lbi, ubi, si), wide), n_j)
        self.zero, self.one = at.const(0, wide), at.const(1, wide)
        self.last = at.binary("sub", n_j, self.one)
        inits = [at.const(-1, wide), at.binary("sub", lbi, si), *self.outer.operands[3:],
                 at.undef(lbj.type),
                 *(v if n in self.reset else at.undef(v.type) for n, v in enumerate(self.x)),
                 *(at.undef(v.type) for v in self.outputs)]
        fused = ForOp.build(at.b, self.zero, total, self.one, inits, iv_name="step")
        at.place_before(self.outer)
        fused.attrs.update(self.outer.attrs)  # what else tl.range asked of the outer loop
        stages = [loop.attrs["num_stages"] for loop in (self.outer, self.inner)
                  if "num_stages" in loop.attrs]
        if stages:
            fused.attrs["num_stages"] = max(stages)
        args = fused.regions[0].block.args
        n_o, n_c = len(self.outer.results), len(self.x)
        self.k, self.i, self.o = args[1], args[2], args[3:3 + n_o]
        self.j, self.c, self.p = args[3 + n_o], args[4 + n_o:4 + n_o + n_c], args[4 + n_o + n_c:]
        _name(args[1:], ["pos", *(a.name_hint for a in self.body.args),
                         *(a.name_hint for a in self.inner_body.args),
                         *(v.name_hint for v in self.outputs)])
        return fused

    def prologue_if(self, block: Block) -> Value:
        """k advances; at k == 0 the prologue runs for the next outer iteration. Returns k."""
        at = _Scalars(self.loc)
        k1 = SelectOp.build(at.b, at.compare("eq", self.k, self.last), self.zero,
                            at.binary("add", self.k, self.one))
        k1.name_hint = "pos"
        si, lbj = self.outer.operands[2], self.inner.operands[0]
        fresh_x = [self.x[n] for n in self.fresh]
        pro = IfOp.build(at.b, at.compare("eq", k1, self.zero),
                         [si.type, lbj.type, *(v.type for v in fresh_x),
                          *(v.type for v in self.outputs)])
        move_to_end(at.block.ops, block)
        then = _Scalars(self.loc)
        i_new = then.binary("add", self.i, si)
        move_to_end([*then.block.ops, *self.prologue], pro.regions[0].block)
        subst = {self.body.args[0]: i_new, **dict(zip(self.body.args[1:], self.o))}
        _rewire(self.prologue, subst)
        YieldOp.build(Builder(pro.regions[0].block, self.loc),
                      [i_new, lbj, *(subst.get(v, v) for v in fresh_x), *self.outputs])
        YieldOp.build(Builder(pro.regions[1].block, self.loc),
                      [self.i, self.j, *(self.c[n] for n in self.fresh), *self.p])
        _name(pro.results, [self.body.args[0].name_hint, self.inner_body.args[0].name_hint,
                            *(self.inner_body.args[1 + n].name_hint for n in self.fresh),
                            *(v.name_hint for v in self.outputs)])
        i_new.name_hint = self.body.args[0].name_hint
        self.i1, self.j1 = pro.results[0], pro.results[1]
        self.c1 = dict(zip(self.fresh, pro.results[2:2 + len(self.fresh)]))
        self.p1 = pro.results[2 + len(self.fresh):]
        return k1

    def steps(self, block: Block) -> List[Value]:
        """The inner body, unconditional; returns what it yields. j advances after it."""
        subst = {self.body.args[0]: self.i1, self.inner_body.args[0]: self.j1,
                 **dict(zip(self.body.args[1:], self.o)), **dict(zip(self.outputs, self.p1))}
        for n, arg in enumerate(self.inner_body.args[1:]):
            subst[arg] = self.c[n] if n in self.reset else self.c1[n]
        steps = self.inner_body.ops[:-1]
        _rewire(steps, subst)
        move_to_end(steps, block)
        self.subst = subst
        at = _Scalars(self.loc)
        self.j2 = at.binary("add", self.j1, self.inner.operands[2])
        move_to_end(at.block.ops, block)
        return [subst.get(v, v) for v in self.inner_body.ops[-1].operands]

    def epilogue_if(self, block: Block, k1: Value, b_out: List[Value]):
        """At k == n_j - 1 the epilogue runs and the reset values start over; returns the
        outer loop's carried values and the inner loop's, as the step leaves them."""
        c2 = {n: b_out[n] for n in self.fresh}
        outer_yield = self.body.ops[-1]
        self.subst.update(zip(self.inner.results, b_out))
        _rewire(self.epilogue + [outer_yield], self.subst)
        if not (self.epilogue or self.o or self.reset):
            return list(self.o), c2
        at = _Scalars(self.loc)
        epi = IfOp.build(at.b, at.compare("eq", k1, self.last),
                         [*(v.type for v in self.o), *(self.x[n].type for n in self.reset)])
        move_to_end(at.block.ops, block)
        move_to_end(self.epilogue, epi.regions[0].block)
        YieldOp.build(Builder(epi.regions[0].block, self.loc),
                      [*outer_yield.operands, *(self.x[n] for n in self.reset)])
        YieldOp.build(Builder(epi.regions[1].block, self.loc),
                      [*self.o, *(b_out[n] for n in self.reset)])
        _name(epi.results, [*(a.name_hint for a in self.body.args[1:]),
                            *(self.inner_body.args[1 + n].name_hint for n in self.reset)])
        c2.update(zip(self.reset, epi.results[len(self.o):]))
        return epi.results[:len(self.o)], c2


def _fuse(outer: Operation, inner: Operation, n_j: Value) -> None:
    """Build the flattened loop in front of `outer` and erase the nest; `n_j`: the inner
    trip count, computed before (and positive)."""
    fusion = _Fusion(outer, inner)
    fused = fusion.build_loop(n_j)
    block = fused.regions[0].block
    k1 = fusion.prologue_if(block)
    b_out = fusion.steps(block)
    o2, c2 = fusion.epilogue_if(block, k1, b_out)
    YieldOp.build(Builder(block, outer.loc),
                  [k1, fusion.i1, *o2, fusion.j2, *(c2[n] for n in range(len(b_out))),
                   *fusion.p1])
    parent = outer.parent
    rest = parent.ops[parent.ops.index(outer) + 1:]
    for old, new in zip(outer.results, fused.results[2:2 + len(outer.results)]):
        replace_all_uses(rest, old, new)
    parent.ops.remove(outer)
    outer.parent = None


__all__ = ["flatten_loops", "flatten_nest", "FLATTEN"]
