"""``kvroof report [-o DIR] [--config FILE] [--no-simulation] [--no-planning]``: the
one-command report."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import registry_from_args

__all__ = ["register"]


def register(commands: Any) -> None:
    report = commands.add_parser(
        "report", help=command_help("report"),
        description="Writes figures (PNG, and SVG/PDF if configured), report.md and a "
                    "self-contained report.html into the output folder.",
    )
    report.add_argument("-o", "--output", default="kvroof-report", metavar="DIR",
                        help="output folder (default kvroof-report; its parent must exist); "
                             "the report is built apart and moved in when complete")
    report.add_argument("--config", metavar="FILE",
                        help="YAML with models, hardware and settings (see docs/report.md)")
    report.add_argument("--no-simulation", action="store_true",
                        help="leave out the serving-simulation section (the config's "
                             "'simulation:'; about 1.2 s of the default report's 5.1 s of CPU)")
    report.add_argument("--no-planning", action="store_true",
                        help="leave out the planning section (the config's 'planning:', "
                             "kvroof plan on the shipped trace; about 4 s of the default "
                             "report's CPU)")
    report.add_argument("--compute-model", choices=("roofline", "kernels", "auto"),
                        help="how compute is timed in every section (the config's "
                             "'compute_model:'; default auto: the measured kernel tables where "
                             "they cover the accelerator, else the roofline)")
    report.add_argument("--quiet", action="store_true", help="no progress lines")
    report.add_argument("--force", action="store_true",
                        help="write into a non-empty folder that kvroof did not make (files of "
                             "the same names are replaced, others kept)")
    report.set_defaults(handler=run_report)


def run_report(args: argparse.Namespace) -> None:
    from kvroof.report import ReportConfig, build_report, load_report_config

    registry = registry_from_args(args)
    config = load_report_config(args.config, registry) if args.config else ReportConfig()
    if args.no_simulation:
        config = config.model_copy(update={"simulation": None})
    if args.no_planning:
        config = config.model_copy(update={"planning": None})
    if args.compute_model is not None:
        config = config.model_copy(update={"compute_model": args.compute_model})

    def progress(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    result = build_report(args.output, config, registry, progress, force=args.force)
    print(f"wrote {result.html} and {result.markdown.name} with {len(result.figures)} figures "
          f"and {len(result.tables)} tables in {result.seconds:.1f} s")
