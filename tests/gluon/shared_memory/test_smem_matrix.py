"""`ttg.local_load` / `ttg.local_store` through ldmatrix / stmatrix (`smem_matrix.py`).

The lowered ops run for every thread in lock step on `xthread_sim` (byte-addressed,
race-checked shared memory; ld/stmatrix per the PTX fragment layout). Loads start from the
bytes the interpreter's shared-memory model placed (`ops/shared_memory/interpreter.py`), stores
are compared byte for byte with that model, so lowering and interpreter agree on every
element. The PTX of the mma_v2 example must use the matrix instructions."""

import numpy as np
import pytest
from smem_kernels import Kernel, compile_ptx, interpret
from test_smem_lowering import SmemSim

from gluon.layouts import (BlockedLayout, DistributedLinearLayout, DotOperandLayout,
                           NVMMADistributedLayout, NVMMASharedLayout, SwizzledSharedLayout)
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Block
from shared_codegen.ir.types import SharedMemoryType, TensorType, bfloat16, float16, int32
from shared_codegen.ops.shared_memory import lowering as rules
from shared_codegen.ops.shared_memory.definition import (LocalLoadOp, LocalStoreOp, MemDescIndexOp,
                                                         MemDescSubsliceOp, MemDescTransOp,
                                                         offset_map)
from shared_codegen.ops.shared_memory.interpreter import allocate


def _value(ty):
    return Block([ty]).args[0]


def _mma(warps):
    return NVMMADistributedLayout([2, 0], list(warps), [16, 8])


def _operand(index, warps=(2, 2)):
    return DotOperandLayout(index, _mma(warps), 2)


class _Case:
    """An allocation, the interpreter's view of it holding `data`, and a local_load of it
    (through `view`, if given) lowered on the simulator."""

    def __init__(self, layout, alloc_shape, elem=float16, view=None, target="sm_90a",
                 num_warps=4, seed=0):
        self.b = b = Builder(Block())
        self.elem = elem
        self.mem_ty = SharedMemoryType(tuple(alloc_shape), elem, layout, tuple(alloc_shape))
        self.alloc = b.create("ttg.local_alloc", [], [self.mem_ty])
        self.view = view(b, self.alloc.result) if view is not None else self.alloc.result
        nbytes = offset_map(self.mem_ty).alloc_elems * elem.itemsize
        self.sim = SmemSim(num_warps, {self.alloc: 0}, nbytes)
        self.sim.target = target
        rng = np.random.default_rng(seed)
        self.data = rng.integers(-100, 100, size=alloc_shape).astype(np.float64)
        self.shared = allocate(self.alloc, None)

    def _lower_views(self):
        sim = self.sim
        sim.set(self.alloc.result, rules.lower_local_alloc(self.alloc, sim)[0])
        for op in self.b.block.ops[1:]:
            if op.name == "arith.constant":
                sim.set(op.result, sim.i32(op.attrs["value"]))
            elif op.name == "ttg.memdesc_trans":
                sim.set(op.result, sim.get(op.operands[0]))
            elif op.name.startswith("ttg.memdesc"):
                sim.set(op.result, op.opdef.lower(op, sim)[0])

    def interpreter_view(self, value):
        """The interpreter's SharedView of `value` (a chain of views of the allocation)."""
        op = value.owner
        if op is self.alloc:
            return self.shared
        src = self.interpreter_view(op.operands[0])
        if op.name == "ttg.memdesc_index":
            return src.index(int(op.operands[1].owner.attrs["value"]), None, op)
        if op.name == "ttg.memdesc_subslice":
            return src.subslice(op.attrs["offsets"], op.result.type.shape)
        assert op.name == "ttg.memdesc_trans", op.name
        return src.permute(op.attrs["order"])

    def load(self, dst):
        """Fill the buffer the interpreter's way, lower the load; (loaded, interpreted)."""
        # (The store is only the interpreter's: its operand's layout does not matter.)
        rank = len(self.mem_ty.shape)
        x = _value(TensorType(self.mem_ty.shape, self.elem, BlockedLayout(
            [1] * rank, [1] * (rank - 1) + [32], [1] * (rank - 1) + [self.sim.num_warps],
            list(range(rank))[::-1])))
        store = LocalStoreOp.build(self.b, x, self.alloc.result)
        load = LocalLoadOp.build(self.b, self.view, dst).owner
        self.shared.store(self.data, None, store)
        # The bytes were written before the kernel's first barrier by nobody in particular.
        for a in np.nonzero(self.shared.buffer.written)[0]:
            self.sim._mem[int(a)] = (int(self.shared.buffer.data[a]), -1, -1)
        self._lower_views()
        lowered = rules.lower_local_load(load, self.sim)[0]
        loaded = self.sim.gather(lowered, load.result.type)
        want = self.interpreter_view(self.view).load(None, load).astype(np.float64)
        return loaded, want

    def store(self, src):
        """Lower a local_store of `data` held in `src`; returns (sim bytes, interpreter
        bytes) of the allocation."""
        x = _value(TensorType(self.mem_ty.shape, self.elem, src))
        store = LocalStoreOp.build(self.b, x, self.alloc.result)
        self.sim.bind(x, self.data)
        self._lower_views()
        rules.lower_local_store(store, self.sim)
        self.shared.store(self.data, None, store)
        got = np.zeros_like(self.shared.buffer.data)
        for a, entry in self.sim._mem.items():
            got[a] = entry[0]
        assert sorted(self.sim._mem) == list(np.nonzero(self.shared.buffer.written)[0])
        return got, self.shared.buffer.data


