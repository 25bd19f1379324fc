"""Speed of kernel mode (compute_model kernels) against roofline mode, measured in the same run.

Qwen3-235B-A22B on a DGX H100 at TP 8 (alone and inside an 8,192-token iteration) and
Llama-3.1-70B at TP 4: TTFT over a 1000 x 1000 (T, K) grid in both modes, one scalar TTFT, and
kappa_crit over a grid of T. Every figure is printed with its ratio to roofline mode.

Targets (issue 20, item 7): the 1e6-point TTFT grid in kernel mode within 5x of roofline mode,
a scalar kernel-mode TTFT under 100 us, kappa_crit grids vectorized (one call for a grid of T).

Run: python benchmarks/bench_kernels.py [--quick]   (--quick: fewer repeats)
"""

from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np
from bench_grid import best_of  # benchmarks/ is on the path when run as a script

import kvroof
from kvroof.cost.deployment import Deployment


def report(name: str, dep: Deployment, repeats: int) -> list[str]:
    kernel = dataclasses.replace(dep, compute_model="kernels")
    t = np.geomspace(1, 8192, 1000)[:, None]
    k = np.geomspace(1, 2e6, 1000)[None, :]
    kvroof.ttft(kernel, t, k)  # build the kernel model (table reads) outside the timing
    grid_roof = best_of(repeats, lambda: kvroof.ttft(dep, t, k))
    grid_kern = best_of(repeats, lambda: kvroof.ttft(kernel, t, k))
    calls = 2000

    def scalars(d: Deployment) -> float:
        start = time.perf_counter()
        for i in range(calls):
            kvroof.ttft(d, 512.0 + (i & 7), 8192.0)
        return (time.perf_counter() - start) / calls

    scalar_roof = min(scalars(dep) for _ in range(repeats))
    scalar_kern = min(scalars(kernel) for _ in range(repeats))
    ts = np.geomspace(16, 8192, 200)
    kappa_roof = best_of(repeats, lambda: kvroof.kappa_crit(dep, ts))
    kappa_kern = best_of(repeats, lambda: kvroof.kappa_crit(kernel, ts))
    kappa_loop = best_of(1, lambda: [kvroof.kappa_crit(kernel, float(x)) for x in ts[:20]]) * 10
    return [
        f"{name}",
        f"  TTFT 1e6-point grid: roofline {grid_roof * 1e3:7.1f} ms, kernels "
        f"{grid_kern * 1e3:7.1f} ms  ratio {grid_kern / grid_roof:5.2f} (target <= 5)",
        f"  scalar TTFT:         roofline {scalar_roof * 1e6:7.1f} us, kernels "
        f"{scalar_kern * 1e6:7.1f} us  ratio {scalar_kern / scalar_roof:5.2f} "
        f"(target: kernels < 100 us)",
        f"  kappa_crit, 200 T:   roofline {kappa_roof * 1e3:7.1f} ms, kernels "
        f"{kappa_kern * 1e3:7.1f} ms  ratio {kappa_kern / kappa_roof:5.2f}; one call per T "
        f"would take {kappa_loop * 1e3:.0f} ms ({kappa_loop / kappa_kern:.0f}x the grid call)",
    ]


def main() -> None:
    quick = "--quick" in sys.argv
    repeats = 2 if quick else 5
    cases = {
        "Qwen3-235B-A22B, DGX H100, TP 8, alone": kvroof.deployment(
            "qwen3-235b-a22b", system="dgx-h100", tp=8, compute_model="roofline"),
        "Qwen3-235B-A22B, DGX H100, TP 8, 8,192-token iteration": kvroof.deployment(
            "qwen3-235b-a22b", system="dgx-h100", tp=8, iteration_tokens=8192,
            compute_model="roofline"),
        "Llama-3.1-70B, DGX H100, TP 4, alone": kvroof.deployment(
            "llama-3.1-70b", system="dgx-h100", tp=4, compute_model="roofline"),
        "gpt-oss-120b, two H100s, TP 2, alone": kvroof.deployment(
            "gpt-oss-120b", accelerator="h100", tp=2, compute_model="roofline"),
    }
    for name, dep in cases.items():
        for line in report(name, dep, repeats):
            print(line)


if __name__ == "__main__":
    main()
