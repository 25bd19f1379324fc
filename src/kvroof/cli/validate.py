"""``kvroof validate``: predict every published measurement in ``validation/`` and say how far
off the model is, per quantity, before and after engine profiles and on held-out sources."""

from __future__ import annotations

import argparse
from typing import Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import print_json, print_table, registry_from_args
from kvroof.units import Kind, format_quantity

__all__ = ["register"]


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "validate", help=command_help("validate"),
        description="Predict every validation case (published measurements of copies, layer "
                    "loads, prefill and TTFT) with and without engine profiles, and report the "
                    "ratio predicted / measured per case and per quantity.",
    )
    parser.add_argument("--engine-profiles", choices=("on", "off"), default="on",
                        help="the case table's predictions: with each source's engine profile "
                             "(on, default) or kvroof's defaults as before engine profiles "
                             "(off); the summary shows both and the held-out errors")
    parser.add_argument("--compute-model", choices=("roofline", "kernels", "auto"),
                        default="auto",
                        help="how the model-level cases' compute is timed: roofline (one "
                             "whole-model roofline), kernels (op by op from the measured kernel "
                             "tables; --case lists each op's model and source) or auto (the "
                             "default: kernels where the tables cover the accelerator)")
    parser.add_argument("--ttft-clock", choices=("kernel", "client"), default="kernel",
                        help="what a predicted TTFT is: kernel time (default) or client-side "
                             "(the engine profiles' serving overheads added)")
    parser.add_argument("--case", metavar="ID",
                        help="explain one case: its source, conditions, each input of each "
                             "prediction and where it came from")
    parser.add_argument("--cases", action="append", default=None, metavar="DIR",
                        help="a folder of case files to validate instead of the built-in ones "
                             "(repeatable)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON (SI units; keys in docs/validation.md); with --case, "
                             "that case with each prediction's inputs")
    parser.add_argument("--quantity", choices=("serving",), default=None,
                        help="serving: replay the published serving runs (validation/serving/) "
                             "with the simulator, one staged run per case as inference-perf ran "
                             "them, and score TTFT, TPOT, E2E and throughput per stage instead "
                             "of the model-level cases (opt-in: about half a minute of CPU at "
                             "full stage length)")
    parser.add_argument("--stage-scale", type=float, default=1.0, metavar="X",
                        help="with --quantity serving: simulate each stage for X times its "
                             "published duration (default 1; less is faster, and shortens the "
                             "queues of saturated stages)")
    parser.add_argument("--fresh-stages", action="store_true",
                        help="with --quantity serving: simulate each stage alone from empty "
                             "caches instead of one staged run whose caches carry from stage "
                             "to stage (as the published runs did)")
    parser.set_defaults(handler=run_validate)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _stats_rows(result: Any) -> list[list[str]]:
    from kvroof.validation.run import MODES

    rows = []
    for quantity in result.quantities:
        for mode in MODES:
            stats = next(s for s in result.stats if s.quantity == quantity and s.mode == mode)
            if stats.cases == 0:
                rows.append([quantity if mode == "before" else "", mode.replace("_", " "), "0",
                             "-", "-", "-"])
                continue
            rows.append([
                quantity if mode == "before" else "",
                mode.replace("_", " "),
                f"{stats.cases}",
                f"{stats.median_ratio:.3g}",
                f"{stats.worst_ratio:.3g} ({stats.worst_case})",
                f"{100 * stats.mape:.0f} %",
            ])
    return rows


def _fit_text(method: str, fit: Any, held_out: float) -> str:
    overhead = format_quantity(fit.overhead, Kind.TIME)
    overhead += "" if fit.overhead_fitted else " (not fitted: no copy of 64 KiB or less)"
    share = f"{fit.share:.3g}" + ("" if fit.share_fitted else " (not fitted)")
    return (f"{method}: per-copy overhead {overhead}, share of the link {share}; "
            f"{len(fit.points)} cases from {len(fit.sources)} sources, every one within "
            f"{100 * fit.max_error:.0f}% (factor; RMS log error {fit.rms_log_error:.2f}), "
            f"held out within {100 * held_out:.0f}%")


def _explain(result: Any, case_id: str) -> None:
    from kvroof.validation.predict import as_text
    from kvroof.validation.run import MODE_TEXT, MODES

    item = result.result(case_id)
    case, source = item.case, item.file.source
    rows = [
        ["case", case.id],
        ["source", f"{source.title} ({source.url})"],
        ["where", case.where],
        ["timed", case.timed],
        ["measured", as_text(case.measured, case.quantity)],
        ["rating", case.rating],
        ["file", str(item.file.path)],
    ]
    if case.conditions:
        rows.append(["conditions", case.conditions])
    if case.notes:
        rows.append(["notes", case.notes])
    rows.append(["in the fit", "yes" if case.in_fit else "no"])
    rows.append(["in the statistics", "yes" if item.in_statistics
                 else f"no: {item.excluded_reason}"])
    print_table(rows)
    for mode in MODES:
        prediction = item.prediction(mode)
        print()
        if mode == "held_out" and prediction is item.after:
            print(f"{MODE_TEXT[mode]}: the same as with engine profiles (this source is not in "
                  "the copy-size fit, so the shipped profiles never saw it)")
            continue
        value = prediction.value
        headline = (f"not predicted: {prediction.problem}" if value is None else
                    f"{as_text(value, case.quantity)} (ratio {_ratio(item.ratio(mode))})")
        print(f"{MODE_TEXT[mode]}: {headline}")
        print_table([[i.name, i.value, i.origin] for i in (*prediction.inputs,
                                                           *prediction.parts)],
                    header=["input", "value", "from"])


