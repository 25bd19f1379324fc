"""``kvroof sweep``: its flags and its handler. A grid of simulations from a YAML config
(:mod:`kvroof.simulate.sweep`) on local processes or a Dask cluster, printed as one row per
simulation, or written as ``sweep.csv`` (and TTFT against the request rate when the grid varies
it). The sweep itself is imported when the command runs."""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import print_json, print_table
from kvroof.errors import KvroofError

__all__ = ["register_sweep", "run_sweep_command"]


def register_sweep(commands: Any) -> None:
    """Add ``kvroof sweep`` to the subcommands ``commands``."""
    sweep = commands.add_parser(
        "sweep", help=command_help("sweep"),
        description="One CSV row per simulation; see docs/simulate.md for the config.")
    sweep.add_argument("config", help="sweep config (YAML)")
    sweep.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="local worker processes (default 1)")
    sweep.add_argument("--dask", metavar="ADDRESS",
                       help="run on an existing Dask cluster (scheduler address, e.g. "
                            "tcp://host:8786; needs kvroof[distributed])")
    sweep.add_argument("-o", "--output", metavar="DIR",
                       help="write sweep.csv (and latency-vs-rps.png) here")
    sweep.add_argument("--force", action="store_true",
                       help="write into a non-empty folder kvroof did not make")
    sweep.add_argument("--json", action="store_true", help="print the rows as JSON")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.set_defaults(handler=run_sweep_command)


def run_sweep_command(args: argparse.Namespace) -> None:
    """The handler of ``kvroof sweep``."""
    from kvroof.simulate.sweep import grid_columns, load_sweep_config, run_sweep, summary_row

    config = load_sweep_config(args.config)
    if args.dask is not None and args.jobs != 1:
        raise KvroofError("give --jobs or --dask, not both")
    if args.output is not None:
        from kvroof.outputs import check_output_folder

        check_output_folder(args.output, force=args.force, flag="-o")
    start = time.perf_counter()
    bar: Any = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if args.quiet or args.json or time.perf_counter() - start < 1.0:
            return
        if bar is None:
            from kvroof.measure.progress import Progress

            bar = Progress("sweep", total)
            bar.start = start
        bar.advance(done - bar.done_weight, f"{done}/{total} simulations")

    try:
        rows = run_sweep(config, jobs=args.jobs, dask=args.dask, progress=progress,
                         spec_paths=list(getattr(args, "spec_path", []) or []))
    except KvroofError as error:  # a grid point's settings: name the file they came from
        if str(error).startswith("--"):  # a flag's (--jobs, --dask), not the file's
            raise
        raise KvroofError(f"{args.config}: {error}") from None
    if bar is not None:
        bar.done()
    if args.output is not None:
        _write_sweep(args.output, args.force, rows, grid_columns(config))
    if args.json:
        print_json(rows)
        return
    columns = grid_columns(config)
    table = []
    for row in rows:
        brief = summary_row(row)
        table.append([str(row.get(c, "")) for c in columns]
                     + [_format_cell(k, v) for k, v in brief.items() if k != "point"])
    header = columns + [k for k in summary_row(rows[0]) if k != "point"] if rows else columns
    print_table(table, header=header)
    if args.output is not None:
        print(f"wrote {Path(args.output) / 'sweep.csv'} ({len(rows)} simulations)")


def _format_cell(key: str, value: Any) -> str:
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.4g}"
    return str(value)


def _write_sweep(folder: str, force: bool, rows: list[dict[str, Any]], grid: list[str]) -> None:
    from kvroof.outputs import staged_folder
    from kvroof.simulate.output import rows_csv_text

    with staged_folder(folder, force=force, command="sweep", flag="-o") as staging:
        (staging / "sweep.csv").write_text(rows_csv_text(rows), encoding="utf-8")
        if "rps" in grid and len({row["rps"] for row in rows}) > 1:
            from kvroof.plot.simulate import latency_vs_rps_figure
            from kvroof.plot.style import save_figure

            group = [key for key in grid if key != "rps"]
            save_figure(latency_vs_rps_figure(rows, group), staging / "latency-vs-rps.png")

