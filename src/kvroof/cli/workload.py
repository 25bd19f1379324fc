"""``kvroof workload stats`` and ``kvroof workload synth``: request traces and their T, K and
kappa_ratio. The handlers parse flags and print; loading and statistics are library calls
(kvroof.workload), imported when a workload command runs so other commands stay fast.

The report is built by :func:`stats_report` (a JSON-ready dict) and :func:`stats_rows` (table
rows) from a loaded workload, so figures that need a model or system can be added beside them.
Counts and durations are written for people (:func:`kvroof.display.count`: "13,530";
:func:`kvroof.display.duration`). Reading a large file (or any that takes over a second) says so
on stderr, except with ``--json`` (:mod:`kvroof.cli.slow_steps`).
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvroof.cli.commands import command_help
from kvroof.cli.common import flat_record, print_csv, print_json, print_table
from kvroof.cli.deployment_flags import (
    add_deployment_flags,
    check_flags_apply,
    deployment_from_args,
    flag_error,
)
from kvroof.cli.slow_steps import file_label, large_file, slow_step
from kvroof.display import count, duration
from kvroof.errors import KvroofError, short_repr

if TYPE_CHECKING:
    from kvroof.analysis.workload.bound import BoundShares
    from kvroof.workload.records import Workload
    from kvroof.workload.stats import WorkloadStats

__all__ = ["load_from_args", "register", "stats_report", "stats_rows"]

# Kept here (not imported) so building the parser does not import numpy; a test checks they
# match kvroof.workload.FORMATS and SYNTHETIC_KINDS.
_FORMATS = ("sharegpt", "docqa", "mooncake", "table")
_SYNTHETIC = ("sharegpt", "narrativeqa", "docfinqa")


def register(commands: Any) -> None:
    workload = commands.add_parser(
        "workload", help=command_help("workload")
    )
    actions = workload.add_subparsers(dest="workload_command", metavar="ACTION", required=True)

    stats = actions.add_parser(
        "stats", help="percentiles of new tokens T, cached tokens K and kappa_ratio = K/T"
    )
    stats.add_argument("file", help="a workload file (ShareGPT JSON, JSONL trace, CSV table)")
    stats.add_argument(
        "--format", choices=_FORMATS, help="the file's format (guessed when not given)"
    )
    stats.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="a local tokenizer.json (needs the 'tokenizers' package), or tiktoken:ENCODING "
        "if cached locally; default: ceil(characters / 4), approximate",
    )
    stats.add_argument(
        "--skip-bad", action="store_true",
        help="skip malformed lines or conversations (and say how many) instead of stopping",
    )
    stats.add_argument(
        "--include-system", action="store_true",
        help="sharegpt: count system turns as cached context",
    )
    stats.add_argument(
        "--reply-as-new", action="store_true",
        help="sharegpt: count the previous assistant reply in T, not K (decode KV not kept)",
    )
    stats.add_argument(
        "--no-cache-documents", action="store_true",
        help="docqa: never reuse a document's KV (default: reuse after its first question)",
    )
    stats.add_argument(
        "--preloaded-documents", action="store_true",
        help="docqa: every document is cached before its first question (K = document)",
    )
    stats.add_argument(
        "--lru-tokens", type=int, metavar="N",
        help="mooncake: prefix cache of N tokens with LRU eviction (default: unlimited)",
    )
    output = stats.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print a JSON object")
    output.add_argument("--csv", action="store_true",
                        help="print the statistics as CSV (one row per statistic and quantity; "
                             "with --model, the transfer-bound shares after a blank line)")
    bound = stats.add_argument_group(
        "transfer-bound shares (give --model and --system or --accelerator)")
    bound.add_argument("--mode", choices=("paper", "full", "both"), default="both",
                       help="paper: kappa_ratio > the paper's kappa_crit; full: transfer time "
                            "> compute time per request (default both)")
    bound.add_argument("--compare", action="append", default=[], metavar="SYSTEM[:TP]",
                       help="another system to compare on the same workload, with its own "
                            "TP degree after a colon (default --tp); repeatable")
    add_deployment_flags(stats, model_required=False)
    stats.set_defaults(handler=run_stats)

    synth = actions.add_parser(
        "synth", help="write a synthetic workload that matches published statistics"
    )
    synth.add_argument("kind", choices=_SYNTHETIC, help="which published workload to imitate")
    synth.add_argument("-n", type=int, default=10_000, help="number of requests (10000)")
    synth.add_argument("--seed", type=int, default=0, help="random seed (0)")
    synth.add_argument("--max-context", type=int, default=131072, metavar="TOKENS",
                       help="cut K so that T + K fits this context (default 131072, the 128K "
                            "context of Llama-3.1 and DeepSeek-V3; 0: no cap)")
    synth.add_argument(
        "-o", "--output", required=True, metavar="FILE",
        help="output table: .csv or .jsonl (every row is marked synthetic)",
    )
    synth.set_defaults(handler=run_synth)


_FLAG_OPTIONS: dict[str, tuple[str, str, Any]] = {
    # flag attribute: (flag, loader option, loader value when the flag is given)
    "include_system": ("--include-system", "include_system", True),
    "reply_as_new": ("--reply-as-new", "previous_reply_cached", False),
    "no_cache_documents": ("--no-cache-documents", "cache_documents", False),
    "preloaded_documents": ("--preloaded-documents", "preloaded", True),
}

_APPLIES: dict[str, tuple[str, ...]] = {
    "--include-system": ("sharegpt",),
    "--reply-as-new": ("sharegpt",),
    "--no-cache-documents": ("docqa",),
    "--preloaded-documents": ("docqa",),
    "--lru-tokens": ("mooncake",),
    "--tokenizer": ("sharegpt", "docqa"),
}


def load_from_args(args: argparse.Namespace) -> Workload:
    """The workload that ``stats``' FILE and loader flags describe."""
    from kvroof.workload.formats import guess_format, load_workload
    from kvroof.workload.tokens import token_counter

    fmt: str = args.format or guess_format(args.file)
    options: dict[str, Any] = {"skip_bad": args.skip_bad}
    given: list[str] = []
    for attribute, (flag, option, value) in _FLAG_OPTIONS.items():
        if getattr(args, attribute):
            options[option] = value
            given.append(flag)
    if args.lru_tokens is not None:  # checked by the loader, its errors named by flag below
        options["lru_tokens"] = args.lru_tokens
        given.append("--lru-tokens")
    if args.tokenizer is not None:
        given.append("--tokenizer")
    if args.no_cache_documents and args.preloaded_documents:
        raise KvroofError("--no-cache-documents and --preloaded-documents contradict each other")
    for flag in given:
        if fmt not in _APPLIES[flag]:
            raise KvroofError(
                f"{flag} applies to the {' and '.join(_APPLIES[flag])} format(s), and "
                f"{args.file} is read as {fmt}"
            )
    if fmt in ("sharegpt", "docqa"):
        options["tokenizer"] = token_counter(args.tokenizer)
    try:
        return load_workload(args.file, fmt, **options)
    except KvroofError as error:
        if str(error).startswith("lru_tokens "):
            raise KvroofError("--lru-tokens" + str(error).removeprefix("lru_tokens")) from None
        raise