def _case_json(result: Any, case_id: str) -> dict[str, Any]:
    """One case as JSON: its entry of ``kvroof validate --json`` plus each prediction's inputs
    and parts (name, value, from)."""
    item = result.result(case_id)
    data: dict[str, Any] = next(c for c in result.as_dict()["cases"] if c["id"] == case_id)
    for mode in ("before", "after", "held_out"):
        prediction = item.prediction(mode)
        data[f"explain_{mode}"] = {
            "problem": prediction.problem,
            "inputs": [{"name": i.name, "value": i.value, "from": i.origin}
                       for i in prediction.inputs],
            "parts": [{"name": i.name, "value": i.value, "from": i.origin}
                      for i in prediction.parts],
        }
    return data


def _run_serving(args: argparse.Namespace) -> None:
    """``--quantity serving``: the serving replays' table per condition and their errors."""
    from kvroof.errors import KvroofError
    from kvroof.validation.serving import validate_serving
    from kvroof.validation.serving_table import FLAGS_TEXT, condition_table, stats_rows

    for flag, given in (("--case", args.case), ("--engine-profiles", args.engine_profiles != "on"),
                        ("--compute-model", args.compute_model != "auto"),
                        ("--ttft-clock", args.ttft_clock != "kernel")):
        if given:
            raise KvroofError(f"{flag}: applies to the model-level cases, not to --quantity "
                              "serving")
    if not (args.stage_scale > 0 and args.stage_scale != float("inf")):
        raise KvroofError(f"--stage-scale: expected a positive number, got {args.stage_scale:g}")
    result = validate_serving(args.cases, registry_from_args(args), scale=args.stage_scale,
                              carry_caches=not args.fresh_stages)
    if args.json:
        print_json(result.as_dict())
        return
    if not result.scores:
        print("serving: no serving case files (validation/serving/*.yaml) in the folders given")
        return
    print(f"serving: {len(result.conditions())} cases from {len(result.files)} sources, "
          f"{len(result.scores)} stages replayed (stage durations x{result.scale:g}, "
          + ("one staged run per case, drained between stages, caches carried"
             if result.carry_caches else "each stage alone from empty caches, drained")
          + "; ratio = simulated / measured)")
    for loaded, condition in result.conditions():
        print()
        print(f"{condition.id}: {condition.label} [{condition.rating}] - {loaded.source.url}")
        header, rows = condition_table(result, condition)
        print_table(rows, header=header)
        replayed = result.replays[condition.id]
        print(f"simulated in {replayed.wall:.1f} s wall, {replayed.cpu:.1f} s CPU")
    print(FLAGS_TEXT)
    print()
    print("error per case (worst = farthest from 1 either way; MAPE = mean |ratio - 1|):")
    header, rows = stats_rows(result)
    print_table(rows, header=header)
    print("assumptions per case: kvroof validate --quantity serving --json (conditions)")


def run_validate(args: argparse.Namespace) -> None:
    from kvroof.validation.predict import as_text
    from kvroof.validation.run import Mode, validate

    if args.quantity == "serving":
        _run_serving(args)
        return
    for flag, given in (("--stage-scale", args.stage_scale != 1.0),
                        ("--fresh-stages", args.fresh_stages)):
        if given:
            from kvroof.errors import KvroofError

            raise KvroofError(f"{flag}: applies to --quantity serving")
    result = validate(args.cases, registry_from_args(args), compute_model=args.compute_model,
                      ttft_clock=args.ttft_clock)
    if args.case and args.json:
        print_json(_case_json(result, args.case))
        return
    if args.case:
        _explain(result, args.case)
        return
    if args.json:
        print_json(result.as_dict())
        return
    mode: Mode = "after" if args.engine_profiles == "on" else "before"
    sources = len(result.files)
    settings = ""
    if result.compute_model != "roofline" or result.ttft_clock != "kernel":
        settings = (f" (compute model {result.compute_model}, "
                    f"{'client-side' if result.ttft_clock == 'client' else 'kernel'} TTFT)")
    print(f"{len(result.results)} cases from {sources} sources; predictions "
          + ("with each source's engine profile" if mode == "after"
             else "before engine profiles (kvroof's defaults)") + settings + ":")
    rows = []
    for item in result.results:
        prediction = item.prediction(mode)
        rows.append([
            item.case.id + ("" if item.in_statistics else " *"),
            item.case.quantity,
            as_text(item.case.measured, item.case.quantity),
            "-" if prediction.value is None else as_text(prediction.value, item.case.quantity),
            _ratio(item.ratio(mode)),
        ])
    print_table(rows, header=["case", "quantity", "measured", "predicted", "ratio"])
    if not all(item.in_statistics for item in result.results):
        print("* not in the statistics (kvroof validate --case ID says why)")
    print()
    print("error per quantity (ratio = predicted / measured; worst = farthest from 1 either "
          "way; MAPE = mean |ratio - 1|):")
    print_table(_stats_rows(result),
                header=["quantity", "mode", "cases", "median", "worst (case)", "MAPE"])
    print()
    print("copy-size fit (in_fit cases, host-to-device; held out = refitted without the "
          "case's source):")
    for method, fit in result.fits.items():
        print("  " + _fit_text(method, fit, result.held_out_fit_error(method)))
    if not any(item.case.quantity == "kappa_crit" for item in result.results):
        print("kappa_crit: no case; no public text read for this validation states a measured "
              "kappa_crit")
    worst = result.worst("after")
    if worst:
        print("worst with engine profiles: " + ", ".join(
            f"{w.case.id} ({_ratio(w.ratio('after'))})" for w in worst))
