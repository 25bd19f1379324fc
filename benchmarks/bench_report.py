"""Whole-process cost of ``kvroof report``: CPU and wall time of the default report and of
``--no-simulation``.

    python benchmarks/bench_report.py [--runs 3]

Each figure is the median of ``--runs`` fresh processes after one warm-up (imports included),
CPU being user + system time from ``resource.getrusage`` of the children: the steadier figure
on a shared machine, where other jobs stretch wall time but not CPU time. The issue's target is
4 s of CPU for the default report. As a floor, the same run measures a process that only
imports what the report needs (matplotlib's figure and Agg canvas, numpy, pydantic). Python
files are byte-compiled first so that no run pays for compiling them. Start-up of the other
commands: ``benchmarks/bench_grid.py``. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def kvroof_command() -> list[str]:
    """The installed ``kvroof`` script, or ``python -m kvroof`` beside this interpreter."""
    script = shutil.which("kvroof", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "kvroof"]


def measure(argv: list[str], runs: int, cwd: str | None = None) -> tuple[float, float]:
    """Median (wall seconds, CPU seconds) of ``runs`` runs of ``argv`` after one warm-up."""
    walls: list[float] = []
    cpus: list[float] = []
    for attempt in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: "
                             f"{done.stderr.decode(errors='replace').strip()[-300:]}")
        if attempt:  # the first run warms the file cache
            walls.append(wall)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def line(name: str, wall: float, cpu: float, note: str) -> None:
    print(f"{name:44s} wall {wall:6.3f} s  cpu {cpu:6.3f} s  {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (default 3)")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    compileall.compile_dir(str(SRC), quiet=1)
    kvroof = kvroof_command()
    print(f"{os.cpu_count()} CPUs; {' '.join(kvroof)}; medians of {args.runs} runs")

    floor_wall, floor_cpu = measure(
        [sys.executable, "-c", "import numpy, pydantic, matplotlib.figure, "
         "matplotlib.backends.backend_agg"], args.runs)
    line("floor: import what the report needs", floor_wall, floor_cpu, "")
    with tempfile.TemporaryDirectory() as folder:
        for name, extra in (("kvroof report (default)", []),
                            ("kvroof report --no-simulation", ["--no-simulation"])):
            wall, cpu = measure([*kvroof, "report", "-o", "out", "--force", "--quiet",
                                 *extra], args.runs, cwd=folder)
            line(name, wall, cpu, f"target < 4 s CPU: {'met' if cpu < 4.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
