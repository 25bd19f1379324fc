"""A simulation's results for people and for pandas: column names with their units, the
labelled summary lines (``kvroof simulate`` prints them; the HTML repr shows them), the HTML
and text reprs and the frames of :class:`kvroof.simulate.metrics.SimResult`.

Column names carry their units as every ``to_frame()`` in kvroof does: times in seconds end in
``_s`` (``arrival_s``, ``ttft_s``, ``duration_s``), power in watts in ``_w``, token counts in
``_tokens`` (``hbm_hit_tokens``); counts of requests, iterations or FLOPs have none. The same
names head ``requests.csv`` and ``iterations.csv`` (:mod:`kvroof.simulate.output`). A column
this module does not know keeps its name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.display import count, duration, html_table, require_pandas
from kvroof.errors import KvroofError, short_repr

__all__ = ["FRAME_KINDS", "ITERATION_NAMES", "REPLICA_HEADER", "REQUEST_NAMES", "frame_columns",
           "replica_rows", "result_frame", "result_html", "result_repr", "routing_text",
           "summary_lines"]

FRAME_KINDS = ("requests", "iterations", "summary")

REQUEST_NAMES: dict[str, str] = {
    "arrival": "arrival_s", "first_token": "first_token_s", "finish": "finish_s",
    "hbm_hit": "hbm_hit_tokens", "host_hit": "host_hit_tokens", "tier_hit": "tier_hit_tokens",
    "split_recomputed": "split_recomputed_tokens", "computed": "computed_tokens",
    "ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s",
}
"""Per-request columns renamed with their units (the others already say theirs:
``input_tokens``, ``preemptions``)."""

ITERATION_NAMES: dict[str, str] = {
    "start": "start_s", "duration": "duration_s", "load_seconds": "load_s",
    "busy_seconds": "busy_s",
}
"""Per-iteration columns renamed with their units (``power_w``, ``prefill_tokens`` say
theirs; ``flops`` is a count of FLOPs, as in the TTFT frames)."""

_WHOLE = ("request", "replica", "iterations", "prefill_tokens", "decode_tokens",
          "prefill_chunks")
"""Columns of whole numbers (the iteration log keeps them as floats)."""


def frame_columns(columns: Mapping[str, NDArray[Any]], kind: str
                  ) -> dict[str, NDArray[Any]]:
    """``columns`` (a result's ``requests`` or ``iterations``, by ``kind``) under their names
    with units, in the same order; the arrays are not copied."""
    names = REQUEST_NAMES if kind == "requests" else ITERATION_NAMES
    return {names.get(name, name): values for name, values in columns.items()}


def _check_kind(kind: str) -> None:
    if kind not in FRAME_KINDS:
        raise KvroofError(f"to_frame: expected one of {', '.join(map(repr, FRAME_KINDS))}, got "
                          f"{short_repr(kind)}")


def result_frame(result: Any, kind: str = "requests") -> Any:
    """A pandas DataFrame of a :class:`~kvroof.simulate.metrics.SimResult`: one row per
    request (``"requests"``), per iteration row (``"iterations"``; a fast-forwarded run is one
    row, ``iterations`` says of how many) or the summary in one row (``"summary"``: ``label``,
    then the summary flattened as sweeps write it, ``ttft_s_p50`` ...)."""
    _check_kind(kind)
    pandas = require_pandas()
    if kind == "summary":
        return pandas.DataFrame([{"label": result.label, **result.row()}])
    source = result.requests if kind == "requests" else result.iterations
    columns = {name: (np.asarray(values).astype(np.int64) if name in _WHOLE else values)
               for name, values in source.items()}
    return pandas.DataFrame(frame_columns(columns, kind))


def _seconds(value: Any) -> str:
    return "-" if value is None or not math.isfinite(value) else duration(value)


def _whole(value: Any) -> str:
    """A rate or mean rounded to a whole number, with separators ("-" when not finite)."""
    return "-" if value is None or not math.isfinite(value) else count(round(value))


def _share(value: Any) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{100 * value:.1f} %"


def _stats(stats: Mapping[str, float]) -> str:
    return (f"mean {_seconds(stats['mean'])}, p50 {_seconds(stats['p50'])}, "
            f"p90 {_seconds(stats['p90'])}, p99 {_seconds(stats['p99'])}")


def _replicas(result: Any) -> str:
    counts: dict[str, int] = {}
    for label in result.replicas:
        counts[label] = counts.get(label, 0) + 1
    return "; ".join(f"{n} x {label}" for label, n in counts.items())


def _router(settings: Mapping[str, Any]) -> str:
    """The router's name, with the scoring router's weights."""
    router = str(settings.get("router", "-"))
    weights = settings.get("router_weights")
    if router == "scoring" and isinstance(weights, Mapping):
        router += " (" + ", ".join(f"{key.replace('_', '-')} {value:g}"
                                   for key, value in weights.items()) + ")"
    return router


def routing_text(result: Any) -> str:
    """The router and how evenly it spread the requests: the busiest and idlest replica's share
    and the busiest one's count over the mean."""
    s = result.summary
    per = s["per_replica"]
    if not per:
        return _router(result.settings)
    busiest = max(per, key=lambda r: r["requests"])
    idlest = min(per, key=lambda r: r["requests"])
    return (f"{_router(result.settings)}; requests per replica: max {_share(busiest['share'])} "
            f"(replica {busiest['replica']}), min {_share(idlest['share'])} (replica "
            f"{idlest['replica']}), busiest over mean {s['replica_imbalance']:.2f}")


def replica_rows(result: Any) -> list[list[str]]:
    """One row per replica: index, label, requests, their share, and the shares of its prompt
    tokens from HBM, host DRAM and the further tier."""
    labels = result.replicas
    return [[str(r["replica"]), labels[r["replica"]] if r["replica"] < len(labels) else "-",
             count(r["requests"]), _share(r["share"]), _share(r["hit_rate_hbm"]),
             _share(r["hit_rate_host"]), _share(r["hit_rate_tier"])]
            for r in result.summary.get("per_replica", [])]


REPLICA_HEADER = ["replica", "", "requests", "share", "HBM hits", "host DRAM hits", "tier hits"]
"""The header of :func:`replica_rows`."""


def summary_lines(result: Any, *, wall: bool = True) -> list[tuple[str, str]]:
    """A result's summary as labelled lines (what ``kvroof simulate`` prints for one run):
    latencies, throughput, tokens per iteration, batch limits, where prompt tokens came from,
    link and compute use, power, energy, preemptions, routing and the simulated time (with the
    wall time unless ``wall`` is false)."""
    s = result.summary
    limits = ", ".join(f"{name} {100 * share:.0f}%" for name, share in
                       s["batch_limit"].items() if share > 0) or "-"
    energy = s["energy_j"]
    rows = [
        ("settings", result.label),
        ("requests", f"{count(s['requests'])} completed in {_seconds(s['makespan_s'])} "
                     f"({count(s['skipped'])} skipped, {count(s['output_cut'])} outputs cut at "
                     "the context)"),
        ("TTFT", _stats(s["ttft_s"])),
        ("TPOT", _stats(s["tpot_s"])),
        ("end-to-end", _stats(s["e2e_s"])),
        ("throughput", f"{s['throughput_rps']:.3g} requests/s, "
                       f"{_whole(s['input_tokens_per_s'])} input and "
                       f"{_whole(s['output_tokens_per_s'])} output tokens/s"),
    ]
    if result.settings.get("slo_ttft") is not None or result.settings.get("slo_tpot") is not None:
        rows.append(("goodput", f"{s['goodput_rps']:.3g} requests/s ({_share(s['slo_met'])} "
                                "meet the SLOs)"))
    rows += [
        ("tokens per iteration", f"{_whole(s['tokens_per_iteration'])} "
                                 f"({_share(s['budget_utilization'])} of the "
                                 f"{count(s['token_budget'])}-token budget; prefill "
                                 f"{_whole(s['prefill_tokens_per_iteration'])}, decode "
                                 f"{_whole(s['decode_tokens_per_iteration'])})"),
        ("batch limited by", limits),
        ("prompt tokens from", f"HBM {_share(s['hit_rate_hbm'])}, host DRAM "
                               f"{_share(s['hit_rate_host'])}, tier {_share(s['hit_rate_tier'])}"
                               f", recomputed by split {_share(s['split_recomputed_share'])}, "
                               f"computed {_share(s['computed_share'])}"),
        ("host link busy", f"to GPU {_share(s['link_h2d_utilization'])}, to host "
                           f"{_share(s['link_d2h_utilization'])}"),
        ("compute utilization", _share(s["compute_utilization"])),
        ("power per GPU", f"mean {s['power_mean_w']:.0f} W, max {s['power_max_w']:.0f} W"),
        ("energy", f"{energy / 1e6:.4g} MJ ({energy / max(s['requests'], 1) / 1e3:.3g} kJ per "
                   f"request, {s['energy_per_output_token_j']:.3g} J per output token)"),
        ("preemptions", count(s["preemptions"])),
    ]
    if len(s.get("per_replica", ())) > 1:
        rows.append(("routing", routing_text(result)))
    simulated = _seconds(s["makespan_s"])
    if wall and "wall_s" in s:
        simulated += (f" in {_seconds(s['wall_s'])} ({s['simulated_per_wall_second']:,.0f}x "
                      "real time; ")
    else:
        simulated += " ("
    rows.append(("simulated", simulated + f"{count(s['stepped_iterations'])} iterations "
                                          f"stepped, {count(s['fast_forwarded_iterations'])} in "
                                          f"{count(s['fast_forward_runs'])} fast-forwarded runs)"))
    return rows


def result_html(result: Any) -> str:
    """The HTML table of a result: its replicas, summary lines and notes (what ``kvroof
    simulate`` prints), titled with the columns ``to_frame`` gives."""
    rows = [("replicas", _replicas(result)), *summary_lines(result)]
    rows += [("note", note) for note in result.notes]
    title = (f"simulation {result.label}: {count(result.summary['requests'])} requests; "
             "to_frame('requests' | 'iterations' | 'summary') for the columns")
    return html_table(rows, title)


def result_repr(result: Any) -> str:
    """One line: the label, requests, iteration rows, replicas and TTFT p50 (the columns are
    too many to print; ``to_frame`` gives them)."""
    s = result.summary
    rows = len(next(iter(result.iterations.values()), ()))
    return (f"<SimResult {result.label}: {count(s['requests'])} requests on "
            f"{len(result.replicas)} replicas, {count(rows)} iteration rows, TTFT p50 "
            f"{_seconds(s['ttft_s']['p50'])}, makespan {_seconds(s['makespan_s'])}>")