def stats_report(stats: WorkloadStats) -> dict[str, Any]:
    """What ``stats --json`` prints."""
    return {"kind": "workload_stats", **stats.as_dict()}


def stats_rows(stats: WorkloadStats) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the percentile table (T, K, kappa_ratio; output when known)."""
    columns = [("T (new)", stats.new_tokens), ("K (cached)", stats.cached_tokens),
               ("kappa = K/T", stats.kappa_ratio)]
    if stats.output_tokens is not None:
        columns.append(("output", stats.output_tokens))
    header = ["statistic", *(title for title, _ in columns)]
    rows = []
    for key in ("p10", "p25", "p50", "p75", "p90", "p99", "iqr", "mean"):
        label = {"iqr": "IQR", "mean": "mean"}.get(key, key)
        rows.append([label, *(count(getattr(d, key)) for _, d in columns)])
    return header, rows


def _heading(stats: WorkloadStats) -> list[str]:
    lines = []
    if stats.synthetic:
        lines.append("SYNTHETIC workload (generated, not measured)")
    lines.append(f"workload: {stats.name}")
    lines.append(f"source: {stats.source}")
    counts = f"requests: {count(stats.count)}"
    if stats.skipped:
        counts += f" ({count(stats.skipped)} bad records skipped)"
    if stats.output_tokens is not None and stats.output_known < stats.count:
        counts += f"; output length known for {count(stats.output_known)}"
    if stats.kappa_ratio.infinite:
        counts += (f"; {count(stats.kappa_ratio.infinite)} with T = 0 (kappa = inf, not in the "
                   "mean)")
    lines.append(counts)
    return lines


def _given_deployment_flags(args: argparse.Namespace) -> list[str]:
    """The deployment flags set to other than their defaults (the defaults read back from a
    parser with the same flags and no arguments)."""
    blank = argparse.ArgumentParser(add_help=False)
    add_deployment_flags(blank, model_required=False)
    defaults = vars(blank.parse_args([]))
    return [("--no-" if getattr(args, dest) is False else "--") + dest.replace("_", "-")
            for dest, default in defaults.items()
            if dest != "model" and getattr(args, dest, default) != default]


def _check_no_deployment_flags(args: argparse.Namespace) -> None:
    """Without --model there are no transfer-bound shares: a flag for them is an error, not
    silently ignored; with it, hardware is needed (both checked before the file is read)."""
    if args.model is not None:
        if args.system is None and args.accelerator is None:
            raise KvroofError("--model: transfer-bound shares need --system or --accelerator")
        return
    given = _given_deployment_flags(args)
    if args.mode != "both":
        given.append("--mode")
    if given or args.compare:
        raise KvroofError(f"{(given or ['--compare'])[0]}: applies to the transfer-bound "
                          "shares, which need --model (and --system or --accelerator)")


def bound_shares_from_args(args: argparse.Namespace, workload: Workload) -> list[BoundShares]:
    """Transfer-bound shares on the deployment the flags give (and each --compare system)."""
    from kvroof.analysis.workload.bound import Mode, compare_deployments

    if args.model is None:
        _check_no_deployment_flags(args)
        return []
    from kvroof.cost.memory_fit import check_fit, fit_problem

    deployments = [deployment_from_args(args)]
    check_fit(deployments[0])
    for item in args.compare:
        system, sep, tp_text = item.partition(":")
        tp = args.tp
        if sep:
            try:
                tp = int(tp_text)
            except ValueError:
                raise KvroofError(
                    f"--compare: expected SYSTEM[:TP], got {short_repr(item)}") from None
        args_for = argparse.Namespace(**{**vars(args), "system": system, "accelerator": None,
                                         "link": None, "tp": tp})
        try:
            compared = deployment_from_args(args_for)
        except KvroofError as error:
            raise KvroofError(f"--compare {system}: {error}") from None
        problem = fit_problem(compared)
        if problem:
            warnings.warn(f"--compare {item}: {compared.model.name} {problem}; left out",
                          stacklevel=2)
            continue
        deployments.append(compared)
    check_flags_apply(args, deployments)
    modes: list[Mode] = ["paper", "full"] if args.mode == "both" else [args.mode]
    try:
        return compare_deployments(workload, deployments, modes)
    except KvroofError as error:
        raise flag_error(error) from None


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def bound_rows(shares: list[BoundShares]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the transfer-bound table."""
    header = ["deployment", "mode", "kappa_crit", "requests", "cached tokens",
              "TTFT serial", "TTFT layerwise", "TTFT ideal", "median TTFT layerwise"]
    rows = []
    for share in shares:
        share_of = share.ttft_transfer_share or {}
        ttft = share.ttft or {}
        rows.append([
            share.deployment, share.mode,
            "per request" if share.kappa_crit is None else f"{share.kappa_crit:.3g}",
            _percent(share.requests_transfer_bound), _percent(share.cached_tokens_transfer_bound),
            *(_percent(share_of[m]) if m in share_of else "-" for m in
              ("serial", "layerwise", "ideal")),
            duration(ttft["layerwise"].p50, 3) if "layerwise" in ttft else "-",
        ])
    return header, rows


