"""``kvroof calibrate RESULTS --system S [-o calibrated.yaml]``: fit the cost model to
``kvroof measure prefill`` results and write a calibrated system spec."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import CommandError, print_json, print_table, registry_from_args
from kvroof.errors import KvroofError
from kvroof.outputs import write_text
from kvroof.specs.base import check_spec_name
from kvroof.units import Kind, format_quantity

__all__ = ["register"]


def register(commands: Any) -> None:
    calibrate = commands.add_parser(
        "calibrate", help=command_help("calibrate"),
        description="Reads prefill.csv (and prefill.json beside it) from `kvroof measure`, fits "
                    "the cost model's free parameters, prints them with the prediction errors, "
                    "and with -o writes a calibrated system spec that every command accepts "
                    "(--spec-path or KVROOF_SPEC_PATH).",
    )
    calibrate.add_argument("results", help="prefill.csv, or the folder holding it")
    calibrate.add_argument("--system", required=True,
                           help="the system the results were measured on (its accelerator's "
                                "dense bf16 peak defines the compute efficiency)")
    calibrate.add_argument("--name", help="name of the calibrated system (default "
                                          "<system>-calibrated)")
    calibrate.add_argument("-o", "--output", metavar="FILE",
                           help="write the calibrated system spec (YAML) here")
    calibrate.add_argument("--json", action="store_true", help="print JSON (SI units)")
    calibrate.set_defaults(handler=run_calibrate)


def _results_path(text: str) -> Path:
    path = Path(text)
    return path / "prefill.csv" if path.is_dir() else path


def run_calibrate(args: argparse.Namespace) -> None:
    import yaml

    from kvroof.analysis.calibration import calibrate, calibrated_system_data
    from kvroof.measure.results import read_results

    if args.name is not None:
        try:
            check_spec_name(args.name)
        except ValueError as error:
            raise CommandError(f"--name: {error}") from None
    registry = registry_from_args(args)
    system = registry.system(args.system)
    output = Path(args.output) if args.output else None
    if output is not None and (output.suffix not in (".yaml", ".yml")
                               or not output.parent.is_dir()):
        raise CommandError(f"-o: {output}: expected a .yaml file in an existing folder")
    path = _results_path(args.results)
    result = calibrate(read_results(path), system, registry.accelerator(system.accelerator),
                       registry.link(system.host_link), args.name)
    fitted = result.calibration
    if output is not None:
        data = calibrated_system_data(result, path)
        try:
            write_text(output, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        except KvroofError as error:
            raise CommandError(f"-o: {error}") from None
    if args.json:
        print_json({
            "system": result.system.name,
            "calibration": fitted.model_dump(),
            "peak_compute": result.peak_compute,
            "errors": [vars(e) for e in result.errors],
            "kappa_crit": [vars(k) for k in result.kappa],
            "notes": result.notes,
            "written": None if output is None else str(output),
        })
        return
    rows = [
        ["compute efficiency", f"{fitted.compute_efficiency_max:.4g} x T / (T + "
                               f"{fitted.compute_half_tokens:.4g}) of "
                               f"{format_quantity(result.peak_compute, Kind.COMPUTE)}"],
        ["link bandwidth (per GPU)", format_quantity(fitted.link_bandwidth, Kind.BANDWIDTH)],
        ["latency per copy", format_quantity(fitted.link_latency, Kind.TIME)],
        ["overlap efficiency", "not fitted" if fitted.overlap_efficiency is None
         else f"{fitted.overlap_efficiency:.3g}"],
    ]
    print(f"calibrated {result.system.name} from {path} ({fitted.rows} rows)")
    print_table(rows)
    print()
    print_table([[e.quantity, str(e.rows), f"{100 * e.mape:.1f} %", f"{100 * e.worst:.1f} %",
                  str(e.worst_row + 2)] for e in result.errors],
                header=["prediction", "rows", "MAPE", "worst", "worst CSV line"])
    print()

    def shown(value: float | None) -> str:
        if value is None:
            return "-"
        return "never" if math.isinf(value) else f"{value:.3g}"

    print_table([[str(k.new_tokens), shown(k.measured) + f" ({k.measured_status})",
                  shown(k.predicted)] for k in result.kappa],
                header=["T", "kappa_crit measured", "kappa_crit predicted"])
    for note in result.notes:
        print(f"note: {note}")
    if output is not None:
        print(f"wrote {output}: keep it in a folder of spec files and use --spec-path FOLDER "
              f"--system {result.system.name}")
