"""`gluon.language.nvidia.blackwell` imports (kernels with a Blackwell and a Hopper path port
unchanged); its tensor-memory layouts work, and its tcgen05 builtins check their operands in
the user's terms."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from gluon.language.nvidia.blackwell import (TensorMemoryLayout, allocate_tensor_memory,
                                             get_tmem_reg_layout, tcgen05_mma)
from gluon.layouts import get_tmem_reg_layout as layouts_get_tmem_reg_layout
from shared_codegen.frontend.errors import CompilationError


@gluon.jit
def two_paths_kernel(out_ptr, BLACKWELL: gl.constexpr):
    if BLACKWELL:
        tmem_layout: gl.constexpr = TensorMemoryLayout([128, 64], col_stride=1)
        acc = allocate_tensor_memory(gl.float32, [128, 64], tmem_layout)
        tcgen05_mma(acc, acc, acc)
    else:
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, 128, layout)
        gl.store(out_ptr + offs, offs)


def test_the_hopper_path_of_a_two_path_kernel_runs():
    out = np.zeros(128, np.int32)
    two_paths_kernel[(1,)](out, False)
    np.testing.assert_array_equal(out, np.arange(128))


def test_the_blackwell_path_checks_the_mma_operands():
    with pytest.raises(CompilationError, match="tcgen05_mma reads b from shared memory; b must "
                                               "be a shared memory descriptor"):
        two_paths_kernel[(1,)](np.zeros(128, np.int32), True)


def test_the_tensor_memory_register_layout_is_the_layout_library_one():
    tmem = TensorMemoryLayout([128, 64], col_stride=1)
    assert get_tmem_reg_layout(gl.float32, [128, 64], tmem, 4) == \
        layouts_get_tmem_reg_layout(gl.float32, [128, 64], tmem, 4)


def test_the_blackwell_host_descriptor_is_the_hopper_one():
    from gluon.nvidia.blackwell import TensorDescriptor as BlackwellDescriptor
    from gluon.nvidia.hopper import TensorDescriptor

    assert BlackwellDescriptor is TensorDescriptor
