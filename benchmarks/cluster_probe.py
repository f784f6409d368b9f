"""The Hopper attention forward with and without `cluster=2` at several program counts
(D = 128, N = 16k, fp16, 16 heads): whether every cluster is resident at once (time falls
linearly up to 66 clusters on 132 SMs) and what one cluster delivers against one CTA.

    PYTHONPATH=. python3 benchmarks/cluster_probe.py

Configs are timed interleaved in shuffled rounds (`_bench.interleaved_medians`); the numbers
below came from an earlier form that timed each config in turn, 10 calls each.
(2026-12-06, H100: with remote arrivals at cluster scope, 66 clusters of two CTAs ran as
fast as 66 single CTAs, 359 against 334 TFLOP/s: ptxas put a MEMBAR.ALL.GPU before each of
the four remote releases a block. At CTA scope, 631 against 639 for 132 single CTAs.)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples", "flash_attention"))
sys.path.insert(0, os.path.join(HERE, ".."))


def main() -> int:
    from _bench import gpu_torch, interleaved_medians
    torch = gpu_torch("cluster_probe.py")
    if torch is None:
        return 0
    from hopper import attention_launcher
    B, H, N, D = 1, 16, 16384, 128
    q, k, v = (torch.randn((B, H, N, D), device="cuda").half() for _ in range(3))
    flops = 4 * B * H * N * N * D
    fns = {(cluster, programs): attention_launcher(q, k, v, cluster=cluster,
                                                   num_programs=programs)
           for cluster, programs in [(1, 132), (1, 66), (2, 66), (2, 60), (2, 50), (2, 33),
                                     (2, 16)]}
    for (cluster, programs), ms in interleaved_medians(fns, 5, torch).items():
        print(f"cluster={cluster} programs={programs}: {ms:.3f} ms "
              f"{flops / ms / 1e9:.0f} TFLOP/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
