"""Per-CTA resource limits of each target, and the checks that report a kernel over them.

A kernel over a limit fails at launch with a bare CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (or an
opaque cuFuncSetAttribute error); these checks say instead which kernel, which resource, how
much it needs and how much there is (`OutOfResources`). They run while compiling, against the
target's table below (so a compile-only target is checked too), and once more when a kernel
is loaded for a launch, against the device's own numbers (an sm_80 cubin may run on an sm_86
part, which has less shared memory).

Limits (CUDA C++ Programming Guide, "Technical Specifications per Compute Capability"):

    compute capability    7.0  7.5  8.0  8.6  8.7  8.9  9.0  10.x 11.0 12.x
    shared memory / CTA    96   64  163   99  163   99  227  227  227   99   KiB (opt-in)
    registers / CTA       64K on every one of them; at most 255 per thread
    tensor memory          512 columns x 128 lanes per CTA, sm_100 family only (PTX ISA
                           "Tensor Memory")
"""

from __future__ import annotations

from shared_codegen.errors import OutOfResources

KIB = 1024
# Maximum shared memory one CTA may opt into, by compute capability (major * 10 + minor).
_SHARED_BYTES_BY_ARCH = {
    70: 96 * KIB, 75: 64 * KIB,
    80: 163 * KIB, 86: 99 * KIB, 87: 163 * KIB, 89: 99 * KIB,
    90: 227 * KIB,
    100: 227 * KIB, 101: 227 * KIB, 103: 227 * KIB, 110: 227 * KIB,
    120: 99 * KIB, 121: 99 * KIB,
}
# When the target is unknown (the interpreter's "interpreter", a hand-built module): Hopper's.
DEFAULT_SHARED_BYTES = 227 * KIB

REGISTERS_PER_CTA = 64 * KIB
MAX_REGISTERS_PER_THREAD = 255
# Registers are given to warps in blocks of 256 (8 per thread), so a warp of 33-register
# threads holds 40 x 32 of them.
REGISTER_ALLOCATION_UNIT = 256
WARP_SIZE = 32


def shared_memory_limit(target: str) -> int:
    """The most shared memory (bytes) one CTA may use on `target` ('sm_90a' -> 232448)."""
    digits = "".join(c for c in target.removeprefix("sm_") if c.isdigit())
    if not target.startswith("sm_") or not digits:
        return DEFAULT_SHARED_BYTES
    return _SHARED_BYTES_BY_ARCH.get(int(digits), DEFAULT_SHARED_BYTES)


def check_shared_memory(kernel: str, required: int, limit: int, where: str,
                        detail: str = "") -> None:
    """OutOfResources when `required` bytes exceed `limit`; `where` ends the sentence
    ("kernel `k` needs 240000 bytes of shared memory, more than the 232448 " + where)."""
    if required > limit:
        raise OutOfResources(kernel, "shared memory", required, limit, "bytes", where, detail)


def check_target_shared_memory(kernel: str, required: int, target: str, detail: str = "") -> None:
    limit = shared_memory_limit(target)
    check_shared_memory(kernel, required, limit, f"bytes a CTA can have on {target}", detail)


def registers_per_cta(registers_per_thread: int, num_warps: int) -> int:
    """Registers a CTA of `num_warps` warps takes, with the per-warp allocation rounding."""
    per_warp = registers_per_thread * WARP_SIZE
    per_warp = -(-per_warp // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    return per_warp * num_warps


def check_registers(kernel: str, registers_per_thread: int, num_warps: int) -> None:
    """OutOfResources when the cubin's registers per thread, times the CTA's threads, do not
    fit one SM's register file (or a thread asks for more than 255)."""
    if registers_per_thread > MAX_REGISTERS_PER_THREAD:
        raise OutOfResources(kernel, "registers per thread", registers_per_thread,
                             MAX_REGISTERS_PER_THREAD, "registers", "a thread can have")
    total = registers_per_cta(registers_per_thread, num_warps)
    if total > REGISTERS_PER_CTA:
        raise OutOfResources(
            kernel, "registers", total, REGISTERS_PER_CTA, "registers",
            "an SM has for one CTA",
            f"{registers_per_thread} per thread x {num_warps * WARP_SIZE} threads, allocated "
            f"per warp in units of {REGISTER_ALLOCATION_UNIT}; use fewer warps or a smaller "
            f"block, or cap registers with SC_PTXAS_OPTS='--maxrregcount=N'")


__all__ = ["shared_memory_limit", "check_shared_memory", "check_target_shared_memory",
           "check_registers", "registers_per_cta", "DEFAULT_SHARED_BYTES", "REGISTERS_PER_CTA",
           "MAX_REGISTERS_PER_THREAD"]
