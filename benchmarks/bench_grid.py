"""Throughput of the cost model on a 1000 x 1000 grid, and the time of `import kvroof`.

Targets (issue 3): at least 1e7 (T, K) points per second on one core for TTFT and kappa_crit;
`import kvroof` under 0.2 s in a fresh interpreter. Run: python benchmarks/bench_grid.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

import kvroof


def best_of(repeats: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    n = 1000
    t = np.geomspace(1, 8192, n)[:, None]
    k = np.geomspace(1, 262_144, n)[None, :]
    bandwidth = np.geomspace(1e9, 1e12, n)[None, :]
    cases = {
        "ttft serial, Qwen3-235B (GQA MoE)": ("qwen3-235b-a22b", "serial"),
        "ttft layerwise, DeepSeek-V3 (MLA)": ("deepseek-v3", "layerwise"),
        "ttft layerwise, gpt-oss-120b (sliding)": ("gpt-oss-120b", "layerwise"),
    }
    for label, (model, overlap) in cases.items():
        dep = kvroof.deployment(model, system="dgx-h100", tp=8)
        seconds = best_of(5, lambda dep=dep, overlap=overlap: kvroof.ttft(dep, t, k, overlap))
        print(f"{label:42s} {n * n / seconds:12.3g} points/s  ({seconds * 1e3:.0f} ms / 1e6)")
    dep = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, bandwidth=bandwidth)
    seconds = best_of(5, lambda: kvroof.kappa_crit(dep, t))
    print(f"{'kappa_crit closed form, T x bandwidth':42s} {n * n / seconds:12.3g} points/s  "
          f"({seconds * 1e3:.0f} ms / 1e6)")
    small = np.geomspace(1, 8192, 100)[:, None]
    dep = kvroof.deployment("gpt-oss-120b", system="dgx-h100", tp=8,
                            bandwidth=np.geomspace(1e9, 1e12, 100)[None, :])
    seconds = best_of(3, lambda: kvroof.kappa_crit(dep, small))
    print(f"{'kappa_crit root finding (100 x 100)':42s} {100 * 100 / seconds:12.3g} points/s  "
          f"({seconds * 1e3:.0f} ms / 1e4)")
    imports = []
    for _ in range(7):
        out = subprocess.run(
            [sys.executable, "-c",
             "import time; s = time.perf_counter(); import kvroof; "
             "print(time.perf_counter() - s)"],
            capture_output=True, text=True, check=True,
        ).stdout
        imports.append(float(out))
    print(f"{'import kvroof (fresh interpreter)':42s} median {statistics.median(imports) * 1e3:.1f}"
          f" ms, max {max(imports) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
