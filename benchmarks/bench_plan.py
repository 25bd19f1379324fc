"""Time of ``kvroof plan`` for one model, two hardware candidates and the shipped trace, with
objectives: the issue's target is under 60 s on a 2-core machine.

    python benchmarks/bench_plan.py [--model llama-3.1-70b] [--candidate dgx-h100:8
        --candidate hgx-h200:8] [--jobs 1 | --dask ADDRESS] [--repeat 1]

Each run is a fresh Python process (imports included) running the command line, ``kvroof plan
chat --model MODEL --candidate ... --slo-ttft 2s --slo-tpot 50ms --json --quiet``; the wall
and CPU time of the process (children included, for ``--jobs``; not the Dask workers' with
``--dask``), and the number of simulations and the simulated hours from its JSON, are printed.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def run_once(model: str, candidates: list[str], jobs: int,
             dask: str | None = None) -> dict[str, float]:
    """One plan in a fresh process: wall and CPU seconds, simulations, simulated hours."""
    argv = [sys.executable, "-m", "kvroof", "plan", "chat", "--model", model,
            "--slo-ttft", "2s", "--slo-tpot", "50ms", "--json", "--quiet"]
    argv += ["--dask", dask] if dask is not None else ["--jobs", str(jobs)]
    for candidate in candidates:
        argv += ["--candidate", candidate]
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = os.times()
    if done.returncode != 0:
        raise SystemExit(f"kvroof plan failed ({done.returncode}): {done.stderr.strip()}")
    plan = json.loads(done.stdout)
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                           - before.children_system)
    return {"wall_s": wall, "cpu_s": cpu, "simulations": plan["simulations"],
            "simulated_h": plan["simulated_s"] / 3600, "plan_wall_s": plan["wall_s"],
            "verdicts": [c["verdict"]["sentence"] for c in plan["candidates"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="llama-3.1-70b")
    parser.add_argument("--candidate", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--dask", metavar="ADDRESS", help="run on this Dask cluster")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    candidates = args.candidate or ["dgx-h100:8", "hgx-h200:8"]
    print(f"kvroof plan chat --model {args.model} "
          + " ".join(f"--candidate {c}" for c in candidates)
          + " --slo-ttft 2s --slo-tpot 50ms "
          + (f"--dask {args.dask}" if args.dask else f"--jobs {args.jobs}")
          + f" (CPUs here: {os.cpu_count()})")
    for index in range(args.repeat):
        result = run_once(args.model, candidates, args.jobs, args.dask)
        print(f"run {index + 1}: {result['wall_s']:.1f} s wall ({result['plan_wall_s']:.1f} s "
              f"inside the plan), {result['cpu_s']:.1f} s CPU, {result['simulations']} "
              f"simulations, {result['simulated_h']:.1f} h of serving simulated "
              f"(target: under 60 s)")
        for line in result["verdicts"]:  # type: ignore[attr-defined]
            print(f"  {line}")


if __name__ == "__main__":
    main()
