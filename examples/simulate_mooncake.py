"""Serve Mooncake's conversation trace on replicas of the seed paper's testbed and compare
schedulers and cache policies (kvroof's serving simulation, docs/simulate.md).

    python examples/simulate_mooncake.py [TRACE] [--replicas 4] [--bandwidth-source sustained]
                                         [--load-mode sync] [--time-scale 3]

Without TRACE it uses the first five minutes of the trace that ship with kvroof; give the whole
``conversation_trace.jsonl`` (github.com/kvcache-ai/Mooncake, FAST25-release/traces) for the
hour. Prints TTFT p50 / p99, TPOT p50, throughput, cache hits and mean GPU power per policy.
"""

from __future__ import annotations

import argparse
import itertools

import kvroof
from kvroof.simulate import SimSettings, prepare_trace, simulate
from kvroof.workload.requests import MOONCAKE_SLICE, load_requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", default=str(MOONCAKE_SLICE))
    parser.add_argument("--model", default="llama-3.1-70b")
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--bandwidth-source", default="peak", choices=("peak", "sustained"),
                        help="the testbed's PCIe Gen4 peak, or the paper's measured 15 GB/s")
    parser.add_argument("--load-mode", default="async", choices=("sync", "async", "layerwise"))
    parser.add_argument("--time-scale", type=float, default=1.0,
                        help="replay the trace this many times faster (more load)")
    args = parser.parse_args()

    trace = prepare_trace(load_requests(args.trace), time_scale=args.time_scale)
    dep = kvroof.deployment(args.model, system="paper-testbed", tp=8,
                            bandwidth_source=args.bandwidth_source)
    print(f"{trace.name}: {len(trace):,} requests, {args.time_scale:g}x the trace's rate; "
          f"{args.replicas} x {dep.short_label}, {args.bandwidth_source} link, "
          f"{args.load_mode} loads")
    header = ("scheduler", "cache", "TTFT p50", "TTFT p99", "TPOT p50", "req/s", "HBM hits",
              "host hits", "power")
    print("  ".join(f"{h:>17}" for h in header))
    for scheduler, policy in itertools.product(("fifo", "utilization-aware"),
                                               ("load", "recompute", "split")):
        settings = SimSettings(scheduler=scheduler, cache_policy=policy,  # type: ignore[arg-type]
                               load_mode=args.load_mode)
        s = simulate(trace, [dep] * args.replicas, settings).summary
        cells = (scheduler, policy, f"{s['ttft_s']['p50']:.3f} s", f"{s['ttft_s']['p99']:.3f} s",
                 f"{1e3 * s['tpot_s']['p50']:.1f} ms", f"{s['throughput_rps']:.2f}",
                 f"{100 * s['hit_rate_hbm']:.1f} %", f"{100 * s['hit_rate_host']:.1f} %",
                 f"{s['power_mean_w']:.0f} W")
        print("  ".join(f"{c:>17}" for c in cells))


if __name__ == "__main__":
    main()
