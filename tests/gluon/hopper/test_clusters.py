"""Thread-block clusters in Gluon (`num_ctas > 1`, docs/clusters.md): the interpreter runs a
cluster's CTAs co-scheduled, TMA multicast and remote mbarrier arrivals reach peer CTAs, and
the reports (deadlocks, races, multicasts into unready peers) are asserted word for word; the
PTX for sm_90a carries the cluster instructions."""

import os
import re
import sys

import numpy as np
import pytest

import gluon
import tile
from gluon import language as gl
from gluon.language.nvidia.hopper import cluster, mbarrier, tma
from gluon.nvidia.hopper import TensorDescriptor
from shared_codegen.errors import (ArgumentError, CompilationError, DeadlockError,
                                   InterpreterError, RaceError)

sys.path.insert(0, os.path.dirname(__file__))
import cluster_kernels as ck  # noqa: E402

FILE = ck.__file__
SOURCE = open(FILE).read().splitlines()


def line_of(text: str, after: str = "") -> int:
    """The first line of cluster_kernels.py containing `text` (after the one with `after`)."""
    start = next(i for i, line in enumerate(SOURCE) if after in line) if after else 0
    return next(i for i, line in enumerate(SOURCE) if i >= start and text in line) + 1


def _descriptors(a, b, bm, bn, bk):
    a_layout = gl.NVMMASharedLayout.get_default_for([bm, bk], gl.float16)
    b_layout = gl.NVMMASharedLayout.get_default_for([bk, bn], gl.float16)
    return (TensorDescriptor.from_tensor(a, [bm, bk], a_layout),
            TensorDescriptor.from_tensor(b, [bk, bn], b_layout))


@pytest.mark.parametrize("num_ctas", [2, 4])
def test_a_multicast_a_tile_feeds_every_cta_of_the_cluster(num_ctas):
    # Each CTA loads BM / num_ctas rows of A for all, and its own B tile; together they
    # compute a BM x (num_ctas * BN) band of C.
    m, n, k, bm, bn, bk = 128, 64 * num_ctas, 128, 64, 64, 64
    rng = np.random.default_rng(num_ctas)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    a_desc, b_desc = _descriptors(a, b, bm, bn, bk)
    ck.multicast_gemm_kernel[(m // bm, n // (num_ctas * bn))](a_desc, b_desc, c, n, k,
                                                             num_ctas=num_ctas)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)


def test_a_multicast_while_a_peer_still_reads_the_last_tile_is_a_race():
    m, n, k, bm, bn, bk = 64, 128, 128, 64, 64, 64
    a = np.ones((m, k), np.float16)
    b = np.ones((k, n), np.float16)
    a_desc, b_desc = _descriptors(a, b, bm, bn, bk)
    line = line_of("multicast=True)", after="def multicast_gemm_kernel")
    alloc = line_of("mbarrier.MBarrierLayout()", after="def multicast_gemm_kernel")
    expected = (f"{FILE}:{line}: race: this multicast TMA load targets (in CTA 1) shared memory "
                f"that the multicast TMA load (from CTA 0) at {FILE}:{line} may still be "
                f"writing; wait on the mbarrier allocated at {FILE}:{alloc} until it observes "
                f"the phase the load completes (program id (0, 0, 0), CTA 0)\n"
                f"    tma.async_load(a_desc, [off_m, k], bar, a_smem, multicast=True)")
    with pytest.raises(RaceError) as info:
        ck.multicast_gemm_kernel[(1, 1)](a_desc, b_desc, np.zeros((m, n), np.float32), n, k,
                                         SYNC_EACH_STEP=False, num_ctas=2)
    assert str(info.value) == expected


def test_cta_ranks_program_ids_and_the_cluster_barrier():
    out = np.full(6, -1, np.int32)
    ck.cluster_ids_kernel[(3,)](out, num_ctas=2)
    assert out.tolist() == [0, 1, 10, 11, 20, 21]


