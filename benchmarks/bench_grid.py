"""Speed and memory of the cost model against its numpy floor, measured in the same run.

The floor is a hand-written numpy expression of the same formula on the same arrays, with the
deployment's constants taken as given (what any implementation must at least compute): serial
TTFT of Qwen3-235B-A22B on a DGX H100 at TP 8 over a T x K grid, and full-mode kappa_crit over a
T x link-bandwidth grid (the closed form over the FLOP and HBM roofs and the host-to-device,
device-to-host and host-DRAM paths). Every figure is printed as a ratio to its floor.

Targets (issue 12): TTFT and kappa_crit over 1e6 and 1e7 points within 2x of the floor, at most
40 bytes held per point by a TTFT result, a scalar ttft call under 20 us, `kvroof --help` and
`kvroof kappa ...` under 0.3 s wall in a fresh process.

Run: python benchmarks/bench_grid.py [--quick]   (--quick skips the 1e7 grids)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import kvroof
from kvroof.cost.deployment import Deployment


def best_of(repeats: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def ttft_floor(dep: Deployment, t: Any, k: Any) -> Any:
    """Serial TTFT by hand: FLOPs, weights touched, KV reads, all-reduce, load + write-back."""
    c = dep.terms
    f = c.flops
    flops = f.per_token * t + f.pair_full * (t * k + t * (t + 1) / 2) + f.lm_head
    weights = c.weights_always + c.weights_routed * (1 - c.expert_miss ** t)
    hbm = (weights + c.read.per_token * (k + t)) / c.hbm_rate
    compute = np.maximum(flops / (c.peak_rate * c.efficiency), hbm) + (
        c.comm_latency + c.comm_per_token * t)
    load = c.load.per_token * k
    save = c.save.per_token * t
    data = np.maximum(np.maximum(load / c.h2d, save / c.d2h), (load + save) / c.dram)
    return data + c.copies.per_token * (k + t) * c.latency + compute


def kappa_floor(dep: Deployment, t: Any) -> Any:
    """kappa_crit by hand: the crossover of the three link paths with the two compute roofs."""
    c = dep.terms
    f = c.flops
    rate = c.peak_rate * c.efficiency
    comm = c.comm_latency + c.comm_per_token * t
    kv = c.read.per_token
    weights = c.weights_always + c.weights_routed * (1 - c.expert_miss ** t)
    roofs = [((f.per_token * t + f.pair_full * t * (t + 1) / 2 + f.lm_head) / rate + comm,
              f.pair_full * t / rate),
             ((weights + kv * t) / c.hbm_rate + comm, kv / c.hbm_rate + 0 * t)]
    per_token = c.load.per_token
    latency = c.copies.per_token * c.latency
    save = per_token * t
    paths = [(latency * t, per_token / c.h2d + latency),
             (save / c.d2h + latency * t, latency + 0 * c.h2d),
             (save / c.dram + latency * t, per_token / c.dram + latency)]
    k_star: Any = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        for ci, si in roofs:
            upper: Any = np.inf
            lower: Any = -np.inf
            for aj, bj in paths:
                gap, head = bj - si, ci - aj
                ratio = head / gap
                upper = np.minimum(upper, np.where(gap > 0, ratio, np.inf))
                lower = np.maximum(lower, np.where(gap < 0, ratio, -np.inf))
            k_star = np.maximum(k_star, np.where(np.isinf(upper), np.inf,
                                                 np.where(lower >= upper, 0.0, upper)))
    return k_star / t


def grid_case(n: int, dep: Deployment) -> None:
    t = np.geomspace(1, 8192, n)[:, None]
    k = np.geomspace(1, 262_144, n)[None, :]
    fast = kvroof.ttft(dep, t, k)
    floor = ttft_floor(dep, t, k)
    assert np.allclose(fast.ttft, floor, rtol=1e-9), "the floor must compute the same thing"
    ours = best_of(3, lambda: kvroof.ttft(dep, t, k))
    base = best_of(3, lambda: ttft_floor(dep, t, k))
    print(f"ttft serial, {n * n:.0e} points: {ours * 1e3:8.1f} ms, floor {base * 1e3:8.1f} ms, "
          f"ratio {ours / base:5.2f}")
    tracemalloc.start()
    held = kvroof.ttft(dep, t, k)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del held
    print(f"  TTFT result holds {current / (n * n):.1f} bytes per point")
    bandwidth = np.geomspace(5e9, 5e11, n)[None, :]
    swept = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, bandwidth=bandwidth,
                              compute_model="roofline")
    got = np.asarray(kvroof.kappa_crit(swept, t).kappa_crit)
    want = kappa_floor(swept, t)
    assert np.allclose(got, want, rtol=1e-6, equal_nan=True), "the floor must agree"
    ours = best_of(3, lambda: kvroof.kappa_crit(swept, t))
    base = best_of(3, lambda: kappa_floor(swept, t))
    print(f"kappa_crit, {n * n:.0e} points:   {ours * 1e3:8.1f} ms, floor {base * 1e3:8.1f} ms, "
          f"ratio {ours / base:5.2f}")


def scalar_case(dep: Deployment) -> None:
    calls = 20_000
    ours = best_of(3, lambda: [kvroof.ttft(dep, 128, 16384) for _ in range(calls)]) / calls
    t, k = np.float64(128.0), np.float64(16384.0)
    base = best_of(3, lambda: [ttft_floor(dep, t, k) for _ in range(calls)]) / calls
    print(f"ttft scalar call: {ours * 1e6:6.2f} us, numpy on 0-d values {base * 1e6:6.2f} us, "
          f"ratio {ours / base:5.2f}")
    ours = best_of(3, lambda: [kvroof.kappa_crit(dep, 128) for _ in range(500)]) / 500
    print(f"kappa_crit scalar call: {ours * 1e6:6.1f} us")


def process_case(label: str, argv: list[str], floor: float | None = None) -> float:
    """Median wall time of ``argv`` in a fresh process over 7 runs (printed, with its ratio to
    ``floor``, a fresh process that does the least such a command must)."""
    times = []
    for _ in range(7):
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    ratio = "" if floor is None else f", ratio {median / floor:5.2f} to its floor"
    print(f"{label:52s} median {median * 1e3:6.0f} ms wall, max {max(times) * 1e3:6.0f} ms"
          f"{ratio}")
    return median


def main() -> None:
    # the roofline's grids against their numpy floor (kernel mode: benchmarks/bench_kernels.py)
    dep = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, compute_model="roofline")
    sizes = [1000] if "--quick" in sys.argv else [1000, 3163]
    for n in sizes:
        grid_case(n, dep)
    scalar_case(dep)
    gpt = kvroof.deployment("gpt-oss-120b", system="dgx-h100", tp=8, compute_model="roofline",
                            bandwidth=np.geomspace(1e9, 1e12, 100)[None, :])
    small = np.geomspace(1, 8192, 100)[:, None]
    seconds = best_of(3, lambda: kvroof.kappa_crit(gpt, small))
    print(f"kappa_crit root finding (sliding window), 1e4 points: {seconds * 1e3:.0f} ms")
    python = sys.executable
    bare = process_case("floor: an empty interpreter", [python, "-c", "pass"])
    libraries = process_case("floor: import numpy and pydantic",
                             [python, "-c", "import numpy, pydantic; pydantic.BaseModel"])
    process_case("import kvroof (fresh interpreter)", [python, "-c", "import kvroof"], bare)
    process_case("kvroof --help", [python, "-m", "kvroof", "--help"], bare)
    process_case("kvroof kappa --model qwen3-235b-a22b --system dgx-h100",
                 [python, "-m", "kvroof", "kappa", "--model", "qwen3-235b-a22b",
                  "--system", "dgx-h100", "--tp", "8"], libraries)

if __name__ == "__main__":
    main()
