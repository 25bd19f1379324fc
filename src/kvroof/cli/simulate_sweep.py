"""``kvroof sweep``: its flags and its handler. A grid of simulations from a YAML config
(:mod:`kvroof.simulate.sweep`) on local processes or a Dask cluster, printed as one row per
simulation, or written as ``sweep.csv`` (and TTFT against the request rate when the grid varies
it). Every point is checked before the first runs; a point that fails as it runs is one line
and a row of ``failed.csv`` while the others run on (status 1 at the end); ``--timeout`` ends a
stalled point (or a stalled Dask cluster); Ctrl-C and SIGTERM stop the workers at once, keep
the finished rows and end with ``kvroof: interrupted`` (130) or ``terminated`` (143). The sweep
itself is imported when the command runs."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from pathlib import Path
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import print_json, print_table
from kvroof.errors import KvroofError, Terminated

__all__ = ["register_sweep", "run_sweep_command"]


def register_sweep(commands: Any) -> None:
    """Add ``kvroof sweep`` to the subcommands ``commands``."""
    sweep = commands.add_parser(
        "sweep", help=command_help("sweep"),
        description="One CSV row per simulation; see docs/simulate.md for the config. Every "
                    "grid point is checked before the first runs; a point that fails as it "
                    "runs is listed in failed.csv while the others run on (exit status 1); "
                    "Ctrl-C keeps the finished rows.")
    sweep.add_argument("config", help="sweep config (YAML)")
    sweep.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="local worker processes (default 1)")
    sweep.add_argument("--dask", metavar="ADDRESS",
                       help="run on an existing Dask cluster (scheduler address, e.g. "
                            "tcp://host:8786; needs kvroof[distributed])")
    sweep.add_argument("--timeout", metavar="SECONDS",
                       help="locally: stop a grid point that runs longer than this (it fails, "
                            "the others run on); with --dask: end the sweep once no point has "
                            "finished for this long (a stalled cluster); default: no limit")
    sweep.add_argument("-o", "--output", metavar="DIR",
                       help="write sweep.csv (and latency-vs-rps.png; failed.csv when points "
                            "fail) here")
    sweep.add_argument("--force", action="store_true",
                       help="write into a non-empty folder kvroof did not make")
    sweep.add_argument("--json", action="store_true", help="print the rows as JSON")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.set_defaults(handler=run_sweep_command)


def _timeout(text: str | None) -> float | None:
    """``--timeout``: seconds (``90``), or a time with a unit (``"90 s"``)."""
    if text is None:
        return None
    from kvroof.units import Kind, UnitError, parse_quantity

    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_quantity(text, Kind.TIME)
        except UnitError:
            value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise KvroofError(f"--timeout: expected a positive number of seconds, got {text!r}")
    return value


def _say(line: str) -> None:
    """A line on stderr (a progress bar drawn in place on a terminal is cleared first)."""
    clear = "\r\x1b[K" if getattr(sys.stderr, "isatty", lambda: False)() else ""
    print(f"{clear}kvroof: {line}", file=sys.stderr, flush=True)


def run_sweep_command(args: argparse.Namespace) -> None:
    """The handler of ``kvroof sweep``: check every point, run them, print or write the rows.
    Failed points are listed (``failed.csv``) and end the command with status 1; Ctrl-C or
    SIGTERM keeps the finished rows and ends it as an interrupt."""
    from kvroof.simulate.sweep import (
        check_points,
        check_run_options,
        check_trace,
        describe,
        failed_row,
        iter_sweep,
        load_sweep_config,
        points,
    )

    if args.dask is not None and args.jobs != 1:
        raise KvroofError("give --jobs or --dask, not both")
    timeout = _timeout(args.timeout)
    check_run_options(args.jobs, timeout)
    config = load_sweep_config(args.config)
    if args.output is not None:
        from kvroof.outputs import check_output_folder

        check_output_folder(args.output, force=args.force, flag="-o")
    try:  # a grid point's settings: name the file they came from
        all_points = points(config, list(getattr(args, "spec_path", []) or []))
        check_points(all_points)
        if args.dask is None:  # the workers are here: so is the trace (loaded once)
            check_trace(all_points)
    except KvroofError as error:
        raise KvroofError(f"{args.config}: {error}") from None
    start = time.perf_counter()
    bar: Any = None
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    stalled: list[str] = []

    def progress() -> None:
        nonlocal bar
        if args.quiet or args.json or time.perf_counter() - start < 1.0:
            return
        if bar is None:
            from kvroof.measure.progress import Progress

            bar = Progress("sweep", len(all_points))
            bar.start = start
        done = len(rows) + len(failed)
        bar.advance(done - bar.done_weight, f"{done}/{len(all_points)} simulations")

    try:
        with contextlib.closing(iter_sweep(all_points, jobs=args.jobs, dask=args.dask,
                                           timeout=timeout, note=_say)) as outcomes:
            for outcome in outcomes:
                if outcome.row is not None:
                    rows.append(outcome.row)
                else:
                    failed.append(failed_row(outcome))
                    if outcome.stall:
                        stalled.append(str(outcome.error))
                    else:
                        _say(f"{describe(outcome.point)} failed: {outcome.error}")
                progress()
    except KeyboardInterrupt as stop:  # Terminated (SIGTERM) too: keep what finished
        word = "terminated" if isinstance(stop, Terminated) else "interrupted"
        ended = {int(row["point"]) for row in rows + failed}
        failed += [{"point": point.index, **point.grid, "error": f"not finished: {word}"}
                   for point in all_points if point.index not in ended]
        _finish(args, config, rows, failed, len(all_points), stopped=True)
        raise
    if stalled:
        _say(f"{stalled[0]}; {len(stalled)} point{'s' if len(stalled) != 1 else ''} did not "
             "finish")
    if bar is not None:
        bar.done()
    _finish(args, config, rows, failed, len(all_points), stopped=False)
    if failed:
        where = ""
        if args.output is not None:
            folder = Path(args.output)
            where = (f"; wrote {folder / 'sweep.csv'} ({len(rows)} rows) and "
                     f"{folder / 'failed.csv'}")
        print(f"kvroof: error: {len(failed)} of {len(all_points)} grid points failed{where}",
              file=sys.stderr)
        raise SystemExit(1)


def _finish(args: argparse.Namespace, config: Any, rows: list[dict[str, Any]],
            failed: list[dict[str, Any]], total: int, *, stopped: bool) -> None:
    """Write (``-o``) or print the rows, in point order. A stopped sweep writes only what
    finished (nothing when nothing did), draws no figure and prints no table with ``-o``."""
    from kvroof.simulate.sweep import grid_columns, summary_row

    rows.sort(key=lambda r: int(r["point"]))
    failed.sort(key=lambda r: int(r["point"]))
    columns = grid_columns(config)
    if args.output is not None:
        if stopped:
            if rows:
                _write_sweep(args.output, args.force, rows, failed, columns, figure=False)
                _say(f"wrote {Path(args.output) / 'sweep.csv'} ({len(rows)} of {total} "
                     f"simulations; the others in failed.csv)")
            return
        _write_sweep(args.output, args.force, rows, failed, columns, figure=True)
    if stopped and not rows:
        return
    if args.json:
        print_json(rows)
        return
    table = []
    for row in rows:
        brief = summary_row(row)
        table.append([str(row.get(c, "")) for c in columns]
                     + [_format_cell(k, v) for k, v in brief.items() if k != "point"])
    header = columns + [k for k in summary_row(rows[0]) if k != "point"] if rows else columns
    print_table(table, header=header)
    if args.output is not None and not failed:
        print(f"wrote {Path(args.output) / 'sweep.csv'} ({len(rows)} simulations)")


def _format_cell(key: str, value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.4g}"
    return str(value)


def _write_sweep(folder: str, force: bool, rows: list[dict[str, Any]],
                 failed: list[dict[str, Any]], grid: list[str], *, figure: bool) -> None:
    """``sweep.csv`` (and ``failed.csv``, and TTFT against the rate when the rows vary it),
    built apart and moved into ``folder`` whole."""
    from kvroof.outputs import staged_folder
    from kvroof.simulate.output import rows_csv_text

    with staged_folder(folder, force=force, command="sweep", flag="-o") as staging:
        (staging / "sweep.csv").write_text(rows_csv_text(rows), encoding="utf-8")
        if failed:
            columns = ["point", *grid, "error"]
            (staging / "failed.csv").write_text(
                rows_csv_text([{key: row.get(key, "") for key in columns} for row in failed]),
                encoding="utf-8")
        if figure and "rps" in grid and len({row["rps"] for row in rows}) > 1:
            from kvroof.plot.simulate import latency_vs_rps_figure
            from kvroof.plot.style import save_figure

            group = [key for key in grid if key != "rps"]
            save_figure(latency_vs_rps_figure(rows, group), staging / "latency-vs-rps.png")
