"""How far past the mean the attention grids end: the backward's in a list-scheduling model
of the hardware's CTA dispatch (each tile, in grid order, goes to the SM that frees first),
the causal forward's (`--forward`) in its persistent programs' static assignment.

    python3 benchmarks/attention_bwd_tail_model.py [--sms 132] [--tokens 16384] [--heads 16]
    python3 benchmarks/attention_bwd_tail_model.py --forward

A causal tile (128 keys of one head) runs N/64 - 2j query blocks for key block j, plus a
fixed cost (`--overhead`, in query blocks: K/V's load and the dK/dV epilogue); the model
compares hopper_bwd's head-major order, `lpt_tail` (the last 3 x cdiv(SMs, key blocks a
head) heads key block by key block, longest first) and the whole grid longest first, at
B x N = `--tokens` tokens. Non-causal tiles are all alike: 2048 of them on 132 SMs end at
16 tiles' time for 15.5 on average, 3.2% past the mean, which `split_tail` removes.

The causal forward's tiles are 128 query rows; tile m runs m + 1 key blocks (plus the
overhead), sorted longest first across heads, and persistent program p takes tiles
p, p + G, ... (G = SMs): the p-th longest of every wave. `snake` alternates the direction
from wave to wave (gluon/stream_k.py); "dynamic" is the list schedule, for comparison.
"""

from __future__ import annotations

import argparse
import heapq


def makespan(order, length, sms: int) -> float:
    free = [0.0] * sms
    for tile in order:
        heapq.heappush(free, heapq.heappop(free) + length[tile])
    return max(free)


def static_makespan(order, length, sms: int, snake: bool) -> float:
    load = [0.0] * sms
    for i, tile in enumerate(order):
        wave, p = divmod(i, sms)
        load[sms - 1 - p if snake and wave % 2 else p] += length[tile]
    return max(load)


def forward(args) -> None:
    print(f"{'N':>6s} {'static':>8s} {'snake':>8s} {'dynamic':>8s}  (causal forward, end / mean)")
    for n in map(int, args.ns.split(",")):
        heads = args.heads * (args.tokens // n)
        tiles = n // 128
        length = {(h, m): m + 1 + args.overhead for h in range(heads) for m in range(tiles)}
        mean = sum(length.values()) / args.sms
        order = [(h, tiles - 1 - k) for k in range(tiles) for h in range(heads)]
        print(f"{n:6d} {static_makespan(order, length, args.sms, False) / mean:8.4f} "
              f"{static_makespan(order, length, args.sms, True) / mean:8.4f} "
              f"{makespan(order, length, args.sms) / mean:8.4f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--overhead", type=float, default=1.5)
    ap.add_argument("--ns", default="1024,2048,4096,8192,16384")
    ap.add_argument("--forward", action="store_true", help="the causal forward's schedule")
    args = ap.parse_args(argv)
    if args.forward:
        forward(args)
        return 0
    print(f"{'N':>6s} {'head-major':>10s} {'lpt_tail':>9s} {'all LPT':>8s}  (end / mean)")
    for n in map(int, args.ns.split(",")):
        heads = args.heads * (args.tokens // n)
        blocks = n // 128
        length = {(h, j): n // 64 - 2 * j + args.overhead
                  for h in range(heads) for j in range(blocks)}
        mean = sum(length.values()) / args.sms
        lpt = min(heads, 3 * -(-args.sms // blocks))
        head_major = [(h, j) for h in range(heads) for j in range(blocks)]
        tail = [(h, j) for h in range(heads - lpt) for j in range(blocks)] + \
            [(h, j) for j in range(blocks) for h in range(heads - lpt, heads)]
        longest = sorted(length, key=lambda t: -length[t])
        print(f"{n:6d} " + " ".join(f"{makespan(o, length, args.sms) / mean:{w}.4f}" for o, w in
                                    ((head_major, 10), (tail, 9), (longest, 8))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
