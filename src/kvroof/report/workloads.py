"""The report's workload section: the synthetic workloads (or the config's traces), how much of
each is transfer-bound on each deployment, and the distribution figure."""

from __future__ import annotations

import dataclasses
from typing import Any

from kvroof.analysis.workload.bound import transfer_bound_shares
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.memory_fit import fit_problem
from kvroof.report.config import ReportConfig
from kvroof.report.tables import Table
from kvroof.specs.registry import Registry
from kvroof.workload.formats import load_workload
from kvroof.workload.records import Workload
from kvroof.workload.synth import KINDS, context_cut, synthesize

__all__ = ["report_deployments", "report_workloads", "workload_table"]


def report_workloads(config: ReportConfig) -> list[Workload]:
    """The config's traces, or the three synthetic workloads when it names none."""
    if config.workloads:
        loaded = []
        for trace in config.workloads:
            workload = load_workload(trace.path, trace.format)
            loaded.append(dataclasses.replace(workload, name=trace.name) if trace.name
                          else workload)
        return loaded
    return [synthesize(kind, config.synthetic_requests, config.seed, config.synthetic_max_context)
            for kind in KINDS]


def report_deployments(config: ReportConfig, registry: Registry,
                       settings: dict[str, Any]) -> list[Deployment]:
    """Every model of the config on every workload deployment."""
    deployments = []
    for model in config.models:
        for entry in config.workload_deployments:
            deployments.append(deployment(
                model, system=entry.system, accelerator=entry.accelerator, link=entry.link,
                registry=registry, **{**settings, "tp": entry.tp},
            ))
    return deployments


def workload_table(workloads: list[Workload], deployments: list[Deployment]) -> Table:
    """Transfer-bound shares of every workload on every deployment, paper and full mode."""
    rows = []
    for workload in workloads:
        name = workload.name + (" (SYNTHETIC)" if workload.synthetic else "")
        for dep in deployments:
            problem = fit_problem(dep)
            if problem:
                rows.append([name, dep.short_label, problem, "", "", "", "", ""])
                continue
            paper = transfer_bound_shares(workload, dep, "paper")
            full = transfer_bound_shares(workload, dep, "full")
            assert full.ttft_transfer_share is not None and full.ttft is not None
            rows.append([
                name, dep.short_label,
                f"{100 * paper.requests_transfer_bound:.1f}%",
                f"{100 * full.requests_transfer_bound:.1f}%",
                f"{100 * full.cached_tokens_transfer_bound:.1f}%",
                f"{100 * full.ttft_transfer_share['serial']:.1f}%",
                f"{100 * full.ttft_transfer_share['layerwise']:.1f}%",
                f"{full.ttft['layerwise'].p50 * 1e3:.3g} ms",
            ])
    synthetic = any(w.synthetic for w in workloads)
    notes = [
        "Paper mode: a request is transfer-bound when K/T exceeds the paper's constant "
        "kappa_crit for that hardware. Full mode decides per request, at its own T, whether "
        "loading its K cached tokens takes longer than computing its T new ones. TTFT shares: "
        "summed exposed transfer over summed TTFT.",
    ]
    if synthetic:
        notes.append("SYNTHETIC workloads: drawn to match the published medians and IQRs "
                     "(kvroof.workload.synth), not measured traces. "
                     + "; ".join(f"{w.name}: {cut}" for w in workloads
                                 if (cut := context_cut(w)) is not None))
    return Table(
        "workloads", "Workloads: share transfer-bound",
        ["workload", "deployment", "requests (paper)", "requests (full)",
         "cached tokens (full)", "TTFT serial", "TTFT layerwise", "median TTFT layerwise"],
        rows, notes,
    )