SMEM_LAYOUTS = {
    "nvmma128": NVMMASharedLayout(128, 16), "nvmma64": NVMMASharedLayout(64, 16),
    "nvmma32": NVMMASharedLayout(32, 16), "nvmma0": NVMMASharedLayout(0, 16),
    "swizzled_8_1_8": SwizzledSharedLayout(8, 1, 8, (1, 0)),
    "swizzled_8_2_4": SwizzledSharedLayout(8, 2, 4, (1, 0)),
    "plain": SwizzledSharedLayout(1, 1, 1, (1, 0)),
}


def _forms(sim):
    """'llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p3' -> 'ldmatrix.x4.trans'."""
    out = []
    for name in sim.matrix_ops:
        parts = name.split(".")
        out.append(".".join([parts[2], parts[6]] + (["trans"] if "trans" in parts else [])))
    return out


# ---- ldmatrix: the mma_v2 operands ------------------------------------------------------------

@pytest.mark.parametrize("elem", [float16, bfloat16], ids=str)
@pytest.mark.parametrize("layout", sorted(SMEM_LAYOUTS))
@pytest.mark.parametrize("index,form", [(0, "ldmatrix.x4"), (1, "ldmatrix.x4.trans")])
def test_mma_operands_load_through_ldmatrix(index, form, layout, elem):
    """A (K contiguous) is plain ldmatrix, B (N contiguous) `.trans`; both load exactly the
    bytes the interpreter placed. 64x64 over 2x2 warps: each warp's 32x64 / 64x32 share is
    8 matrix loads of four 8x8 matrices."""
    case = _Case(SMEM_LAYOUTS[layout], (64, 64), elem)
    loaded, want = case.load(_operand(index))
    np.testing.assert_array_equal(want, case.data)
    np.testing.assert_array_equal(loaded, want)
    assert _forms(case.sim) == [form] * 8