def test_a_cluster_barrier_one_cta_never_reaches_is_a_deadlock():
    line = line_of("cluster.barrier()", after="def lonely_cluster_barrier_kernel")
    expected = ("deadlock: every CTA of the cluster of program (0, 0, 0) is blocked or has "
                "returned\n"
                f"  CTA 0 waits at {FILE}:{line} on the cluster barrier (its arrival 1) for "
                f"CTA 1 (returned)\n"
                "      cluster.barrier()\n"
                "  CTA 1 has returned")
    with pytest.raises(DeadlockError) as info:
        ck.lonely_cluster_barrier_kernel[(1,)](np.zeros(2, np.int32), num_ctas=2)
    assert str(info.value) == expected
    assert (info.value.file, info.value.line) == (FILE, line)


def test_remote_arrivals_reach_cta_zero():
    out = np.zeros(2, np.int32)
    ck.gather_arrivals_kernel[(2,)](out, 4, num_ctas=4)
    assert out.tolist() == [4, 4]


def test_a_barrier_short_of_remote_arrivals_is_a_deadlock():
    wait = line_of("mbarrier.wait(bar, 0)", after="def gather_arrivals_kernel")
    alloc = line_of("allocate_shared_memory", after="def gather_arrivals_kernel")
    last = line_of("cluster.barrier()", after="gl.store(out + gl.program_id(0), gl.num_ctas())")
    expected = ("deadlock: every CTA of the cluster of program (0, 0, 0) is blocked or has "
                "returned\n"
                f"  CTA 0 waits at {FILE}:{wait} for phase 0 of the mbarrier allocated at "
                f"{FILE}:{alloc}: the phase still lacks 1 of 3 arrivals\n"
                "      mbarrier.wait(bar, 0)\n"
                f"  CTA 1 waits at {FILE}:{last} on the cluster barrier (its arrival 2) for "
                f"CTA 0\n"
                "      cluster.barrier()")
    with pytest.raises(DeadlockError) as info:
        ck.gather_arrivals_kernel[(1,)](np.zeros(1, np.int32), 3, num_ctas=2)
    assert str(info.value) == expected


def test_a_multicast_before_the_peers_are_ready_is_reported():
    a = np.ones((64, 64), np.float16)
    a_desc, _ = _descriptors(a, a, 64, 64, 64)
    line = line_of("multicast=True)", after="def early_multicast_kernel")
    alloc = line_of("a_smem = ", after="def early_multicast_kernel")
    expected = (f"{FILE}:{line}: multicast TMA load into CTA 1 of the cluster before that CTA "
                f"allocated the shared memory (allocated at {FILE}:{alloc}): synchronize the "
                f"cluster (cluster.barrier()) after allocating and initializing, before the "
                f"first multicast or remote arrival (program id (0, 0, 0), CTA 0)\n"
                f"    tma.async_load(a_desc, [0, 0], bar, a_smem, multicast=True)")
    with pytest.raises(InterpreterError) as info:
        ck.early_multicast_kernel[(1,)](a_desc, num_ctas=2)
    assert str(info.value) == expected


# ---- PTX --------------------------------------------------------------------------------------

def test_the_multicast_gemm_compiles_to_cluster_ptx_and_records_the_slice_box():
    a = np.zeros((128, 128), np.float16)
    a_desc, b_desc = _descriptors(a, a, 64, 64, 64)
    kernel = gluon.compile(ck.multicast_gemm_kernel,
                           signature={"a_desc": a_desc, "b_desc": b_desc, "c_ptr": "*fp32",
                                      "N": "i32", "K": "i32"}, num_ctas=2)
    ptx = kernel.asm["ptx"]
    assert ".reqnctapercluster 2, 1, 1" in ptx
    assert "%cluster_ctarank" in ptx and "%clusterid.x" in ptx and "%ctaid.x" not in ptx
    multicast = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\."
                           r"mbarrier::complete_tx::bytes\.multicast::cluster \[%rd\d+\], "
                           r"\[%rd\d+, \{%r\d+, %r\d+\}\], \[%rd\d+\], %rs\d+;", ptx)
    assert len(multicast) == 1  # one 32-row box per CTA: the A slice
    assert ptx.count("barrier.cluster.arrive.aligned;") == 3
    assert ptx.count("barrier.cluster.wait.aligned;") == 3
    assert "fence.proxy.async.shared::cluster;" in ptx
    assert "fence.mbarrier_init.release.cluster;" in ptx
    assert "mov.b16 \t%rs1, 3;" in ptx  # the ctaMask: both CTAs
    assert kernel.metadata["tma_boxes"] == {"0": [32, 64]}  # a_desc's map: the slice
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


