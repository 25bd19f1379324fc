"""``kvroof kappa`` and ``kvroof ttft``: the cost model from the command line.

Both refuse a deployment that does not fit (paper mode warns and computes: a formula) and say
when the host DRAM caps a ``--bandwidth`` override (one warning; ``kvroof kappa`` prints the
bandwidth given beside the one used). They check before they call the library, which then
stays silent (:mod:`kvroof.cost.caller_warnings`), so no warning is printed twice."""

from __future__ import annotations

import argparse
import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from kvroof.cli.commands import command_help
from kvroof.cli.common import flat_record, print_csv, print_json, print_table, token_flag
from kvroof.cli.deployment_flags import (
    add_deployment_flags,
    check_flags_apply,
    deployment_from_args,
    flag_error,
)
from kvroof.cost.caller_warnings import bandwidth_cap, warn_bandwidth_cap
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.cost.kv import kv_bytes_per_token, state_bytes
from kvroof.cost.memory_fit import check_fit, memory_fit
from kvroof.cost.timing import OVERLAP_MODES, compute_breakdown, reused_tokens, ttft
from kvroof.cost.transfer import kv_bytes_per_rank
from kvroof.describe import layer_mix
from kvroof.errors import KvroofError
from kvroof.units import Kind, format_quantity

__all__ = ["DEFAULT_TOKEN_BUDGET", "kappa_report", "other_regime", "register", "ttft_report"]

DEFAULT_TOKEN_BUDGET = 8192
"""The engine's tokens per iteration for the "full iteration" regime: vLLM's
``max_num_batched_tokens`` for ``vllm serve`` on 80 GB-class GPUs (vllm/engine/arg_utils.py)."""


def _add_regime_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--token-budget", type=token_flag(1), default=None,
                        metavar="N",
                        help="tokens of a full iteration, for the other regime shown beside "
                             f"the result (default {DEFAULT_TOKEN_BUDGET}, vLLM's; an iteration "
                             "holds at least the request's own tokens)")


def _add_output_flags(parser: argparse.ArgumentParser) -> None:
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print JSON (SI units)")
    output.add_argument("--csv", action="store_true",
                        help="print one CSV record (SI units; nested fields dotted)")


def _iteration_tokens(dep: Deployment) -> float | None:
    n = dep.iteration_tokens
    return None if n is None else float(np.asarray(n, dtype=np.float64))


def regime_of(dep: Deployment) -> str:
    """``alone`` (the request reads the weights for itself) or ``iteration`` (it shares one
    weight read with the other tokens of a busy iteration)."""
    return "alone" if dep.iteration_tokens is None else "iteration"


def other_regime(dep: Deployment, new_tokens: float, budget: float,
                 cached_tokens: float = 0.0) -> Deployment:
    """The deployment in the regime ``dep`` is not in: alone if it is inside an iteration;
    inside a full iteration of ``budget`` tokens if it is alone, or of the tokens the request
    computes where they are more (T, plus the cached tokens that whole-block reuse recomputes:
    an iteration holds at least its own request)."""
    if dep.iteration_tokens is not None:
        return dataclasses.replace(dep, iteration_tokens=None)
    computed, _ = reused_tokens(dep, float(new_tokens), float(cached_tokens))
    return dataclasses.replace(dep, iteration_tokens=max(budget, computed))


def _regime_text(dep: Deployment, new_tokens: float) -> str:
    n = _iteration_tokens(dep)
    if n is None:
        return f"request alone (its {new_tokens:g} tokens read the weights)"
    return (f"inside an iteration of {n:g} tokens (the request pays {new_tokens:g}/{n:g} of "
            "the weight reads)")


def register(commands: Any) -> None:
    kappa = commands.add_parser(
        "kappa", help=command_help("kappa"),
        description="kappa_crit: above K/T = kappa_crit, loading the cache takes longer than "
                    "prefilling the new tokens.",
    )
    add_deployment_flags(kappa)
    kappa.add_argument("--mode", choices=("paper", "full"), default="full",
                       help="paper: 2 N_active / B_kv x BW / C; full: everything (default)")
    kappa.add_argument("--new-tokens", type=token_flag(1), default=None, metavar="T",
                       help="new tokens T for full mode (default 128)")
    _add_regime_flags(kappa)
    _add_output_flags(kappa)
    kappa.set_defaults(handler=run_kappa)

    ttft_parser = commands.add_parser("ttft", help=command_help("ttft"))
    add_deployment_flags(ttft_parser)
    ttft_parser.add_argument("--new-tokens", type=token_flag(1), required=True, metavar="T")
    ttft_parser.add_argument("--cached-tokens", type=token_flag(0), required=True, metavar="K")
    ttft_parser.add_argument("--overlap", choices=OVERLAP_MODES, default=None,
                             help="serial (paper Eq. 5), layerwise or ideal (default: the "
                                  "engine's loading, else serial)")
    _add_regime_flags(ttft_parser)
    _add_output_flags(ttft_parser)
    ttft_parser.set_defaults(handler=run_ttft)