@pytest.mark.parametrize("index,shape,warps,loads", [
    (0, (128, 32), (4, 2), 4),       # the example's A stage, 8 warps (warp bit 0 broadcast)
    (1, (32, 128), (4, 2), 8),       # ... and its B stage
    (0, (64, 32), (4, 1), 2),
    (1, (32, 64), (1, 4), 2),
    (0, (16, 16), (1, 1), 1),
])
def test_warp_arrangements_and_broadcast_warps(index, shape, warps, loads):
    num_warps = warps[0] * warps[1]
    layout = SwizzledSharedLayout(8, max(1, 128 // (shape[1] * 2)),
                                  max(1, 8 // max(1, 128 // (shape[1] * 2))), (1, 0))
    case = _Case(layout, shape, num_warps=num_warps)
    loaded, want = case.load(_operand(index, warps))
    np.testing.assert_array_equal(loaded, want)
    np.testing.assert_array_equal(want, case.data)
    kind = "ldmatrix.x4" + (".trans" if index else "")
    assert _forms(case.sim) == [kind] * loads


def test_two_matrices_when_the_layout_has_only_one_more_register():
    """B of one m16n8k16 (16x8, one warp): k+1 pairs, k+8 picks the matrix: `.x2`."""
    case = _Case(NVMMASharedLayout(0, 16), (16, 8), num_warps=1)
    loaded, want = case.load(_operand(1, (1, 1)))
    np.testing.assert_array_equal(loaded, want)
    assert _forms(case.sim) == ["ldmatrix.x2.trans"]


def test_one_matrix_from_a_linear_layout():
    """One 8x8 tile in the `.trans` fragment: `.x1` (one 4-byte load instead of two 2-byte
    ones). The plain fragment would be no gain: its pair is one `ld.shared.b32` already."""
    trans = DistributedLinearLayout([[1, 0]], [[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]], [],
                                    [], [8, 8])
    plain = DistributedLinearLayout([[0, 1]], [[0, 2], [0, 4], [1, 0], [2, 0], [4, 0]], [],
                                    [], [8, 8])
    for dst, forms in ((trans, ["ldmatrix.x1.trans"]), (plain, [])):
        case = _Case(SwizzledSharedLayout(1, 1, 1, (1, 0)), (8, 8), num_warps=1)
        loaded, want = case.load(dst)
        np.testing.assert_array_equal(loaded, want)
        assert _forms(case.sim) == forms


def _stages_then_k_half(b, mem):
    one = MemDescIndexOp.build(b, mem, b.create("arith.constant", [], [int32],
                                                {"value": 1}).result)
    return MemDescSubsliceOp.build(b, one, [0, 32], [64, 32])


def _m_half(b, mem):
    return MemDescSubsliceOp.build(b, mem, [32, 0], [32, 64])


def _transposed(b, mem):
    return MemDescTransOp.build(b, mem, [1, 0])


@pytest.mark.parametrize("layout", ["nvmma128", "nvmma64", "swizzled_8_1_8", "plain"])
@pytest.mark.parametrize("alloc_shape,view,index,form", [
    ((3, 64, 64), _stages_then_k_half, 0, "ldmatrix.x4"),   # a pipeline stage, K half
    ((64, 64), _m_half, 0, "ldmatrix.x4"),
    ((64, 64), _transposed, 0, "ldmatrix.x4.trans"),        # A stored [K, M]: M contiguous
    ((64, 64), _transposed, 1, "ldmatrix.x4"),              # B stored [N, K]: K contiguous
], ids=["stage_k_half", "m_half", "a_transposed", "b_transposed"])
def test_views_index_subslice_and_transpose(layout, alloc_shape, view, index, form):
    case = _Case(SMEM_LAYOUTS[layout], alloc_shape, view=view)
    loaded, want = case.load(_operand(index))
    np.testing.assert_array_equal(loaded, want)
    assert set(_forms(case.sim)) == {form}


def test_nvmma_transposed_layout_is_trans_for_a():
    case = _Case(NVMMASharedLayout(128, 16, transposed=True), (64, 64))
    loaded, want = case.load(_operand(0))
    np.testing.assert_array_equal(loaded, want)
    assert set(_forms(case.sim)) == {"ldmatrix.x4.trans"}


@pytest.mark.parametrize("target,dst,why", [
    ("sm_70", _operand(0), "ldmatrix is sm_75+"),
    ("sm_90a", BlockedLayout([1, 8], [8, 4], [4, 1], [1, 0]), "ld.shared.v4 is as wide"),
    ("sm_90a", BlockedLayout([1, 1], [32, 1], [1, 4], [0, 1]), "no 16-byte rows"),
])
def test_plain_loads_where_ldmatrix_does_not_apply_or_gain(target, dst, why):
    case = _Case(SMEM_LAYOUTS["nvmma128"], (64, 64), target=target)
    loaded, want = case.load(dst)
    np.testing.assert_array_equal(loaded, want)
    assert case.sim.matrix_ops == [], why


# ---- stmatrix ---------------------------------------------------------------------------

ACC = NVMMADistributedLayout([2, 0], [2, 2], [16, 8])


@pytest.mark.parametrize("elem", [float16, bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["nvmma128", "nvmma32", "swizzled_8_1_8", "plain"])
@pytest.mark.parametrize("src,form", [(ACC, "stmatrix.x4"), (_operand(0), "stmatrix.x4"),
                                      (_operand(1), "stmatrix.x4.trans")],
                         ids=["mma_acc", "a_operand", "b_operand"])
def test_stmatrix_stores_the_interpreters_bytes(src, form, layout, elem):
    case = _Case(SMEM_LAYOUTS[layout], (64, 64), elem)
    got, want = case.store(src)
    np.testing.assert_array_equal(got, want)
    assert set(_forms(case.sim)) == {form}


def test_stmatrix_is_sm_90_only():
    case = _Case(SMEM_LAYOUTS["nvmma128"], (64, 64), target="sm_80")
    got, want = case.store(ACC)
    np.testing.assert_array_equal(got, want)
    assert case.sim.matrix_ops == []


def test_store_then_load_keeps_its_barrier():
    """stmatrix then ldmatrix of one buffer: one `bar.sync` between them, and the simulator
    (a race detector) agrees it is enough."""
    case = _Case(SMEM_LAYOUTS["nvmma128"], (64, 64))
    x = _value(TensorType((64, 64), float16, ACC))
    store = LocalStoreOp.build(case.b, x, case.alloc.result)
    load = LocalLoadOp.build(case.b, case.alloc.result, _operand(1)).owner
    case.sim.bind(x, case.data)
    case._lower_views()
    rules.lower_local_store(store, case.sim)
    loaded = case.sim.gather(rules.lower_local_load(load, case.sim)[0], load.result.type)
    np.testing.assert_array_equal(loaded, case.data)
    assert case.sim.barriers == 1
    # Per warp: 32x32 of the accumulator (4 x4 stores), 64x32 of B (8 x4 loads).
    assert _forms(case.sim) == ["stmatrix.x4"] * 4 + ["ldmatrix.x4.trans"] * 8


# ---- PTX ------------------------------------------------------------------------------------

def _acc_to_operand_module(target):
    k = Kernel("acc_to_b", [float16, float16])
    k.module.attrs["target"] = target
    x = k.load(0, (64, 64), ACC)
    mem = k.alloc(float16, (64, 64), NVMMASharedLayout(128, 16))
    LocalStoreOp.build(k.b, x, mem)
    k.store(1, LocalLoadOp.build(k.b, mem, _operand(1)))
    return k.finish()


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_ptx_uses_matrix_instructions_and_interprets(target):
    module = _acc_to_operand_module(target)
    _, ptx = compile_ptx(module, targets=(target,))
    text = ptx[target]
    assert text.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 8
    assert "ld.shared" not in text
    if target == "sm_90a":
        assert text.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
        assert "st.shared" not in text
    else:
        assert "stmatrix" not in text and "st.shared.b32" in text
    last_store = text.rindex("stmatrix" if target == "sm_90a" else "st.shared")
    assert "bar.sync" in text[last_store:text.index("ldmatrix")]
    a = np.arange(64 * 64).astype(np.float16).reshape(64, 64)
    out = np.zeros_like(a)
    interpret(module, a, out)
    np.testing.assert_array_equal(out, a)