def test_remote_arrivals_and_relaxed_arrivals_in_ptx():
    @gluon.jit
    def remote(out):
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=2)
        cluster.arrive(relaxed=True)
        cluster.wait()
        mbarrier.arrive(bar, from_cta=0)
        mbarrier.arrive(bar, from_cta=1)  # every bit kept: the CTA's own barrier
        gl.store(out, cluster.cta_rank())

    ptx = gluon.compile(remote, signature={"out": "*i32"}, num_ctas=2).asm["ptx"]
    assert "barrier.cluster.arrive.relaxed.aligned;" in ptx
    assert re.search(r"mapa\.shared::cluster\.u64 remote, %rd\d+, %r\d+;", ptx)
    assert ptx.count("mbarrier.arrive.shared::cluster.b64 _, [remote], 1;") == 1
    assert ptx.count("mbarrier.arrive.shared::cta.b64 _, [%rd") == 1


def test_with_one_cta_per_program_cluster_ops_are_the_cta_itself():
    out = np.full(2, -1, np.int32)
    ck.cluster_ids_kernel[(2,)](out)
    assert out.tolist() == [0, 10]
    ptx = gluon.compile(ck.cluster_ids_kernel, signature={"out": "*i32"}).asm["ptx"]
    assert "%cluster_ctarank" not in ptx and ".reqnctapercluster" not in ptx
    assert "%ctaid.x" in ptx


# ---- errors -----------------------------------------------------------------------------------

def test_multicast_needs_a_cluster_and_whole_slices():
    a = np.zeros((64, 64), np.float16)
    a_desc, _ = _descriptors(a, a, 64, 64, 64)
    small = TensorDescriptor.from_tensor(np.zeros((16, 64), np.float16), [8, 64],
                                         gl.NVMMASharedLayout.get_default_for([8, 64],
                                                                              gl.float16))

    @gluon.jit
    def load_once(desc):
        smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        cluster.barrier()
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load(desc, [0, 0], bar, smem, multicast=True)
        mbarrier.wait(bar, 0)
        cluster.barrier()

    with pytest.raises(CompilationError, match=re.escape(
            "tma.async_load: multicast=True needs a cluster: launch the kernel with "
            "num_ctas > 1 (this kernel has num_ctas=1)")):
        load_once[(1,)](a_desc)
    with pytest.raises(CompilationError, match=re.escape(
            "tma.async_load: multicast=True gives each of the 2 CTAs 4 rows of the [8, 64] "
            "block, which does not start a whole 128-byte swizzle atom (8 rows); use a block "
            "of at least 16 rows")):
        load_once[(1,)](small, num_ctas=2)


def test_a_descriptor_of_a_multicast_load_serves_no_other_copy():
    a = np.zeros((64, 64), np.float16)
    a_desc, _ = _descriptors(a, a, 64, 64, 64)

    @gluon.jit
    def mixed(desc):
        smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        cluster.barrier()
        mbarrier.expect(bar, 2 * desc.block_type.nbytes)
        tma.async_load(desc, [0, 0], bar, smem, multicast=True)
        tma.async_load(desc, [0, 0], bar, smem)
        mbarrier.wait(bar, 0)

    with pytest.raises(CompilationError, match=re.escape(
            "this TMA op uses the descriptor `desc`, which a multicast load also uses; its "
            "tensor map's box is then the multicast slice [32, 64], not the block [64, 64]: "
            "pass a second descriptor of the same tensor for the other copies")):
        gluon.compile(mixed, signature={"desc": a_desc}, num_ctas=2)


