"""Issue 16, item 4 on the GPU: shared memory over the device's limit is refused before any
launch with the numbers; a kernel that fits runs; argument errors name kernel and argument."""

import os
import sys

import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "shared_codegen", "errors"))
from error_kernels import FILE, add_kernel, big_shared_kernel, line_of  # noqa: E402

import tile  # noqa: E402
from shared_codegen.runtime import driver  # noqa: E402


@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    return torch


def test_a_kernel_over_the_hopper_limit_is_refused_before_launch(torch):
    out = torch.empty(256, device="cuda", dtype=torch.float32)
    with pytest.raises(tile.OutOfResources) as info:
        big_shared_kernel[(1,)](out, ROWS=256)
    assert str(info.value).startswith(
        f"kernel `big_shared_kernel` needs 262144 bytes of shared memory, more than the 232448 "
        f"bytes a CTA can have on sm_90a (allocations: 262144 B at "
        f"{FILE}:{line_of('# the big buffer')}")
    # The process launches correctly afterwards, with 192 KiB (over 48 KiB: opted in).
    out.fill_(7.0)
    big_shared_kernel[(1,)](out, ROWS=128, EXTRA=64)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.zeros_like(out))


def test_the_device_limit_is_checked_when_the_kernel_is_loaded(torch):
    x = torch.ones(64, device="cuda")
    kernel = add_kernel.warmup(x, x, 64, BLOCK=64, grid=(1,))
    device = driver.get_device(torch.cuda.current_device())
    limit = device.max_shared_memory_per_block_optin
    with pytest.raises(tile.OutOfResources) as info:
        driver.set_dynamic_shared_memory(kernel.function(), limit + 1024,
                                         kernel_name="add_kernel")
    assert str(info.value) == (
        f"kernel `add_kernel` needs {limit + 1024} bytes of shared memory, more than the "
        f"{limit} bytes a CTA can have on {device.name} (device {device.index})")


def test_launch_argument_errors_on_the_gpu_name_kernel_and_argument(torch):
    x = torch.ones(64, device="cuda")
    with pytest.raises(tile.ArgumentError) as info:
        add_kernel[(1,)](x, "not a tensor", 64, BLOCK=64)
    assert str(info.value) == ("argument `out_ptr` of add_kernel: cannot pass str 'not a "
                               "tensor' to a kernel: expected a tensor, an int, a float, a "
                               "bool or None")
    with pytest.raises(TypeError, match=r"^add_kernel\(\) got multiple values for argument "
                                        r"'BLOCK'$"):
        add_kernel[(1,)](x, x, 64, 64, BLOCK=64)
