"""Launch the Hopper attention forward once per listed config, for a profiler to catch
(`ncu -k regex:attention_kernel -c <configs> python benchmarks/attention_profile_target.py
D:N:causal:dtype[:B=..][:H=..][:launcher_option=int...] ...`). Shapes default to those of
attention_vs_sdpa.py (B*N = 16k tokens, H*D = 2048). Each config is compiled before its
launch, so the profiled launch is the real kernel.

    --time        also time each config (CUDA events, median of 10) and print TFLOP/s
    --ptx DIR     write the PTX of every compiled variant to DIR (to diff and assemble)
    --report      print how each compiled variant was loaded (driver JIT or nvJitLink's
                  cubin) and its registers and local memory (spills) per thread
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
for p in (os.path.join(HERE, "..", "examples", "flash_attention"),
          os.path.join(HERE, "..", "examples"), os.path.join(HERE, "..")):
    sys.path.insert(0, p)


def _median_ms(torch, fn, reps=10):
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def config_inputs(torch, spec):
    """q, k, v (random, on the GPU), causal and the launcher options of a config
    `D:N:causal:dtype[:B=..][:H=..][:launcher_option=int...]` (B * N = 16k tokens and
    H * D = 2048 unless given)."""
    D, N, causal, dtype, *opts = spec.split(":")
    D, N, causal = int(D), int(N), bool(int(causal))
    kw = {a: int(b) for a, b in (o.split("=") for o in opts)}
    B, H = kw.pop("B", 16384 // N), kw.pop("H", 2048 // D)
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}[dtype]
    q, k, v = (torch.randn((B, H, N, D), device="cuda").to(tdt) for _ in range(3))
    return q, k, v, causal, kw


def main(argv):
    import torch
    from hopper import attention_kernel, attention_launcher
    timing = "--time" in argv
    ptx_dir = argv[argv.index("--ptx") + 1] if "--ptx" in argv else None
    specs = [a for i, a in enumerate(argv) if not a.startswith("--")
             and (i == 0 or argv[i - 1] != "--ptx")]
    for spec in specs:
        q, k, v, causal, kw = config_inputs(torch, spec)
        B, H, N, D = q.shape
        run = attention_launcher(q, k, v, causal=causal, **kw)
        run()
        torch.cuda.synchronize()
        line = f"launched {spec} (B={B}, H={H})"
        if timing:
            ms = _median_ms(torch, run)
            flop = 4.0 * B * H * N * N * D / (2 if causal else 1)
            line += f": {ms:.3f} ms, {flop / ms / 1e9:.1f} TFLOP/s"
        print(line, flush=True)
    variants = [v for v in attention_kernel._variants.values()]
    if "--report" in argv:
        from shared_codegen.runtime.driver import function_attribute
        for i, v in enumerate(variants):
            regs, local = (function_attribute(v.function, f"CU_FUNC_ATTRIBUTE_{a}")
                           for a in ("NUM_REGS", "LOCAL_SIZE_BYTES"))
            print(f"variant {i}: driver JIT {v.kernel.metadata['driver_jit']}, {regs} "
                  f"registers at entry, {local} bytes of local memory per thread", flush=True)
    if ptx_dir:
        os.makedirs(ptx_dir, exist_ok=True)
        for i, v in enumerate(variants):
            with open(os.path.join(ptx_dir, f"variant{i}.ptx"), "w") as f:
                f.write(v.kernel.asm["ptx"])


if __name__ == "__main__":
    main(sys.argv[1:])