def test_bad_num_ctas_launches_are_named():
    out = np.zeros(8, np.int32)
    with pytest.raises(ArgumentError, match=re.escape(
            "cluster_ids_kernel: num_ctas must be a power of two from 1 to 8 (the portable "
            "cluster size), got 3")):
        ck.cluster_ids_kernel[(1,)](out, num_ctas=3)
    with pytest.raises(ArgumentError, match=re.escape(
            "cluster_ids_kernel: num_ctas=2 and cluster_dims=(2, 1, 1) both set the cluster "
            "shape; num_ctas makes each program one cluster, cluster_dims groups independent "
            "programs: pass one")):
        ck.cluster_ids_kernel[(2,)](out, num_ctas=2, cluster_dims=(2, 1, 1))
    with pytest.raises(CompilationError, match=re.escape(
            "kernel `cluster_ids_kernel`: num_ctas=2 needs thread-block clusters (sm_90 or "
            "newer); the target is sm_80")):
        gluon.compile(ck.cluster_ids_kernel, signature={"out": "*i32"}, target="sm_80",
                      num_ctas=2)
    with pytest.raises(CompilationError, match=re.escape(
            "mbarrier.arrive: from_cta must be a compile-time int in [0, num_ctas - 1] = "
            "[0, 1], got 2")):
        @gluon.jit
        def far(out):
            bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
            mbarrier.init(bar, count=1)
            mbarrier.arrive(bar, from_cta=2)

        gluon.compile(far, signature={"out": "*i32"}, num_ctas=2)


def test_tile_kernels_keep_one_cta_per_program():
    @tile.jit
    def copy(x):
        tile.language.store(x, 1)

    with pytest.raises(ArgumentError, match=re.escape(
            "copy: num_ctas=2 is supported for Gluon kernels, which use the cluster "
            "explicitly (docs/clusters.md); tile kernels here run one CTA per program")):
        copy[(1,)](np.zeros(1, np.int32), num_ctas=2)


def test_two_cta_barriers_are_refused_by_name():
    @gluon.jit
    def pair_barrier(out):
        bar = mbarrier.allocate_mbarrier(two_ctas=True)
        mbarrier.init(bar, count=1)

    with pytest.raises(CompilationError, match=re.escape(
            "mbarrier.allocate_mbarrier: two_ctas=True is not supported (no two-CTA "
            "(cta_group::2) barriers here); leave it at False")):
        gluon.compile(pair_barrier, signature={"out": "*fp32"}, num_ctas=2)


def test_a_warp_specialized_multicast_pipeline_with_multicast_releases():
    steps, bm, bk = 3, 64, 64
    a = np.random.default_rng(5).standard_normal((steps * bm, bk)).astype(np.float16)
    a_desc, _ = _descriptors(a, a, bm, bk, bk)
    out = np.zeros((2, 2, bm, bk), np.float32)  # [program, CTA]: every one sums all tiles
    ck.multicast_pipeline_kernel[(2,)](a_desc, out, steps, num_ctas=2)
    ref = a.astype(np.float32).reshape(steps, bm, bk).sum(0)
    np.testing.assert_allclose(out, np.broadcast_to(ref, out.shape), rtol=1e-6, atol=1e-6)
    ptx = gluon.compile(ck.multicast_pipeline_kernel, signature={"a_desc": a_desc, "out": "*fp32"},
                        constexprs={"STEPS": steps}, num_ctas=2).asm["ptx"]
    # The default warps and the worker warps (their path, before the hand-off) each pass the
    # top-level cluster barrier once.
    assert ptx.count("barrier.cluster.arrive.aligned;") == 2
    assert ptx.count("barrier.cluster.wait.aligned;") == 2
    # multicast_cta: one predicated remote arrival per CTA of the cluster.
    assert ptx.count("mbarrier.arrive.shared::cluster.b64 _, [remote], 1;") == 2


def test_cluster_barriers_the_worker_warps_cannot_mirror_are_refused():
    @gluon.jit
    def _part(x):
        cluster.barrier()

    @gluon.jit
    def _other(x):
        pass

    @gluon.jit
    def in_partition(x):
        gl.warp_specialize([(_part, (x,)), (_other, (x,))], [1], [24])

    @gluon.jit
    def in_a_loop(x, n):
        for i in range(n):
            cluster.barrier()
        gl.warp_specialize([(_other, (x,)), (_other, (x,))], [1], [24])

    @gluon.jit
    def after_two_calls(x):
        gl.warp_specialize([(_other, (x,)), (_other, (x,))], [1], [24])
        gl.warp_specialize([(_other, (x,)), (_other, (x,))], [1], [24])
        cluster.barrier()

    for kernel, signature, message in [
            (in_partition, {"x": "*i32"},
             "cluster.arrive inside a gl.warp_specialize partition is not supported: the "
             "cluster barrier waits for every thread of the cluster, the other partitions' "
             "warps included"),
            (in_a_loop, {"x": "*i32", "n": "i32"},
             "cluster.arrive before gl.warp_specialize must be at the kernel's top level, not "
             "inside a loop or branch: the worker warps repeat the top-level cluster barriers "
             "before the hand-off"),
            (after_two_calls, {"x": "*i32"},
             "cluster.arrive after gl.warp_specialize in a kernel with several "
             "gl.warp_specialize calls is not supported: the worker warps wait for the next "
             "call and never reach the cluster barrier")]:
        with pytest.raises(CompilationError, match=re.escape(message)):
            gluon.compile(kernel, signature=signature, num_ctas=2)


