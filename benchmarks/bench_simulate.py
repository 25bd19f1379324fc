"""Speed and memory of the serving simulation on Mooncake's one-hour conversation trace.

    python benchmarks/bench_simulate.py [--trace PATH] [--model llama-3.1-70b] [--skip-slow]

Each measurement runs in a fresh Python process (``resource.getrusage`` gives its peak resident
set size; imports are included) on one core; CPU time (``time.process_time``) is printed beside
wall time, as a busy machine stretches the wall time:

1. the whole trace (12,031 requests, one hour) on 4 replicas of the seed paper's testbed
   (8x H100 SXM, PCIe Gen4, TP 8), default settings: wall time, simulated seconds per wall
   second, peak memory; the goal is at least 200x real time (under 18 s) in under 500 MB;
2. the same in kernel mode (``compute_model kernels``: every iteration timed op by op from the
   kernel tables, decode runs fast-forwarded as arrays over their steps): its cost against the
   roofline's (the target: within a few times), and with fast-forwarding off;
3. the same with fast-forwarding off (every decode iteration stepped): what fast-forwarding
   gains;
4. 1x, 4x and 16x the trace: ``k`` copies of it, each ``k`` times faster (so the copies fill the
   same hour, back to back), on ``4 k`` replicas (the load per replica stays the same): wall
   time per event (an arrival, a stepped iteration or a fast-forwarded run) should stay flat
   (cost linear in the work); per request it also depends on how the copies' requests share
   prefixes across more replicas (fewer cache hits leave more prefill iterations to step).

The trace is not part of kvroof (the package ships its first five minutes); give its path with
``--trace`` (default: ``../shared/data/mooncake/conversation_trace.jsonl`` beside the
repository). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "data" / "mooncake" / \
    "conversation_trace.jsonl"

_CHILD = r"""
import json, resource, sys, time
start = time.perf_counter()
import numpy as np
import kvroof
from kvroof.simulate import SimSettings, simulate
from kvroof.workload.requests import load_requests
path, model, copies, fast = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
compute_model = sys.argv[5]
trace = load_requests(path)
hour = float(trace.arrival_time.max())
if copies > 1:
    trace = trace.with_arrivals(trace.arrival_time / copies).repeat(copies, hour / copies)
dep = kvroof.deployment(model, system="paper-testbed", tp=8, compute_model=compute_model)
loaded = time.perf_counter()
cpu = time.process_time()
result = simulate(trace, [dep] * (4 * copies), SimSettings(fast_forward=fast))
done = time.perf_counter()
cpu = time.process_time() - cpu
s = result.summary
print(json.dumps({
    "requests": s["requests"], "makespan_s": s["makespan_s"], "load_s": loaded - start,
    "simulate_s": done - loaded, "cpu_s": cpu, "total_s": done - start,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "iterations": s["iterations"], "stepped": s["stepped_iterations"],
    "runs": s["fast_forward_runs"], "forwarded": s["fast_forwarded_iterations"],
    "ttft_p50": s["ttft_s"]["p50"], "ttft_p99": s["ttft_s"]["p99"],
}))
"""


def _run(path: Path, model: str, copies: int, fast: bool,
         compute_model: str = "roofline") -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(path), model, str(copies),
                          "1" if fast else "0", compute_model], check=True, capture_output=True,
                         text=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--model", default="llama-3.1-70b")
    parser.add_argument("--skip-slow", action="store_true",
                        help="leave out the run without fast-forwarding and the 16x trace")
    args = parser.parse_args()
    if not args.trace.is_file():
        sys.exit(f"{args.trace}: no such file (give the Mooncake trace with --trace)")
    base = _run(args.trace, args.model, 1, True)
    speed = base["makespan_s"] / base["simulate_s"]
    print(f"full trace: {base['requests']:,} requests, {base['makespan_s']:,.0f} s simulated on "
          f"4 replicas of the paper testbed ({args.model}, TP 8)")
    print(f"  simulate {base['simulate_s']:.2f} s ({speed:,.0f}x real time; CPU time "
          f"{base['cpu_s']:.2f} s), {base['total_s']:.2f} s with imports and loading; peak RSS "
          f"{base['peak_rss_mb']:.0f} MB")
    print(f"  {base['iterations']:,} iterations: {base['stepped']:,} stepped, "
          f"{base['forwarded']:,} in {base['runs']:,} fast-forwarded runs; TTFT p50 "
          f"{base['ttft_p50']:.3g} s, p99 {base['ttft_p99']:.3g} s")
    kernels = _run(args.trace, args.model, 1, True, "kernels")
    print(f"  kernel mode (compute_model kernels: every iteration op by op from the kernel "
          f"tables): simulate {kernels['simulate_s']:.2f} s, CPU {kernels['cpu_s']:.2f} s "
          f"({kernels['cpu_s'] / base['cpu_s']:.1f}x the roofline's CPU time; "
          f"{kernels['makespan_s'] / kernels['simulate_s']:,.0f}x real time), peak RSS "
          f"{kernels['peak_rss_mb']:.0f} MB; {kernels['stepped']:,} stepped, "
          f"{kernels['forwarded']:,} in {kernels['runs']:,} runs; TTFT p50 "
          f"{kernels['ttft_p50']:.3g} s, p99 {kernels['ttft_p99']:.3g} s")
    if not args.skip_slow:
        slow_kernels = _run(args.trace, args.model, 1, False, "kernels")
        ratio = slow_kernels["cpu_s"] / kernels["cpu_s"]
        print(f"  kernel mode without fast-forwarding: simulate "
              f"{slow_kernels['simulate_s']:.2f} s, CPU {slow_kernels['cpu_s']:.2f} s "
              f"({ratio:.1f}x the CPU time); same TTFT p50 {slow_kernels['ttft_p50']:.3g} s")
        slow = _run(args.trace, args.model, 1, False)
        print(f"  without fast-forwarding: simulate {slow['simulate_s']:.2f} s, CPU "
              f"{slow['cpu_s']:.2f} s ({slow['cpu_s'] / base['cpu_s']:.1f}x the CPU time), "
              "peak RSS "
              f"{slow['peak_rss_mb']:.0f} MB; same TTFT p50 {slow['ttft_p50']:.3g} s")
    print("scaling (k copies, k times faster, on 4k replicas):")
    for copies in (1, 4) if args.skip_slow else (1, 4, 16):
        run = base if copies == 1 else _run(args.trace, args.model, copies, True)
        per = run["cpu_s"] / run["requests"] * 1e6
        events = run["requests"] + run["stepped"] + run["runs"]
        print(f"  {copies:>2}x: {run['requests']:>7,} requests in {run['simulate_s']:6.2f} s "
              f"(CPU {run['cpu_s']:6.2f} s, {per:4.0f} us per request, "
              f"{run['cpu_s'] / events * 1e6:3.0f} us per event), peak RSS "
              f"{run['peak_rss_mb']:.0f} MB; {run['stepped'] / run['requests']:.2f} stepped "
              f"iterations and {run['runs'] / run['requests']:.2f} runs per request")


if __name__ == "__main__":
    main()
