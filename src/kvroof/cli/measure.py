"""``kvroof measure``: run the benchmarks of :mod:`kvroof.measure` and write their results.

Each benchmark's CSV and JSON are written as soon as it finishes, so ``all`` keeps what it
measured if a later benchmark fails or is stopped.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import registry_from_args
from kvroof.measure import (
    ComputeSettings,
    LinkSettings,
    PrefillSettings,
    layer_shape,
    machine_info,
    pick_device,
    run_compute,
    run_link,
    run_prefill,
    write_results,
)
from kvroof.outputs import OutputFolder
from kvroof.units import Kind, format_quantity

__all__ = ["register"]

_BENCHMARKS = ("link", "compute", "prefill")


def register(commands: Any) -> None:
    measure = commands.add_parser(
        "measure",
        help=command_help("measure"),
        description="Measure this machine and write <benchmark>.csv with a <benchmark>.json "
        "header into the output folder. Runs on CUDA when torch sees a GPU, else on the CPU "
        "(small shapes, buffer-to-buffer copies).",
    )
    measure.add_argument("benchmark", choices=[*_BENCHMARKS, "all"], help="what to measure")
    measure.add_argument("--device", choices=["cuda", "cpu"], default=None,
                         help="where to run (default: cuda when available, else cpu)")
    measure.add_argument("--model", default="llama-3.1-8b", metavar="M",
                         help="registry model whose shapes the benchmarks use "
                         "(default: llama-3.1-8b; prefill needs a GQA model)")
    measure.add_argument("--accelerator", default=None, metavar="A",
                         help="registry accelerator whose dense peak gives the compute "
                         "efficiency (default: none, efficiency left empty)")
    measure.add_argument("--quick", action="store_true",
                         help="small grids and few repeats (under a minute on a CPU)")
    measure.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    measure.add_argument("-o", "--output", required=True, metavar="DIR",
                         help="folder for the CSV and JSON files (created if missing; one "
                         "that is not empty must be one kvroof made, or give --force)")
    measure.add_argument("--force", action="store_true",
                         help="write into a non-empty folder that kvroof did not make (files "
                         "of the same names are replaced, others kept)")
    measure.set_defaults(handler=run_measure)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _print_link(summary: dict[str, Any]) -> None:
    for fit in summary["fits"]:
        kind = "pinned" if fit["pinned"] else "pageable"
        print(
            f"  {fit['direction']} {kind}: {format_quantity(fit['bandwidth'], Kind.BANDWIDTH)}, "
            f"latency {format_quantity(fit['latency_s'], Kind.TIME)} per copy (fit over "
            f"{fit['points']} sizes: relative residuals RMS {_pct(fit['rel_rms'])}, "
            f"max {_pct(fit['rel_max'])})"
        )
    for entry in summary["chunked"]:
        print(
            f"  {entry['copies']} copies of {entry['block_tokens']}-token blocks "
            f"({format_quantity(entry['bytes_per_copy'], Kind.CAPACITY)} each): "
            f"{entry['slowdown_vs_one_copy']:.2f}x the time of one copy of "
            f"{format_quantity(entry['bytes_total'], Kind.CAPACITY)}"
        )
    all_gpus = summary["all_gpus"]
    if "aggregate_bandwidth" in all_gpus:
        print(f"  all {all_gpus['gpus']} GPUs at once: "
              f"{format_quantity(all_gpus['aggregate_bandwidth'], Kind.BANDWIDTH)} in all")


def _print_compute(summary: dict[str, Any]) -> None:
    print(f"  GEMM T x {summary['hidden']} by {summary['hidden']} x {summary['intermediate']}")
    for dtype, best in summary["best"].items():
        print(f"  {dtype}: best {format_quantity(best['achieved_flops'], Kind.COMPUTE)} at "
              f"T={best['T']}, efficiency {_pct(best['efficiency'])}")
    for skip in summary["skipped"]:
        print(f"  {skip['dtype']} skipped from T={skip['T'][0]}: {skip['reason']}")


def _print_prefill(summary: dict[str, Any]) -> None:
    print(f"  {summary['model']}: {summary['layers_run']} of {summary['layers_model']} layers "
          f"({summary['layers_reason']})")
    for kappa in summary["kappa_crit"]:
        if kappa["status"] == "crossed":
            text = f"{kappa['kappa_crit']:.3g} (P_OH = 1 at K = {kappa['k_star']:.0f})"
        elif kappa["status"] == "never":
            text = "inf (P_OH < 1 up to the largest K)"
        else:
            text = "below the grid (P_OH >= 1 already at the smallest K)"
        print(f"  measured kappa_crit at T={kappa['T']}: {text}")


def run_measure(args: argparse.Namespace) -> None:
    registry = registry_from_args(args)
    model = registry.model(args.model)
    accelerator = registry.accelerator(args.accelerator) if args.accelerator else None
    names = _BENCHMARKS if args.benchmark == "all" else (args.benchmark,)
    if "prefill" in names:
        layer_shape(model)  # an MLA model fails here, before anything runs
    out = OutputFolder(args.output, force=args.force, command="measure", flag="-o")
    device = pick_device(args.device)
    machine = machine_info(device)
    run = {
        "command": "kvroof measure " + " ".join(
            [args.benchmark, "--device", device, "--model", model.name]
            + (["--accelerator", accelerator.name] if accelerator else [])
            + (["--quick"] if args.quick else [])
        ),
        "model": model.name,
        "accelerator": accelerator.name if accelerator else None,
        "quick": bool(args.quick),
    }
    start = time.perf_counter()
    for name in names:
        if name == "link":
            result = run_link(model, device, LinkSettings.default(device, args.quick),
                              quiet=args.quiet)
        elif name == "compute":
            result = run_compute(model, device, ComputeSettings.default(device, args.quick),
                                 accelerator, quiet=args.quiet)
        else:
            result = run_prefill(model, device, PrefillSettings.default(device, args.quick),
                                 quiet=args.quiet)
        result.settings.update(run)
        if name == names[0]:
            out.create()
        csv_path, json_path = write_results(out.path, result, machine)
        out.add(csv_path, json_path)
        print(f"{name}: wrote {csv_path} ({len(result.rows)} rows) and {json_path.name}")
        {"link": _print_link, "compute": _print_compute, "prefill": _print_prefill}[name](
            result.summary
        )
    print(f"measured on {machine['device_name']} ({device}) in "
          f"{time.perf_counter() - start:.1f} s")