def test_layouts_that_split_a_tensor_across_ctas_are_refused():
    split = gl.BlockedLayout([1, 1], [32, 1], [4, 1], [1, 0], cga_layout=[[32, 0]])
    shared = gl.NVMMASharedLayout(128, 16, cga_layout=[[1, 0]])

    @gluon.jit
    def rows(out, L: gl.constexpr):
        x = gl.arange(0, 64, gl.SliceLayout(1, L))
        gl.store(out + x, x)

    @gluon.jit
    def buffer(out, L: gl.constexpr):
        smem = gl.allocate_shared_memory(gl.float16, [128, 64], L)

    with pytest.raises(CompilationError, match=re.escape(
            "splits the tensor across the CTAs of a cluster (cga_layout bases [[32]]), which "
            "is not supported: every CTA holds whole tensors here; give each CTA its part with "
            "cluster.cta_rank() (docs/clusters.md)")):
        rows[(1,)](np.zeros(64, np.int32), split, num_ctas=2)
    with pytest.raises(CompilationError, match=re.escape(
            "NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, cga_layout=[[1, "
            "0]]) spreads the tile over several CTAs; multi-CTA shared memory is not "
            "supported")):
        gluon.compile(buffer, signature={"out": "*fp16"}, constexprs={"L": shared},
                      num_ctas=2)


def test_a_multicast_of_a_4d_block_splits_its_first_dim_longer_than_one():
    # A [1, 1, 64, 64] block of a (B, H, N, D) tensor: its unit dims index the batch and the
    # head, so the CTAs split the 64 rows (32 each, the box recorded for the launch), and
    # every CTA receives the whole block. A block too short there is refused by its shape.
    from shared_codegen.ops.tma.multicast import slice_box, split_dim

    x = np.arange(2 * 3 * 128 * 64, dtype=np.float32).reshape(2, 3, 128, 64).astype(np.float16)
    layout = gl.NVMMASharedLayout(128, 16, rank=4)
    desc = TensorDescriptor.from_tensor(x, [1, 1, 64, 64], layout)
    out = np.zeros((2, 64, 64), np.float16)  # [CTA, rows, cols]

    @gluon.jit
    def load_block(desc, out, b, h, n0):
        smem = gl.allocate_shared_memory(desc.dtype, desc.block_shape, desc.layout)
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        cluster.barrier()
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_load(desc, [b, h, n0, 0], bar, smem, multicast=True)
        mbarrier.wait(bar, 0)
        cluster.barrier()
        blocked: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
        tile = smem.reshape([64, 64]).load(blocked)
        rows = gl.arange(0, 64, gl.SliceLayout(1, blocked))
        cols = gl.arange(0, 64, gl.SliceLayout(0, blocked))
        gl.store(out + cluster.cta_rank() * 4096 + rows[:, None] * 64 + cols[None, :], tile)

    load_block[(1,)](desc, out, 1, 2, 64, num_ctas=2)
    np.testing.assert_array_equal(out, np.broadcast_to(x[1, 2, 64:128], out.shape))
    assert split_dim([1, 1, 64, 64]) == 2 and split_dim([64, 64]) == 0
    assert slice_box(desc.type, 2) == [1, 1, 32, 64]
    short = TensorDescriptor.from_tensor(x, [1, 1, 8, 64], layout)
    with pytest.raises(CompilationError, match=re.escape(
            "tma.async_load: multicast=True gives each of the 2 CTAs 4 rows of the "
            "[1, 1, 8, 64] block, which does not start a whole 128-byte swizzle atom (8 "
            "rows); use a block of at least 16 rows")):
        load_block[(1,)](short, out, 0, 0, 0, num_ctas=2)