def run_stats(args: argparse.Namespace) -> None:
    from kvroof.cli.main import NUMERIC_WARNINGS
    from kvroof.workload.stats import describe

    _check_no_deployment_flags(args)  # before the file is read
    # warnings (approximate token counts, systems left out) wait until the work is done: an
    # error is then the only line
    with warnings.catch_warnings(record=True) as held:
        warnings.simplefilter("always")
        warnings.filterwarnings("error", message=NUMERIC_WARNINGS, category=RuntimeWarning)
        with slow_step(f"reading {file_label(args.file)}", large=large_file(args.file),
                       quiet=args.json) as step:
            workload = load_from_args(args)
            step.note = f"{count(len(workload))} requests"
        with slow_step("computing the statistics", quiet=args.json):
            stats = describe(workload)
            shares = bound_shares_from_args(args, workload)
    for warning in held:
        warnings.warn_explicit(warning.message, warning.category, warning.filename,
                               warning.lineno)
    if args.json:
        report = stats_report(stats)
        if shares:
            report["transfer_bound"] = [share.as_dict() for share in shares]
        print_json(report)
        return
    if args.csv:
        columns = {"new_tokens": stats.new_tokens, "cached_tokens": stats.cached_tokens,
                   "kappa_ratio": stats.kappa_ratio, "output_tokens": stats.output_tokens}
        print_csv([{"quantity": name, **dist.as_dict()} for name, dist in columns.items()
                   if dist is not None])
        if shares:
            print()
            print_csv([flat_record(share.as_dict()) for share in shares])
        return
    for line in _heading(stats):
        print(line)
    print()
    header, rows = stats_rows(stats)
    print_table(rows, header=header)
    if shares:
        print()
        print("transfer-bound share (TTFT columns: exposed transfer / TTFT, summed)")
        header, rows = bound_rows(shares)
        print_table(rows, header=header)


def run_synth(args: argparse.Namespace) -> None:
    from kvroof.workload.synth import MAX_REQUESTS, context_cut, synthesize
    from kvroof.workload.table import table_kind, write_table

    output = Path(args.output)
    table_kind(output, writing=True)  # check the extension before drawing
    if not 1 <= args.n <= MAX_REQUESTS:
        raise KvroofError(f"-n: expected a number of requests from 1 to {MAX_REQUESTS:,}, got "
                          f"{args.n:,}")
    if args.seed < 0:
        raise KvroofError(f"--seed: must not be negative, got {args.seed}")
    if args.max_context < 0 or args.max_context == 1:
        raise KvroofError(f"--max-context: expected 0 (no cap) or at least 2 tokens, got "
                          f"{args.max_context}")
    workload = synthesize(args.kind, args.n, args.seed, args.max_context or None)
    write_table(workload, output)
    cut = context_cut(workload)
    print(f"wrote {len(workload):,} SYNTHETIC requests ({workload.name}, seed {args.seed}"
          f"{'; ' + cut if cut else ''}) to {output}")
