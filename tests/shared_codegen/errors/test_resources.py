"""Per-CTA resources over the limit are reported before any launch, with the numbers:
shared memory against the target's table, registers against the register file, tensor
memory against its 512 columns (tests/gluon/blackwell/test_tcgen05.py)."""

import pytest
from error_kernels import FILE, big_shared_kernel, line_of

import gluon
import tile
import tile.language as tl
from shared_codegen.lowering import backend, resources


def test_the_shared_memory_table_follows_the_cuda_guide():
    assert resources.shared_memory_limit("sm_90a") == 227 * 1024
    assert resources.shared_memory_limit("sm_100a") == 227 * 1024
    assert resources.shared_memory_limit("sm_80") == 163 * 1024
    assert resources.shared_memory_limit("sm_86") == 99 * 1024
    assert resources.shared_memory_limit("sm_120a") == 99 * 1024
    assert resources.shared_memory_limit("interpreter") == 227 * 1024


def test_shared_memory_over_the_hopper_limit_names_kernel_need_limit_and_allocation():
    with pytest.raises(tile.OutOfResources) as info:
        gluon.compile(big_shared_kernel, {"out_ptr": "*fp32"}, {"ROWS": 256}, target="sm_90a")
    assert str(info.value) == (
        f"kernel `big_shared_kernel` needs 262144 bytes of shared memory, more than the 232448 "
        f"bytes a CTA can have on sm_90a (allocations: 262144 B at "
        f"{FILE}:{line_of('# the big buffer')})")
    error = info.value
    assert (error.kernel, error.resource, error.required, error.limit) == (
        "big_shared_kernel", "shared memory", 262144, 232448)


def test_what_fits_hopper_can_be_too_much_for_ampere():
    # 128 x 256 + 64 x 256 fp32 = 196608 bytes: under sm_90a's 227 KiB, over sm_80's 163 KiB.
    with pytest.raises(gluon.OutOfResources) as info:
        gluon.compile(big_shared_kernel, {"out_ptr": "*fp32"}, {"ROWS": 128, "EXTRA": 64},
                      target="sm_80")
    assert str(info.value) == (
        f"kernel `big_shared_kernel` needs 196608 bytes of shared memory, more than the 166912 "
        f"bytes a CTA can have on sm_80 (allocations: 131072 B at "
        f"{FILE}:{line_of('# the big buffer')}, 65536 B at {FILE}:{line_of('# one more')})")


def test_registers_over_the_register_file_are_reported_with_the_arithmetic():
    with pytest.raises(tile.OutOfResources) as info:
        resources.check_registers("gemm", 200, 16)
    assert str(info.value) == (
        "kernel `gemm` needs 102400 registers, more than the 65536 an SM has for one CTA (200 "
        "per thread x 512 threads, allocated per warp in units of 256; use fewer warps or a "
        "smaller block, or cap registers with SC_PTXAS_OPTS='--maxrregcount=N')")
    # 128 per thread x 512 threads is exactly the register file; 129 rounds up past it.
    resources.check_registers("gemm", 128, 16)
    with pytest.raises(tile.OutOfResources, match="needs 69632 registers"):
        resources.check_registers("gemm", 129, 16)
    with pytest.raises(tile.OutOfResources, match="needs 256 registers per thread, more than "
                                                  "the 255 a thread can have"):
        resources.check_registers("gemm", 256, 1)


@tile.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def test_the_cubin_register_count_is_checked_while_compiling(monkeypatch):
    # ptxas fits its count to the launch bound (.maxntid); the check guards everything that
    # can loosen that (driver JIT, SC_PTXAS_OPTS), so simulate a cubin that did not fit.
    real = backend.parse_resource_usage

    def too_many(log):
        usage = real(log)
        return {name: type(u)(**{**u.__dict__, "registers": 168}) for name, u in usage.items()}

    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    kernel = tile.compile(copy_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 256},
                          target="sm_90a", num_warps=8)
    assert 0 < kernel.metadata["registers"] <= 255
    monkeypatch.setattr(backend, "parse_resource_usage", too_many)
    with pytest.raises(tile.OutOfResources, match=r"kernel `copy_kernel` needs 86016 registers, "
                                                  r"more than the 65536 an SM has for one CTA "
                                                  r"\(168 per thread x 512 threads"):
        tile.compile(copy_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 512},
                     target="sm_90a", num_warps=16)
