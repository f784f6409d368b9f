"""The tcgen05.ld/st shapes 16x64b, 16x128b, 16x256b (and 32x32b): interpreter round trips for
every `get_tmem_reg_layout` variant, a simulation of the planned messages against PTX's
fragment tables, and the sm_100a PTX / cubin."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout)
from shared_codegen.ir.types import TensorMemoryType, float16, float32
from shared_codegen.layouts import to_linear_layout
from shared_codegen.layouts.tmem import get_tmem_reg_layout as reg_layout_of
from shared_codegen.ops.tensor_memory.definition import cell_map
from shared_codegen.ops.tensor_memory.lowering import plan_any
from shared_codegen.ops.tensor_memory.messages import atom_cells

VARIANTS = ["32x32b", "16x64b", "16x128b", "16x256b"]


@gluon.jit
def round_trip_kernel(in_ptr, out_ptr, M: gl.constexpr, N: gl.constexpr,
                      VARIANT: gl.constexpr, DTYPE: gl.constexpr):
    blocked: gl.constexpr = gl.BlockedLayout([1, 4], [8, 4], [gl.num_warps(), 1], [1, 0])
    tmem_layout: gl.constexpr = TensorMemoryLayout(block=(128, N), col_stride=1)
    reg: gl.constexpr = get_tmem_reg_layout(DTYPE, [M, N], tmem_layout, gl.num_warps(),
                                            instr_variant=VARIANT)
    rows = gl.arange(0, M, layout=gl.SliceLayout(1, blocked))
    cols = gl.arange(0, N, layout=gl.SliceLayout(0, blocked))
    offs = rows[:, None] * N + cols[None, :]
    tmem = allocate_tensor_memory(DTYPE, [M, N], tmem_layout)
    tmem.store(gl.convert_layout(gl.load(in_ptr + offs), reg))
    x = tmem.load(reg) * 2
    gl.store(out_ptr + offs, gl.convert_layout(x, blocked))


@pytest.mark.parametrize("variant", VARIANTS)
def test_round_trip_in_the_interpreter(variant):
    x = np.random.default_rng(0).standard_normal((128, 32)).astype(np.float32)
    out = np.zeros_like(x)
    round_trip_kernel[(1,)](x, out, M=128, N=32, VARIANT=variant, DTYPE=gl.float32)
    np.testing.assert_array_equal(out, 2 * x)


def simulate(variant, m, n, num_warps, element=float32):
    """Run the planned messages of a tcgen05.ld on a TMEM image of element ids, the way the
    PTX fragment tables say the hardware does; return what each (register, lane, warp) got
    and what the register layout says it should hold."""
    tmem_layout = TensorMemoryLayout((128, n), 1)
    layout = reg_layout_of(element, [m, n], tmem_layout, num_warps, variant)
    ty = TensorMemoryType((m, n), element, tmem_layout, (m, n))
    plan = plan_any(layout, ty)
    per = 32 // element.bits
    lanes, units, _ = cell_map(tmem_layout, (m, n), element.bits)
    image = np.full((128, 64, per), -1, np.int64)  # element id per (lane, column, part)
    ids = np.arange(m * n).reshape(m, n)
    image[lanes, units // per, units % per] = ids
    ll = to_linear_layout(layout, [m, n])
    n_reg = ll.in_dim_size("register")
    got = np.full((n_reg, 32, num_warps), -2, np.int64)
    for w in range(num_warps):
        base_row = 32 * (w % 4)
        base_col = 0
        for bit, (row, col) in enumerate(plan.warp_offsets):
            if w >> (2 + bit) & 1:
                base_row, base_col = base_row + row, base_col + col
        for msg in plan.messages:
            for l in range(32):
                for j, word in enumerate(msg.words):
                    if msg.shape in ("32x32b", "16x32bx2"):
                        r, c = l, j
                        if msg.shape == "16x32bx2" and l >= 16:
                            r, c = l - 16, j + msg.split
                    else:
                        r, c = atom_cells(msg.shape, np.int64(l), np.int64(j))
                    for part, reg in word:
                        got[reg, l, w] = image[base_row + msg.row0 + r, base_col + msg.col0 + c,
                                               part]
    out = ll.apply_array({"register": np.arange(n_reg)[:, None, None],
                          "lane": np.arange(32)[None, :, None],
                          "warp": np.arange(num_warps)[None, None, :]})
    want = ids[out["dim0"], out["dim1"]]
    return plan, got, want


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("m,n,num_warps,element", [(128, 64, 4, float32),
                                                   (128, 32, 8, float32),
                                                   (128, 64, 4, float16)])
def test_planned_messages_deliver_the_layouts_elements(variant, m, n, num_warps, element):
    plan, got, want = simulate(variant, m, n, num_warps, element)
    # Registers never filled keep -2 and fail; replicated registers are copied by the load.
    for reg in range(got.shape[0]):
        if (got[reg] == -2).all():  # a replica of an earlier register: same element
            first = plan.reg_cells.index(plan.reg_cells[reg])
            got[reg] = got[first]
    np.testing.assert_array_equal(got, want)
    assert {msg.shape for msg in plan.messages} == {variant}


def compile_round_trip(variant, num_warps=4, n=64):
    return gluon.compile(round_trip_kernel, {"in_ptr": "*fp32:16", "out_ptr": "*fp32:16"},
                         dict(M=128, N=n, VARIANT=variant, DTYPE=gl.float32),
                         target="sm_100a", num_warps=num_warps)


@pytest.mark.parametrize("variant,count", [("16x64b", 2), ("16x128b", 2), ("16x256b", 2)])
def test_sm100a_ptx_uses_the_shape(variant, count):
    ptx = compile_round_trip(variant).asm["ptx"]
    # 128 rows x 64 fp32 columns, 4 warps: two messages of 32 registers each (rows 0-15 and
    # 16-31 of each warp's quadrant), for the load and for the store.
    assert ptx.count(f"tcgen05.ld.sync.aligned.{variant}.") == count, ptx
    assert ptx.count(f"tcgen05.st.sync.aligned.{variant}.") == count
    assert "32x32b" not in ptx


def test_sm100a_cubin_for_the_16_lane_shapes_with_8_warps():
    comp = compile_round_trip("16x256b", num_warps=8, n=32)
    assert "tcgen05.ld.sync.aligned.16x256b.x4.b32" in comp.asm["ptx"]
    assert comp.asm["cubin"]
