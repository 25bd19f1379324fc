"""``kvroof kappa`` and ``kvroof ttft``: the cost model from the command line."""

from __future__ import annotations

import argparse
import math
from typing import Any

from kvroof.cli.common import print_json, print_table
from kvroof.cli.deployment_flags import add_deployment_flags, deployment_from_args, flag_error
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.timing import OVERLAP_MODES, ttft
from kvroof.cost.transfer import kv_bytes_per_rank
from kvroof.errors import KvroofError
from kvroof.units import Kind, format_quantity

__all__ = ["kappa_report", "register", "ttft_report"]


def register(commands: Any) -> None:
    kappa = commands.add_parser(
        "kappa", help="critical cached-to-new token ratio (paper or full mode)",
        description="kappa_crit: above K/T = kappa_crit, loading the cache takes longer than "
                    "prefilling the new tokens.",
    )
    add_deployment_flags(kappa)
    kappa.add_argument("--mode", choices=("paper", "full"), default="full",
                       help="paper: 2 N_active / B_kv x BW / C; full: everything (default)")
    kappa.add_argument("--new-tokens", type=float, default=128.0, metavar="T",
                       help="new tokens T for full mode (default 128)")
    kappa.add_argument("--json", action="store_true", help="print JSON (SI units)")
    kappa.set_defaults(handler=run_kappa)

    ttft_parser = commands.add_parser("ttft", help="time to first token of one request")
    add_deployment_flags(ttft_parser)
    ttft_parser.add_argument("--new-tokens", type=float, required=True, metavar="T")
    ttft_parser.add_argument("--cached-tokens", type=float, required=True, metavar="K")
    ttft_parser.add_argument("--overlap", choices=OVERLAP_MODES, default="serial",
                             help="serial (paper Eq. 5), layerwise or ideal (default serial)")
    ttft_parser.add_argument("--json", action="store_true", help="print JSON (SI units)")
    ttft_parser.set_defaults(handler=run_ttft)


def _hardware(dep: Deployment) -> dict[str, Any]:
    return {
        "model": dep.model.name,
        "accelerator": dep.accelerator.name,
        "link": dep.link.name,
        "system": None if dep.system is None else dep.system.name,
        "tp": dep.tp,
    }


def kappa_report(dep: Deployment, mode: str, new_tokens: float) -> dict[str, Any]:
    """The numbers ``kvroof kappa`` prints (SI units), from the library."""
    paper = kappa_paper_for(dep)
    report: dict[str, Any] = {
        "mode": mode,
        **_hardware(dep),
        "kappa_model": float(paper.kappa_model),
        "kappa_hw": float(paper.kappa_hw),
        "kv_bytes_per_token": kv_bytes_per_token(dep.model, dep.kv_dtype),
    }
    if mode == "paper":
        report.update(
            kappa_crit=float(paper.kappa_crit),
            never_transfer_bound=False,
            reason="",
            active_params=float(paper.active_params),
            flops_per_token=2 * float(paper.active_params),
            bandwidth=float(paper.bandwidth),
            compute=float(paper.compute),
        )
        return report
    result = kappa_crit(dep, new_tokens)
    never = bool(result.never_transfer_bound)
    report.update(
        new_tokens=new_tokens,
        kappa_crit=None if never else float(result.kappa_crit),
        crossover_tokens=None if never else float(result.crossover_tokens),
        never_transfer_bound=never,
        reason=str(result.reason),
        flops_per_token=float(prefill_flops(dep.model, new_tokens, 0, dep.mla_mode).total)
        / new_tokens,
        bytes_per_token_per_rank=float(kv_bytes_per_rank(dep, 1.0)),
        bandwidth=float(dep.effective_bandwidth),
        compute=float(dep.effective_compute) * dep.tp,
        method=result.method,
    )
    return report


def run_kappa(args: argparse.Namespace) -> None:
    if not (args.new_tokens > 0 and math.isfinite(args.new_tokens)):
        raise KvroofError(f"--new-tokens: must be positive, got {args.new_tokens:g}")
    dep = deployment_from_args(args)
    try:
        report = kappa_report(dep, args.mode, args.new_tokens)
    except KvroofError as error:
        raise flag_error(error) from None
    if args.json:
        print_json(report)
        return
    crit = report["kappa_crit"]
    value = "never transfer-bound" if crit is None else f"{crit:.4g}"
    rows = [
        ["deployment", dep.label],
        ["mode", args.mode + (f" (T = {args.new_tokens:g})" if args.mode == "full" else "")],
        ["kappa_crit", value],
        ["kappa_M (2 N_active / B_kv)", f"{report['kappa_model']:.4g} FLOP/B"],
        ["kappa_HW (BW / C)", f"{report['kappa_hw']:.4g} B/FLOP"],
        ["KV bytes per token", format_quantity(report["kv_bytes_per_token"], Kind.CAPACITY)],
        ["FLOPs per new token", f"{report['flops_per_token']:.4g} FLOP"],
        ["bandwidth (per GPU)", format_quantity(report["bandwidth"], Kind.BANDWIDTH)],
        ["compute" + (" (TP group)" if args.mode == "full" else ""),
         format_quantity(report["compute"], Kind.COMPUTE)],
    ]
    if report["reason"]:
        rows.append(["why", report["reason"]])
    print_table(rows)


def ttft_report(dep: Deployment, new_tokens: float, cached_tokens: float,
                overlap: str) -> dict[str, Any]:
    """The numbers ``kvroof ttft`` prints (SI units), from the library."""
    result = ttft(dep, new_tokens, cached_tokens, overlap)  # type: ignore[arg-type]
    return {
        **_hardware(dep),
        "new_tokens": new_tokens,
        "cached_tokens": cached_tokens,
        "kappa_ratio": cached_tokens / new_tokens if new_tokens > 0 else math.inf,
        **{key: (value if isinstance(value, str) else float(value))
           for key, value in result.as_dict().items()},
    }


def run_ttft(args: argparse.Namespace) -> None:
    dep = deployment_from_args(args)
    try:
        report = ttft_report(dep, args.new_tokens, args.cached_tokens, args.overlap)
    except KvroofError as error:
        raise flag_error(error) from None
    if args.json:
        print_json(report)
        return

    def seconds(key: str) -> str:
        return format_quantity(report[key], Kind.TIME)

    print_table([
        ["deployment", dep.label],
        ["request", f"T = {args.new_tokens:g} new, K = {args.cached_tokens:g} cached "
                    f"(K/T = {report['kappa_ratio']:.4g})"],
        ["overlap", args.overlap],
        ["TTFT", seconds("ttft_s")],
        ["compute", seconds("compute_s")],
        ["transfer", seconds("transfer_s")],
        ["exposed transfer", seconds("exposed_transfer_s")],
        ["P_OH (transfer / compute)", f"{report['p_oh']:.4g}"],
        ["transfer share of TTFT", f"{100 * report['transfer_share']:.1f} %"],
        ["bound", report["bound"]],
        ["achieved (per GPU)", format_quantity(report["achieved_flops"], Kind.COMPUTE)],
        ["compute utilization", f"{100 * report['compute_utilization']:.1f} %"],
    ])