def _hardware(dep: Deployment) -> dict[str, Any]:
    return {
        "model": dep.model.name,
        "accelerator": dep.accelerator.name,
        "link": dep.link.name,
        "system": None if dep.system is None else dep.system.name,
        "tp": dep.tp,
        "engine": None if dep.engine is None else dep.engine.name,
    }


def _engine_text(dep: Deployment) -> str:
    engine = dep.engine
    if engine is None:
        return "none (kvroof's defaults)"
    return f"{engine.name}: {engine.label}"


def _efficiencies(dep: Deployment, new_tokens: float) -> dict[str, Any]:
    fit = memory_fit(dep)
    return {
        "compute_efficiency": float(dep.compute_efficiency_at(new_tokens)),
        "compute_efficiency_source": dep.compute_efficiency_source,
        "hbm_efficiency": float(dep.resolved_hbm_efficiency),
        "weight_bytes_per_gpu": fit.weights,
        "weight_dtype": fit.weight_dtype,
        "hbm_needed_per_gpu": fit.needed,
        "hbm_usable_per_gpu": fit.usable,
    }


def _kappa_value(dep: Deployment, new_tokens: float) -> dict[str, Any]:
    result = kappa_crit(dep, new_tokens)
    never = bool(result.never_transfer_bound)
    return {
        "regime": regime_of(dep),
        "iteration_tokens": _iteration_tokens(dep),
        "kappa_crit": None if never else float(result.kappa_crit),
        "crossover_tokens": None if never else float(result.crossover_tokens),
        "never_transfer_bound": never,
        "reason": str(result.reason),
        "method": result.method,
    }


def _bandwidths(dep: Deployment, paper: Any) -> dict[str, Any]:
    """The bandwidth given (the ``--bandwidth`` override, else None), the link's (times its
    efficiency: paper mode's BW), the one transfers use (min(link x efficiency, host DRAM
    share)), the host DRAM share (None without a system), and kappa_HW and the paper's
    kappa_crit at the bandwidth used."""
    used = float(dep.effective_bandwidth)
    dram = float(dep.host_dram_share)
    kappa_hw_used = used / float(paper.compute)
    return {
        "bandwidth_given": None if dep.bandwidth is None else float(
            np.asarray(dep.bandwidth, dtype=np.float64)),
        "bandwidth_link": float(paper.bandwidth),
        "bandwidth_used": used,
        "host_dram_share": dram if math.isfinite(dram) else None,
        "kappa_hw_used": kappa_hw_used,
        "kappa_crit_paper_used": float(paper.kappa_model) * kappa_hw_used,
    }


