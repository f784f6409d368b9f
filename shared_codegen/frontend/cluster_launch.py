"""Launch options for thread-block clusters: Triton's `num_ctas` (one program per cluster of
that many CTAs, the kernel using the cluster through `gl.nvidia.hopper.cluster`, TMA
multicast and remote mbarrier arrivals) and the grid CUDA sees for it. docs/clusters.md."""

from __future__ import annotations

from shared_codegen.errors import ArgumentError

# Thread-block clusters (CUDA guide, "Thread Block Clusters"; sm_90+): at most 8 CTAs is the
# portable size.
MAX_CLUSTER_CTAS = 8


def check_num_ctas(jit_fn, num_ctas, cluster_dims) -> int:
    """The launch's `num_ctas`, checked: a power of two up to the portable cluster size, for
    Gluon kernels, and not together with `cluster_dims` (which clusters independent
    programs)."""
    name = jit_fn.__name__
    if isinstance(num_ctas, bool) or not isinstance(num_ctas, int) or num_ctas < 1 \
            or num_ctas & (num_ctas - 1) or num_ctas > MAX_CLUSTER_CTAS:
        raise ArgumentError(f"{name}: num_ctas must be a power of two from 1 to "
                            f"{MAX_CLUSTER_CTAS} (the portable cluster size), got {num_ctas!r}")
    if num_ctas == 1:
        return 1
    if cluster_dims is not None:
        raise ArgumentError(f"{name}: num_ctas={num_ctas} and cluster_dims={cluster_dims!r} "
                            f"both set the cluster shape; num_ctas makes each program one "
                            f"cluster, cluster_dims groups independent programs: pass one")
    if getattr(jit_fn.language, "name", "") != "gluon":
        # Triton's tile kernels with num_ctas > 1 split their tensors across the cluster
        # (CGA layouts); ours have no CTA split, so every CTA would redo the same work.
        raise ArgumentError(f"{name}: num_ctas={num_ctas} is supported for Gluon kernels, "
                            f"which use the cluster explicitly (docs/clusters.md); tile "
                            f"kernels here run one CTA per program")
    return num_ctas


def cluster_grid(grid, num_ctas: int) -> tuple:
    """CUDA's grid for a launch of `grid` programs of `num_ctas` CTAs each: the clusters lie
    along x, so `%clusterid` is the program id."""
    grid = tuple(grid) + (1,) * (3 - len(grid))
    return (grid[0] * num_ctas, grid[1], grid[2])


__all__ = ["check_num_ctas", "cluster_grid", "MAX_CLUSTER_CTAS"]
