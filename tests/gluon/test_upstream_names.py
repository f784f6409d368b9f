"""Every public name of Triton 3.6.0's Gluon modules (read from the `triton==3.6.0` wheel)
exists in ours, module by module, except those docs/gluon_compatibility.md lists as missing
(`amd`, the frontend internals `base_type` / `base_value` / `tuple` / `tuple_type`, and the
fp8 formats of other hardware). A name that disappears, or one added upstream-style to the
index without an implementation, fails here."""

import importlib
import os

import pytest

UPSTREAM_3_6 = {
    'gluon': [
        'constexpr_function', 'jit', 'language', 'must_use_result', 'nvidia'
    ],
    'gluon.language': [
        'AutoLayout', 'BlockedLayout', 'CoalescedLayout', 'DistributedLinearLayout',
        'DotOperandLayout', 'NVMMADistributedLayout', 'NVMMASharedLayout',
        'PaddedSharedLayout', 'SharedLinearLayout', 'SliceLayout',
        'SwizzledSharedLayout', 'abs', 'add', 'allocate_shared_memory', 'arange',
        'associative_scan', 'assume', 'atomic_add', 'atomic_and', 'atomic_cas',
        'atomic_max', 'atomic_min', 'atomic_or', 'atomic_xchg', 'atomic_xor',
        'bank_conflicts', 'bfloat16', 'block_type', 'broadcast', 'cast', 'cdiv', 'ceil',
        'constexpr', 'convert_layout', 'cos', 'device_assert', 'device_print',
        'distributed_type', 'div_rn', 'dot_fma', 'dtype', 'erf', 'exp', 'exp2',
        'expand_dims', 'extra', 'fdiv', 'float16', 'float32', 'float64', 'float8e4nv',
        'float8e5', 'floor', 'fma', 'fp4_to_fp', 'full', 'full_like', 'gather',
        'histogram', 'inline_asm_elementwise', 'int1', 'int16', 'int32', 'int64',
        'int8', 'join', 'load', 'log', 'log2', 'map_elementwise', 'max',
        'max_constancy', 'max_contiguous', 'maximum', 'min', 'minimum', 'mul',
        'multiple_of', 'num_ctas', 'num_programs', 'num_warps', 'nvidia', 'permute',
        'pointer_type', 'program_id', 'ravel', 'reduce', 'reduce_or', 'reshape',
        'rsqrt', 'set_auto_layout', 'shared_memory_descriptor',
        'shared_memory_descriptor_type', 'sin', 'split', 'sqrt', 'sqrt_rn',
        'static_assert', 'static_print', 'static_range', 'store', 'sub', 'sum',
        'tensor', 'thread_barrier', 'to_linear_layout', 'to_tensor', 'uint16', 'uint32',
        'uint64', 'uint8', 'umulhi', 'void', 'warp_specialize', 'where', 'xor_sum',
        'zeros', 'zeros_like'
    ],
    'gluon.language.nvidia.ampere': [
        'DotOperandLayout', 'NVMMADistributedLayout', 'async_copy', 'mbarrier', 'mma_v2'
    ],
    'gluon.language.nvidia.ampere.async_copy': [
        'async_copy_global_to_shared', 'commit_group', 'mbarrier_arrive', 'wait_group'
    ],
    'gluon.language.nvidia.ampere.mbarrier': [
        'MBarrierLayout', 'SwizzledSharedLayout', 'arrive', 'init', 'invalidate', 'wait'
    ],
    'gluon.language.nvidia.hopper': [
        'async_copy', 'fence_async_shared', 'mbarrier', 'mma_v2', 'tma',
        'warpgroup_mma', 'warpgroup_mma_accumulator', 'warpgroup_mma_accumulator_type',
        'warpgroup_mma_init', 'warpgroup_mma_wait'
    ],
    'gluon.language.nvidia.hopper.tma': [
        'NVMMASharedLayout', 'async_copy_global_to_shared',
        'async_copy_shared_to_global', 'make_tensor_descriptor', 'store_wait',
        'tensor_descriptor', 'tensor_descriptor_type'
    ],
    'gluon.language.nvidia.hopper.mbarrier': [
        'MBarrierLayout', 'arrive', 'expect', 'init', 'invalidate', 'wait'
    ],
    'gluon.language.nvidia.blackwell': [
        'SharedLinearLayout', 'TensorMemoryLayout', 'TensorMemoryScalesLayout',
        'allocate_tensor_memory', 'async_copy', 'fence_async_shared',
        'get_tmem_reg_layout', 'mbarrier', 'mma_v2', 'tcgen05_commit', 'tcgen05_copy',
        'tcgen05_mma', 'tcgen05_mma_scaled', 'tensor_memory_descriptor',
        'tensor_memory_descriptor_type', 'tma'
    ],
    'gluon.language.nvidia.blackwell.tma': [
        'async_copy_global_to_shared', 'async_copy_shared_to_global', 'async_gather',
        'async_scatter', 'make_tensor_descriptor', 'store_wait', 'tensor_descriptor',
        'tensor_descriptor_type'
    ],
    'gluon.language.nvidia.blackwell.float2': [
        'Float2Tensor', 'fma', 'full_like', 'pack', 'pack2', 'unpack', 'unpack2'
    ],
    'gluon.nvidia.hopper': [
        'NVMMASharedLayout', 'TensorDescriptor'
    ],
    'gluon.nvidia.blackwell': [
        'TensorDescriptor'
    ],
    'gluon.language.extra': [
        'libdevice'
    ],
}

@pytest.mark.parametrize("module", sorted(UPSTREAM_3_6))
def test_every_upstream_name_exists(module):
    ours = importlib.import_module(module)
    absent = [name for name in UPSTREAM_3_6[module] if not hasattr(ours, name)]
    assert absent == []


def test_the_compatibility_page_names_each_of_them():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "gluon_compatibility.md")
    index = open(path).read().split("## Name index (Triton 3.6.0)")[1]
    for module, names in UPSTREAM_3_6.items():
        section = index.split(f"#### `triton.experimental.{module}` (")[1].split("####")[0]
        assert [n for n in names if f"`{n}`" not in section] == [], module
