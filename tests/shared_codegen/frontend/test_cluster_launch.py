"""Launching with a cluster shape (`cluster_dims=`): the checks every launch makes, in the
interpreter (which runs the programs of a cluster as usual) and before any GPU work. The GPU
launch itself (cuLaunchKernelEx with a cluster attribute) is in tests/gpu/test_gemm_gpu.py."""

import numpy as np
import pytest

import gluon
from gluon import language as gl
from shared_codegen.frontend.errors import ArgumentError


@gluon.jit
def _double_ids(x_ptr):
    pid = gl.program_id(0) + gl.program_id(1) * gl.num_programs(0)
    gl.store(x_ptr + pid, pid * 2)


def test_a_clustered_launch_runs_every_program_in_the_interpreter():
    x = np.full(12, -1, np.int32)
    _double_ids[(4, 3)](x, cluster_dims=(2, 3))
    assert x.tolist() == [2 * i for i in range(12)]


@pytest.mark.parametrize("dims, message", [
    ((3,), r"_double_ids: grid \(8, 1, 1\) is not a multiple of cluster_dims \(3, 1, 1\) "
           r"\(axis 0: 8 % 3 != 0\)"),
    ((2, 0), r"_double_ids: cluster_dims must be 1 to 3 positive ints, got \(2, 0\)"),
    ((1, 1, 1, 1), r"cluster_dims must be 1 to 3 positive ints, got \(1, 1, 1, 1\)"),
    ((8, 2), r"_double_ids: cluster_dims=\(8, 2, 1\) has 16 CTAs; the portable cluster size "
             r"is at most 8"),
])
def test_bad_cluster_shapes_are_named(dims, message):
    with pytest.raises(ArgumentError, match=message):
        _double_ids[(8,)](np.zeros(8, np.int32), cluster_dims=dims)


def test_num_ctas_makes_each_program_a_cluster():
    # Program ids count clusters: both CTAs of each cluster store the same value
    # (tests/gluon/hopper/test_clusters.py uses the CTAs' ranks).
    x = np.full(8, -1, np.int32)
    _double_ids[(4, 2)](x, num_ctas=2)
    assert x.tolist() == [2 * i for i in range(8)]
