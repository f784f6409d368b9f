"""Every op declares the traits the passes read, and the passes read traits, not op names."""

import ast
import re
from pathlib import Path

import pytest

import shared_codegen.ops  # noqa: F401  (registers every op)
from shared_codegen.ir.core import OpDef, Operation, all_opdefs
from shared_codegen.ir.types import TensorType, int32
from shared_codegen.layouts import BlockedLayout
from shared_codegen.layouts.relations import PointerAccess, Same, Slice
from shared_codegen.ops.arith.definition import BinaryOp, CastOp
from shared_codegen.ops.memory.definition import LoadOp, StoreOp

ROOT = Path(__file__).resolve().parents[3]
# Every module outside the op families: passes, analyses, the converter, the interpreter and
# lowering drivers, the frontends' builtins. Op names belong in the op definitions.
DRIVERS = sorted(str(p.relative_to(ROOT)) for package in ("shared_codegen", "tile", "gluon")
                 for p in (ROOT / package).rglob("*.py")
                 if not str(p.relative_to(ROOT)).startswith("shared_codegen/ops/"))
OP_NAME = re.compile(r"^(tt|ttg|ttng|arith|math|scf|gpu)\.[a-z_.0-9]+$")


def opdef_classes():
    return sorted({type(d) for d in all_opdefs().values()}, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", opdef_classes(), ids=lambda c: c.__name__)
def test_every_op_declares_how_its_layouts_relate(cls):
    rule = cls.layout_rule
    assert rule is not None, f"{cls.__name__} declares no layout_rule"
    assert isinstance(rule.name, str) and callable(rule.relations)


@pytest.mark.parametrize("cls", opdef_classes(), ids=lambda c: c.__name__)
def test_traits_have_their_types(cls):
    d = all_opdefs()[cls.names[0] if cls.__dict__.get("names") else cls.name]
    assert cls.axis_rule is None or callable(d.axis_rule)
    assert isinstance(cls.memory_effects, frozenset)
    assert cls.user_name is None or isinstance(cls.user_name, str)
    for trait in (cls.pure, cls.cheap):
        assert isinstance(trait, bool) or (isinstance(trait, frozenset)
                                           and trait <= set(all_opdefs()))


def test_cheap_ops_are_pure():
    for name, d in all_opdefs().items():
        op = Operation.__new__(Operation)
        op.name = name
        assert not d.is_cheap(op) or d.is_pure(op), name


def test_a_family_of_names_can_give_a_trait_per_name():
    binary = all_opdefs()["arith.addi"]
    assert isinstance(binary, BinaryOp)
    add_int, add_float = (Operation.__new__(Operation) for _ in range(2))
    add_int.name, add_float.name = "arith.addi", "arith.addf"
    assert binary.is_cheap(add_int) and not binary.is_cheap(add_float)
    assert binary.spelling_of(add_int) == "+"
    assert isinstance(all_opdefs()["tt.bitcast"], CastOp)


def test_memory_accesses_declare_their_effects_and_relations():
    assert isinstance(LoadOp.layout_rule, PointerAccess)
    assert LoadOp.memory_effects and StoreOp.memory_effects
    assert not OpDef.memory_effects


def test_an_expand_dims_relation_reads_as_a_slice_of_its_result():
    layout = BlockedLayout([1, 1], [4, 8], [4, 1], [1, 0])
    x = Operation("tt.make_range", [], [TensorType((32,), int32, None)],
                  {"start": 0, "end": 32}).result
    op = Operation("tt.expand_dims", [x], [TensorType((32, 1), int32, layout)], {"axis": 1})
    (rel,) = op.opdef.layout_rule.relations(op)
    assert isinstance(rel, Slice) and rel.a is x and rel.b is op.result and rel.axis == 1
    add = Operation("arith.addi", [x, x], [x.type])
    (same,) = add.opdef.layout_rule.relations(add)
    assert isinstance(same, Same) and same.values == (x, x, add.result)


@pytest.mark.parametrize("path", DRIVERS)
def test_drivers_hold_no_op_names(path):
    tree = ast.parse((ROOT / path).read_text())
    names = [(node.lineno, node.value) for node in ast.walk(tree)
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and OP_NAME.match(node.value)]
    assert not names, f"{path} names ops by string: {names}"
