"""Lowering: explicit-layout IR to LLVM IR (llvmlite), PTX (NVPTX) and cubin (nvJitLink)."""
