"""The runtime: CUDA driver access, argument specialization, the launcher, the compile cache."""
