"""Loop-carried variables that start as Python numbers and become tensors in the body:

    acc = 0
    for k in range(0, K, BLOCK):
        acc += tl.load(ptrs + k)      # acc is now a block of the loaded dtype

A number has no shape, so the loop is first traced with it as a scalar; when the body turns it
into a value of another type, the loop is traced again with the number splat to that type (a
block of zeros here), which is the loop the user meant. Triton's frontend rejects this
pattern ("Loop-carried variable acc has initial type int32 but is re-assigned to ..."); kernels
written for it give the same result here. Only the tile DSL's layout-free tensors widen: an
explicit-layout tensor needs its layout from the user.
"""

from __future__ import annotations

from shared_codegen.ir.types import TensorType

# The tensor attribute that marks a loop's initial value as made from a Python number.
FROM_NUMBER = "_sc_from_number"


class Widen(Exception):
    """Raised by the loop body's outputs: carried variable `name` must start as `type`."""

    def __init__(self, name: str, type):
        super().__init__(name)
        self.name = name
        self.type = type


def widening_type(init, value):
    """The type to restart the loop with, or None when the mismatch is a real error."""
    number = getattr(init, FROM_NUMBER, None)
    if number is None or value.type == init.type:
        return None
    if isinstance(value.type, TensorType) and value.type.layout is not None:
        return None
    return value.type


def _initial_value(gen, name, widened):
    value = gen.scope[name]
    if name in widened:
        ty = widened[name]
        init = gen.semantic.to_tensor(value, like=ty)
    else:
        init = gen.materialize(value)
    if not hasattr(value, "type") and isinstance(value, (bool, int, float)):
        setattr(init, FROM_NUMBER, value)
    return init


def build_loop(gen, names, build):
    """`build(inits)` traces the loop; retraced with wider initial values as needed."""
    mark = len(gen.builder.block.ops)
    before = dict(gen.scope)
    widened = {}
    while True:
        inits = [_initial_value(gen, n, widened) for n in names]
        try:
            return build(inits)
        except Widen as w:
            if w.name in widened:
                raise
            # The first trace's ops (initial values, the loop) have no uses outside it.
            del gen.builder.block.ops[mark:]
            gen.scope = dict(before)
            widened[w.name] = w.type
