"""Launch overhead of a small 4-argument kernel, in microseconds per launch, measured in one
process with the methods interleaved (the H100's clock drifts under load, so rounds alternate):

    ours        `k[(1,)](x, y, out, n)` through the tile JIT (specialize, cache hit, bind, launch)
    binder      our launcher alone: Binder.launch on a precompiled function
    triton      the same kernel through Triton 3.6's JIT, if triton is importable
    torch add   `torch.add(x, y, out=out)` on a small tensor
    raw         cuLaunchKernel with arguments packed once, outside the loop (the floor)

Run on the GPU machine: `python benchmarks/launch_overhead.py [--launches 5000 --rounds 7]`.
Without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

N_ELEMENTS = 128

# The elementwise add for the "raw" and "binder" rows, as LLVM IR so those rows need neither
# the JIT nor Triton: out[i] = x[i] + y[i] for i = threadIdx.x < n.
ADD_KERNEL_LLVM_IR = """
define ptx_kernel void @add_kernel(ptr addrspace(1) %x, ptr addrspace(1) %y,
                                   ptr addrspace(1) %out, i32 %n) {
entry:
  %i = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %inside = icmp slt i32 %i, %n
  br i1 %inside, label %body, label %done
body:
  %px = getelementptr float, ptr addrspace(1) %x, i32 %i
  %py = getelementptr float, ptr addrspace(1) %y, i32 %i
  %po = getelementptr float, ptr addrspace(1) %out, i32 %i
  %vx = load float, ptr addrspace(1) %px
  %vy = load float, ptr addrspace(1) %py
  %sum = fadd float %vx, %vy
  store float %sum, ptr addrspace(1) %po
  br label %done
done:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
"""

tl = None  # tile.language, bound by _ours() before the kernel is compiled
ttl = None  # triton.language, bound by _triton()


def k(x, y, out, n):
    offsets = tl.program_id(0) * 128 + tl.arange(0, 128)
    mask = offsets < n
    total = tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask)
    tl.store(out + offsets, total, mask=mask)


def k_triton(x, y, out, n):
    offsets = ttl.program_id(0) * 128 + ttl.arange(0, 128)
    mask = offsets < n
    total = ttl.load(x + offsets, mask=mask) + ttl.load(y + offsets, mask=mask)
    ttl.store(out + offsets, total, mask=mask)


def _ours(x, y, out, n):
    global tl
    from tile import jit  # lazy: the JIT is the lead's, and only needed here
    import tile.language

    tl = tile.language
    kernel = jit(k)
    return lambda: kernel[(1,)](x, y, out, n)


def _triton(x, y, out, n):
    global ttl
    import triton
    import triton.language

    ttl = triton.language
    kernel = triton.jit(k_triton)
    return lambda: kernel[(1,)](x, y, out, n)


def _compiled_add_function():
    from shared_codegen.lowering import backend
    from shared_codegen.runtime import driver

    target = driver.target_from_device(driver.current_device_index())
    cubin, _ = backend.ptx_to_cubin(backend.llvm_to_ptx(ADD_KERNEL_LLVM_IR, target), target)
    return driver.get_function(driver.load_module(cubin), "add_kernel")


def _binder(x, y, out, n):
    from shared_codegen.runtime.launcher import current_stream, get_binder

    function = _compiled_add_function()
    binder = get_binder(("ptr", "ptr", "ptr", "i32"))
    grid, args = (1,), (x, y, out, n)
    return lambda: binder.launch(function, grid, 4, 0, current_stream(), args)


def _raw(x, y, out, n):
    from cuda.bindings import driver as cuda
    from shared_codegen.runtime.launcher import current_stream

    function = _compiled_add_function()
    values = [ctypes.c_uint64(x.data_ptr()), ctypes.c_uint64(y.data_ptr()),
              ctypes.c_uint64(out.data_ptr()), ctypes.c_int32(n)]
    pointers = (ctypes.c_void_p * 4)(*[ctypes.addressof(value) for value in values])
    params, stream = ctypes.addressof(pointers), current_stream()
    launch = cuda.cuLaunchKernel

    # The default argument keeps the slots and the pointer array alive, at no per-call cost:
    # `params` is only an address, so without it `pointers` would be freed under the driver.
    def run(_slots=(values, pointers)):
        return launch(function, 1, 1, 1, 128, 1, 1, 0, stream, params, 0)
    return run


def _torch_add(x, y, out, n):
    import torch

    return lambda: torch.add(x, y, out=out)


METHODS = {"ours": _ours, "binder": _binder, "triton": _triton, "torch add": _torch_add,
           "raw": _raw}


def _time_batch(launch, launches: int, synchronize) -> float:
    synchronize()
    start = time.perf_counter()
    for _ in range(launches):
        launch()
    synchronize()
    return (time.perf_counter() - start) / launches * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=5000, help="launches per timed batch")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds per method")
    options = parser.parse_args(argv)

    from shared_codegen.runtime.driver import has_gpu

    if not has_gpu():
        print("launch_overhead: needs a GPU (no CUDA driver or device here); nothing measured.")
        return 0
    try:
        import torch
    except ImportError:
        print("launch_overhead: needs torch for the tensors; nothing measured.")
        return 0

    x, y = torch.randn(N_ELEMENTS, device="cuda"), torch.randn(N_ELEMENTS, device="cuda")
    out = torch.empty_like(x)
    expected = x + y
    launches = {}
    for name, make in METHODS.items():
        try:
            launch = make(x, y, out, N_ELEMENTS)
            out.zero_()
            launch()  # compiles, and checks the result once
            torch.cuda.synchronize()
            torch.testing.assert_close(out, expected)
            launches[name] = launch
        except Exception as exc:  # one missing method must not hide the others
            print(f"{name:>10}: unavailable ({type(exc).__name__}: {exc})")

    samples = {name: [] for name in launches}
    for _ in range(options.rounds):
        for name, launch in launches.items():
            samples[name].append(_time_batch(launch, options.launches, torch.cuda.synchronize))

    device = torch.cuda.get_device_name()
    print(f"launch overhead, {device}, {datetime.date.today()}, median of {options.rounds} "
          f"rounds x {options.launches} launches (us per launch)")
    floor = statistics.median(samples["raw"]) if "raw" in samples else None
    for name, values in samples.items():
        median = statistics.median(values)
        ratio = f"  {median / floor:.2f}x raw" if floor else ""
        print(f"{name:>10}: {median:7.2f} us  (min {min(values):.2f}){ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
