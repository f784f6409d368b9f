"""`tile.profiler`: Triton 3.6's `triton.profiler` names that kernels use (`language`)."""
