"""``kvroof simulate``'s handler: read the flags and the trace, run the simulation once per
``--compare`` variant on the same arrivals (with a progress bar once a run takes more than a
second), then print, write JSON, or write the output folder (CSV, JSON, figures: one timeline
and one TTFT CDF, each with every variant). Reading a large trace and writing large CSVs say
so on stderr (:mod:`kvroof.cli.slow_steps`), except with ``--quiet`` or ``--json``. The
simulation is :func:`kvroof.simulate.runner.simulate`, imported when the command runs."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING, Any

from kvroof.cli.common import print_json, registry_from_args
from kvroof.cli.deployment_flags import quantity_flag
from kvroof.cli.simulate_print import print_results, print_stages
from kvroof.cli.simulate_settings import (
    check_arrival_flags,
    compare_variant,
    deployments_from_args,
    named_by_flag,
    settings_from_args,
    stage_plan_from_args,
)
from kvroof.cli.slow_steps import file_label, large_file, many_rows, slow_step
from kvroof.display import count
from kvroof.errors import KvroofError
from kvroof.units import Kind, format_quantity

if TYPE_CHECKING:
    from kvroof.simulate.metrics import SimResult

__all__ = ["run_simulate"]


class _ProgressBar:
    """The progress bar, drawn only once a run has taken more than a second."""

    def __init__(self, label: str, quiet: bool) -> None:
        self.label = label
        self.quiet = quiet
        self.start = time.perf_counter()
        self.bar: Any = None

    def __call__(self, fraction: float, simulated: float) -> None:
        if self.quiet or time.perf_counter() - self.start < 1.0:
            return
        if self.bar is None:
            from kvroof.measure.progress import Progress

            self.bar = Progress(self.label, 1.0)
            self.bar.start = self.start
        self.bar.advance(fraction - self.bar.done_weight,
                         f"{format_quantity(simulated, Kind.TIME)} simulated")

    def done(self) -> None:
        if self.bar is not None:
            self.bar.done()


def run_simulate(args: argparse.Namespace) -> None:
    """The handler of ``kvroof simulate``."""
    from kvroof.simulate.runner import prepare_trace, simulate
    from kvroof.workload.requests import MOONCAKE_SLICE, load_requests

    registry = registry_from_args(args)
    settings = settings_from_args(args)
    variants = [settings] + [compare_variant(settings, text) for text in args.compare]
    deps = deployments_from_args(args)
    if args.output is not None:
        from kvroof.outputs import check_output_folder

        check_output_folder(args.output, force=args.force, flag="-o")
    check_arrival_flags(args, variants)
    stages = stage_plan_from_args(args)
    think = quantity_flag("--think-time", args.think_time, Kind.TIME) or 0.0
    path = args.trace or MOONCAKE_SLICE
    quiet = bool(args.quiet or args.json)
    with slow_step(f"reading {file_label(path)}", large=large_file(path), quiet=quiet) as step:
        trace = load_requests(path, args.format, skip_bad=args.skip_bad)
        step.note = f"{count(len(trace))} requests"
    if args.requests is not None:
        if args.requests < 1:
            raise KvroofError(f"--requests: expected a positive integer, got {args.requests}")
        import numpy as np

        trace = trace.take(np.arange(min(args.requests, len(trace))))
    if stages is not None:
        from kvroof.workload.stages import staged_trace

        try:
            trace = staged_trace(trace, stages)
        except KvroofError as error:
            raise named_by_flag(error) from None
    try:
        trace = prepare_trace(trace, rps=args.rps, arrival=args.arrival or "poisson",
                              burstiness=1.0 if args.burstiness is None else args.burstiness,
                              time_scale=args.time_scale,
                              output_tokens=args.output_tokens, seed=args.seed,
                              closed_loop=args.users is not None)
    except KvroofError as error:
        raise named_by_flag(error) from None
    results: list[SimResult] = []
    for index, variant in enumerate(variants):
        label = "simulating" if len(variants) == 1 else f"simulating {index + 1}/{len(variants)}"
        bar = _ProgressBar(label, quiet)
        try:
            result = simulate(trace, deps, variant, users=args.users, think_time=think,
                              skip_bad=args.skip_bad, registry=registry, progress=bar,
                              stages=stages)
        except KvroofError as error:
            raise named_by_flag(error) from None
        bar.done()
        results.append(result)
    if args.output is not None:
        _write(args.output, args.force, results, trace.name, quiet)
    if args.json:
        from kvroof.simulate.output import result_json

        payload = [result_json(r) for r in results]
        print_json(payload[0] if len(payload) == 1 else payload)
        return
    print_results(trace, results)
    print_stages(results)
    if args.output is not None:
        print(f"wrote {args.output}")


def _write(folder: str, force: bool, results: list[SimResult], name: str,
           quiet: bool = False) -> None:
    """Each run's CSV and JSON files, and one timeline and one TTFT CDF of all runs, into
    ``folder`` (built apart and moved in when complete)."""
    from kvroof.outputs import staged_folder
    from kvroof.plot.simulate import timeline_figure, ttft_cdf_figure
    from kvroof.plot.style import save_figure
    from kvroof.simulate.output import write_result

    rows = sum(len(r.requests["ttft"]) + len(r.iterations["start"]) for r in results)
    with staged_folder(folder, force=force, command="simulate", flag="-o") as staging:
        with slow_step(f"writing CSVs ({count(rows)} rows)", large=many_rows(rows),
                       quiet=quiet):
            for index, result in enumerate(results):
                write_result(staging, result, "" if index == 0 else f"compare-{index}-")
        with slow_step("drawing the figures", quiet=quiet):
            if len(results) == 1:
                save_figure(timeline_figure(results[0], note=results[0].label),
                            staging / "timeline.png")
                labelled = {results[0].label: results[0]}
            else:
                labelled = {f"{i}: {r.label}": r for i, r in enumerate(results)}
                save_figure(timeline_figure(labelled, note=name), staging / "timeline.png")
            save_figure(ttft_cdf_figure(labelled, note=name), staging / "ttft-cdf.png")