def kappa_report(dep: Deployment, mode: str, new_tokens: float,
                 token_budget: float = DEFAULT_TOKEN_BUDGET) -> dict[str, Any]:
    """The numbers ``kvroof kappa`` prints (SI units), from the library. ``bandwidth`` is what
    the mode's formula uses (paper mode: the link's, no DRAM bound; full mode: what transfers
    run at); ``bandwidth_used`` what transfers run at, ``bandwidth_given`` the override, and
    ``kappa_hw_used`` and ``kappa_crit_paper_used`` the paper's factors at the bandwidth used."""
    paper = kappa_paper_for(dep)
    report: dict[str, Any] = {
        "mode": mode,
        **_hardware(dep),
        "kappa_model": float(paper.kappa_model),
        "kappa_hw": float(paper.kappa_hw),
        "kv_bytes_per_token": kv_bytes_per_token(dep.model, dep.kv_dtype),
        "state_bytes_per_request": state_bytes(dep.model),
        "layers": layer_mix(dep.model),
        **_bandwidths(dep, paper),
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
    value = _kappa_value(dep, new_tokens)
    at_k = 0.0 if value["crossover_tokens"] is None else value["crossover_tokens"]
    parts = compute_breakdown(dep, new_tokens, at_k)
    report.update(
        new_tokens=new_tokens,
        **value,
        other_regime=_kappa_value(other_regime(dep, new_tokens, token_budget), new_tokens),
        compute_limit_at_crossover=parts.limit,
        flops_per_token=float(prefill_flops(dep.model, new_tokens, 0, dep.mla_mode).total)
        / new_tokens,
        bytes_per_token_per_rank=float(kv_bytes_per_rank(dep, 1.0)),
        bandwidth=float(dep.effective_bandwidth),
        compute=float(dep.effective_compute) * dep.tp,
        hbm_bandwidth=float(dep.effective_hbm_bandwidth),
        **_efficiencies(dep, new_tokens),
    )
    return report


def _roofline_only(dep: Deployment) -> str:
    """A row-name suffix for the roofline's own figures (peak x achievable efficiency) when the
    kernel tables timed the compute, so they are not read as what timed it."""
    return ", roofline's" if dep.uses_kernels else ""


def _compute_model_rows(dep: Deployment) -> list[list[str]]:
    """The "compute model" row: which model timed the compute, and whether any kernel table
    covers the accelerator (without one every op falls back to its roofline, which the row says
    instead of hiding it)."""
    if dep.compute_model == "roofline":
        return [["compute model", "roofline (one whole-model roofline at the achievable "
                 "figures; --compute-model roofline)"]]
    from kvroof.cost.compute_figures import ROOFLINE_OVERRIDE, roofline_setting
    from kvroof.kernels import covered

    ops = covered(dep.accelerator)
    if not dep.uses_kernels and roofline_setting(dep) is not None:  # auto, overridden
        text = f"roofline ({ROOFLINE_OVERRIDE}: auto keeps the roofline, which honours it)"
    elif not dep.uses_kernels:  # auto, without tables
        text = f"roofline (auto: no kernel table covers {dep.accelerator.name})"
    elif not ops:
        text = (f"kernels, but no kernel table covers {dep.accelerator.name}: every op is "
                "timed at its roofline (the fallback); --compute-model auto says roofline")
    else:
        text = (f"kernels (measured per-op tables for {dep.accelerator.name}: "
                f"{', '.join(sorted(ops))}; other ops at their roofline)")
    return [["compute model", text]]


def _fit_or_refuse(dep: Deployment, kv_tokens: float | None = None, *, strict: bool = True
                   ) -> None:
    try:
        check_fit(dep, kv_tokens)
    except KvroofError as error:
        if strict:
            raise
        warnings.warn(f"{error} (paper mode computes the formula regardless)", stacklevel=2)


def _memory_text(report: dict[str, Any]) -> str:
    needed = format_quantity(report["hbm_needed_per_gpu"], Kind.CAPACITY)
    usable = format_quantity(report["hbm_usable_per_gpu"], Kind.CAPACITY)
    return f"{needed} of {usable} usable ({report['weight_dtype']} weights)"


def _rate(value: float) -> str:
    return format_quantity(value, Kind.BANDWIDTH)


def _bandwidth_text(report: dict[str, Any], capped: bool) -> str:
    """The bandwidth the mode's formula uses, and when the host DRAM caps an override, the one
    given beside the one transfers use."""
    text = _rate(report["bandwidth"])
    if not capped:
        return text
    dram = _rate(report["bandwidth_used"])
    if report["mode"] == "paper":
        return (f"{text} (--bandwidth; paper mode has no DRAM bound: transfers run at {dram}, "
                "the host DRAM share)")
    return f"{text} (the host DRAM share caps the --bandwidth {_rate(report['bandwidth_given'])})"


def _kappa_text(value: dict[str, Any]) -> str:
    crit = value["kappa_crit"]
    if crit is None:
        return "never transfer-bound"
    if crit == 0:
        return "0 (transfer-bound from the first cached token: what a load moves whatever K, " \
               "such as a fixed state, outlasts the compute)"
    return f"{crit:.4g}"


def run_kappa(args: argparse.Namespace) -> None:
    if args.mode == "paper":  # the paper's kappa_crit has no T and no iteration
        for flag, value in (("--new-tokens", args.new_tokens),
                            ("--iteration-tokens", args.iteration_tokens),
                            ("--token-budget", args.token_budget)):
            if value is not None:
                raise KvroofError(f"{flag}: paper mode does not depend on it (kappa_crit = "
                                  "2 N_active / B_kv x BW / C); use --mode full")
    if args.new_tokens is None:
        args.new_tokens = 128.0
    if args.token_budget is None:
        args.token_budget = float(DEFAULT_TOKEN_BUDGET)
    dep = deployment_from_args(args)
    check_flags_apply(args, dep)
    _fit_or_refuse(dep, strict=args.mode == "full")
    warn_bandwidth_cap(dep)
    try:
        report = kappa_report(dep, args.mode, args.new_tokens, args.token_budget)
    except KvroofError as error:
        raise flag_error(error) from None
    if args.json:
        print_json(report)
        return
    if args.csv:
        print_csv([flat_record(report)])
        return
    rows = [
        ["deployment", dep.label],
        ["engine", _engine_text(dep)],
        ["mode", args.mode + (f" (T = {args.new_tokens:g})" if args.mode == "full" else "")],
        *(_compute_model_rows(dep) if args.mode == "full" else []),
    ]
    if args.mode == "full":
        other = report["other_regime"]
        other_dep = other_regime(dep, args.new_tokens, args.token_budget)
        rows += [
            ["regime", _regime_text(dep, args.new_tokens)],
            ["kappa_crit", _kappa_text(report)],
            ["other regime", f"{_kappa_text(other)}: {_regime_text(other_dep, args.new_tokens)}"],
            ["compute limit at K*", "HBM reads (weights and KV)"
             if report["compute_limit_at_crossover"] == "hbm" else "FLOPs"],
        ]
    else:
        rows.append(["kappa_crit", _kappa_text(report)])
    capped = bool(bandwidth_cap(dep))
    if capped and args.mode == "paper":
        rows.append(["kappa_crit, at the BW used", f"{report['kappa_crit_paper_used']:.4g} "
                     f"({_rate(report['bandwidth_used'])}: the host DRAM share caps the "
                     "transfers)"])
    kappa_hw = f"{report['kappa_hw']:.4g} B/FLOP"
    if capped:  # the paper's factor with the BW given, and with the BW transfers run at
        used = f"at the {_rate(report['bandwidth_used'])} used"
        link = f"at the link's {_rate(report['bandwidth_link'])}"
        kappa_hw = (f"{report['kappa_hw_used']:.4g} B/FLOP {used} ({report['kappa_hw']:.4g} "
                    f"{link})" if args.mode == "full" else
                    f"{kappa_hw} {link} ({report['kappa_hw_used']:.4g} {used})")
    rows += [
        ["kappa_M (2 N_active / B_kv)", f"{report['kappa_model']:.4g} FLOP/B"],
        ["kappa_HW (BW / C)", kappa_hw],
        ["KV bytes per token", format_quantity(report["kv_bytes_per_token"], Kind.CAPACITY)
         + (" (layers that keep every token)" if dep.model.has_layer_kinds else "")],
    ]
    if dep.model.has_layer_kinds:
        rows.append(["layers", report["layers"]])
    if report["state_bytes_per_request"]:
        rows.append(["fixed state per request",
                     format_quantity(report["state_bytes_per_request"], Kind.CAPACITY)])
    rows += [
        ["FLOPs per new token", f"{report['flops_per_token']:.4g} FLOP"],
        ["bandwidth (per GPU)", _bandwidth_text(report, capped)],
        ["compute" + (" (TP group)" if args.mode == "full" else "") + _roofline_only(dep),
         format_quantity(report["compute"], Kind.COMPUTE)],
    ]
    if args.mode == "full":
        rows += [
            ["compute efficiency" + _roofline_only(dep),
             f"{report['compute_efficiency']:.3g} ({report['compute_efficiency_source']})"],
            ["HBM (per GPU)", f"{format_quantity(report['hbm_bandwidth'], Kind.BANDWIDTH)} "
                              f"(efficiency {report['hbm_efficiency']:.3g})"],
            ["memory (per GPU)", _memory_text(report)],
        ]
    if report["reason"]:
        rows.append(["why", report["reason"]])
    print_table(rows)


def ttft_report(dep: Deployment, new_tokens: float, cached_tokens: float,
                overlap: str | None, token_budget: float = DEFAULT_TOKEN_BUDGET
                ) -> dict[str, Any]:
    """The numbers ``kvroof ttft`` prints (SI units), from the library."""
    result = ttft(dep, new_tokens, cached_tokens, overlap)  # type: ignore[arg-type]
    run_t, run_k = reused_tokens(dep, float(new_tokens), float(cached_tokens))
    parts = compute_breakdown(dep, run_t, run_k)
    other_dep = other_regime(dep, new_tokens, token_budget, cached_tokens)
    other = ttft(other_dep, new_tokens, cached_tokens, overlap)  # type: ignore[arg-type]
    return {
        **_hardware(dep),
        "new_tokens": new_tokens,
        "cached_tokens": cached_tokens,
        "kappa_ratio": cached_tokens / new_tokens if new_tokens > 0 else math.inf,
        "computed_tokens": run_t,
        "loaded_tokens": run_k,
        "regime": regime_of(dep),
        "iteration_tokens": _iteration_tokens(dep),
        **{key: (value if isinstance(value, str) else float(value))
           for key, value in result.as_dict().items()},
        "flop_time_s": float(parts.flop_time),
        "hbm_time_s": float(parts.hbm_time),
        "allreduce_s": float(parts.comm_time),
        "compute_limit": parts.limit,
        "other_regime": {
            "regime": regime_of(other_dep),
            "iteration_tokens": _iteration_tokens(other_dep),
            "ttft_s": float(other.ttft),
            "bound": str(other.bound),
        },
        **_efficiencies(dep, new_tokens),
    }


def run_ttft(args: argparse.Namespace) -> None:
    if args.token_budget is None:
        args.token_budget = float(DEFAULT_TOKEN_BUDGET)
    dep = deployment_from_args(args)
    check_flags_apply(args, dep)
    try:
        _fit_or_refuse(dep, args.new_tokens + args.cached_tokens
                       if math.isfinite(args.new_tokens + args.cached_tokens) else None)
        warn_bandwidth_cap(dep)
        report = ttft_report(dep, args.new_tokens, args.cached_tokens, args.overlap,
                             args.token_budget)
    except KvroofError as error:
        raise flag_error(error) from None
    if args.json:
        print_json(report)
        return
    if args.csv:
        print_csv([flat_record(report)])
        return

    def seconds(key: str) -> str:
        return format_quantity(report[key], Kind.TIME)

    other = report["other_regime"]
    other_dep = other_regime(dep, args.new_tokens, args.token_budget, args.cached_tokens)
    rows = [
        ["deployment", dep.label],
        ["engine", _engine_text(dep)],
        ["request", f"T = {args.new_tokens:g} new, K = {args.cached_tokens:g} cached "
                    f"(K/T = {report['kappa_ratio']:.4g})"],
    ]
    computed = report["computed_tokens"]  # T, plus what whole-block reuse recomputes
    if report["loaded_tokens"] != args.cached_tokens:
        rows.append(["prefix reuse", f"{report['loaded_tokens']:g} tokens loaded in whole "
                                     f"{dep.reuse_block_tokens}-token blocks, "
                                     f"{report['computed_tokens']:g} computed"])
    if report["request_overhead_s"]:
        rows.append(["request overhead", seconds("request_overhead_s")])
    print_table([
        *rows,
        *_compute_model_rows(dep),
        ["overlap", report["overlap"]],
        ["regime", _regime_text(dep, computed)],
        ["TTFT", seconds("ttft_s")],
        ["compute", f"{seconds('compute_s')} (FLOPs {seconds('flop_time_s')}, HBM reads "
                    f"{seconds('hbm_time_s')}, all-reduce {seconds('allreduce_s')})"],
        ["transfer", seconds("transfer_s")],
        ["exposed transfer", seconds("exposed_transfer_s")],
        ["P_OH (transfer / compute)", f"{report['p_oh']:.4g}"],
        ["transfer share of TTFT", f"{100 * report['transfer_share']:.1f} %"],
        ["bound", report["bound"]],
        ["other regime", f"TTFT {format_quantity(other['ttft_s'], Kind.TIME)}, "
                         f"{other['bound']}-bound: {_regime_text(other_dep, computed)}"],
        ["achieved (per GPU)", format_quantity(report["achieved_flops"], Kind.COMPUTE)],
        ["compute utilization", f"{100 * report['compute_utilization']:.1f} %"],
        ["compute efficiency" + _roofline_only(dep),
         f"{report['compute_efficiency']:.3g} ({report['compute_efficiency_source']})"],
    ])
