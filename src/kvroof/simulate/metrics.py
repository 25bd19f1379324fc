"""What a simulation measured: a per-iteration log, per-request columns and the summary.

The iteration log has one row per iteration that was stepped, and one row per fast-forwarded
run of identical decode iterations (``iterations`` says how many it stands for; its token
columns are per iteration, its ``duration``, ``busy_seconds`` and ``flops`` for the whole run,
``power_w`` the mean per GPU over it).

Summary (SI units; latencies in seconds):

- TTFT (arrival to the end of the iteration that computes the first token), TPOT (time per
  output token after the first: ``(finish - first token) / (output - 1)``, requests with more
  than one output token) and end-to-end latency: mean, p50, p90, p99;
- throughput: completed requests, input and output tokens per second of the makespan (first
  arrival to last finish); goodput: requests per second meeting ``slo_ttft`` and ``slo_tpot``;
- tokens scheduled per iteration (the seed paper's Table 4 quantity: the mean over iterations)
  and its share of the token budget; prefill and decode tokens per iteration apart;
- prompt tokens by where they came from: HBM hits, host loads, tier loads, recomputed on purpose
  (``split``), computed; hit rates = those shares;
- host-link utilization per direction (busy time over makespan, mean over replicas), compute
  utilization (FLOPs over the replicas' peak FLOP/s x makespan);
- power per GPU (mean over the makespan including idle time, and the largest iteration's, each
  iteration of a fast-forwarded run counted on its own),
  energy in joules (all GPUs), per request and per output token;
- what limited each iteration's batch (shares of iterations: the queue ran out, the token
  budget, the sequence slots, HBM for a waiting request's KV, the host link under admission
  control);
- preemptions, requests whose output was cut at the model's context, bad requests skipped, and
  how much fast-forwarding saved (iterations simulated in closed form);
- routing: each replica's requests and hit rates (``per_replica``), the largest and smallest
  replica's share of the requests and the imbalance (:func:`replica_figures`).

A staged run (:mod:`kvroof.workload.stages`) adds ``stages``, one summary per stage
(:func:`stage_summaries`).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from kvroof.workload.stage_clock import StageClock

__all__ = ["ITERATION_COLUMNS", "REQUEST_COLUMNS", "IterationLog", "SimResult", "replica_figures",
           "stage_summaries", "summarize"]

ITERATION_COLUMNS = ("replica", "start", "duration", "iterations", "prefill_tokens",
                     "decode_tokens", "prefill_chunks", "load_seconds", "busy_seconds",
                     "flops", "power_w")
"""Per-iteration CSV columns (times in seconds, power per GPU in watts)."""

REQUEST_COLUMNS = ("request", "replica", "arrival", "first_token", "finish", "input_tokens",
                   "output_tokens", "prompt_tokens", "hbm_hit", "host_hit", "tier_hit",
                   "split_recomputed", "computed", "preemptions", "ttft", "tpot", "e2e")
"""Per-request CSV columns (``request`` is the row in the trace; times in seconds;
``prompt_tokens`` is what the last admission prefilled: the input, plus the output tokens
generated before a preemption; ``hbm_hit + host_hit + tier_hit + split_recomputed + computed``
adds up to it)."""


class IterationLog:
    """Columns of iteration rows, in compact typed buffers."""

    __slots__ = ("columns",)

    def __init__(self) -> None:
        self.columns: dict[str, array[float]] = {name: array("d") for name in
                                                  ITERATION_COLUMNS}

    def add(self, replica: int, start: float, duration: float, iterations: int,
            prefill_tokens: int, decode_tokens: int, prefill_chunks: int, load_seconds: float,
            busy_seconds: float, flops: float, power_w: float) -> None:
        c = self.columns
        c["replica"].append(replica)
        c["start"].append(start)
        c["duration"].append(duration)
        c["iterations"].append(iterations)
        c["prefill_tokens"].append(prefill_tokens)
        c["decode_tokens"].append(decode_tokens)
        c["prefill_chunks"].append(prefill_chunks)
        c["load_seconds"].append(load_seconds)
        c["busy_seconds"].append(busy_seconds)
        c["flops"].append(flops)
        c["power_w"].append(power_w)

    def arrays(self) -> dict[str, NDArray[np.float64]]:
        """The columns as arrays (views of the buffers: no copy)."""
        return {name: np.frombuffer(values, dtype=np.float64) if len(values) else np.zeros(0)
                for name, values in self.columns.items()}


def _stats(values: NDArray[np.float64]) -> dict[str, float]:
    if values.size == 0:
        return {"mean": float("nan"), "p50": float("nan"), "p90": float("nan"),
                "p99": float("nan")}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {"mean": float(values.mean()), "p50": float(p50), "p90": float(p90),
            "p99": float(p99)}


@dataclass
class SimResult:
    """A finished simulation: its settings, per-request and per-iteration columns, summary."""

    label: str
    replicas: list[str]
    requests: dict[str, NDArray[Any]]
    iterations: dict[str, NDArray[np.float64]]
    summary: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    semantics: list[tuple[str, str]] = field(default_factory=list)
    """(topic, rule): the engine semantics the run used (:mod:`kvroof.simulate.semantics`)."""

    def row(self) -> dict[str, Any]:
        """The summary flattened to one row (``ttft_p50`` ...), for sweeps."""
        flat: dict[str, Any] = {}
        for key, value in self.summary.items():
            if isinstance(value, list):  # per-stage and per-replica figures: rows of their own
                continue
            if isinstance(value, dict):
                for sub, inner in value.items():
                    flat[f"{key}_{sub}"] = inner
            else:
                flat[key] = value
        return flat

    def to_frame(self, kind: str = "requests") -> Any:
        """A pandas DataFrame: ``"requests"`` (one row per request), ``"iterations"`` (one per
        iteration row) or ``"summary"`` (one row), column names with SI units (``ttft_s``);
        :mod:`kvroof.simulate.result_frames`."""
        from kvroof.simulate.result_frames import result_frame

        return result_frame(self, kind)

    def _repr_html_(self) -> str:
        from kvroof.simulate.result_frames import result_html

        return result_html(self)

    def __repr__(self) -> str:
        from kvroof.simulate.result_frames import result_repr

        return result_repr(self)


def _peak_power(iterations: dict[str, NDArray[np.float64]], totals: dict[str, Any]) -> float:
    """The largest iteration's power per GPU: ``totals["power_max"]`` when the engines tracked
    it (a fast-forwarded run's row holds its mean, its peak is at one of its ends), else the
    largest row's."""
    peak = totals.get("power_max")
    return float(peak if peak is not None else iterations["power_w"].max())


def summarize(requests: dict[str, NDArray[Any]], iterations: dict[str, NDArray[np.float64]],
              totals: dict[str, Any]) -> dict[str, Any]:
    """The summary of a simulation (see the module docstring); ``totals`` carries what only the
    engines know (budget, link busy times, energy, peak FLOP/s, counters)."""
    ttft = requests["ttft"]
    tpot = requests["tpot"]
    e2e = requests["e2e"]
    out = requests["output_tokens"]
    arrival = requests["arrival"]
    finish = requests["finish"]
    n = int(ttft.size)
    makespan = float(finish.max() - min(arrival.min(), totals.get("start", arrival.min()))) \
        if n else 0.0
    span = makespan if makespan > 0 else float("nan")
    iters = iterations["iterations"]
    count = float(iters.sum())
    tokens = iterations["prefill_tokens"] + iterations["decode_tokens"]
    per_iteration = float((tokens * iters).sum() / count) if count else 0.0
    prompt = float(requests["input_tokens"].sum()) if n else 0.0
    sources = {key: float(requests[key].sum()) for key in
               ("hbm_hit", "host_hit", "tier_hit", "split_recomputed", "computed")}
    prompt_all = sum(sources.values()) or float("nan")
    valid_tpot = tpot[np.isfinite(tpot)]
    good = np.ones(n, dtype=bool)
    if totals.get("slo_ttft") is not None:
        good &= ttft <= totals["slo_ttft"]
    if totals.get("slo_tpot") is not None:
        good &= ~(tpot > totals["slo_tpot"])  # NaN TPOT (one output token) meets any SLO
    gpus = totals["gpus"]
    energy = totals["idle_watts"] * makespan + totals["dynamic_joules"]
    output_tokens = float(out.sum()) if n else 0.0
    stepped = int((iters == 1).sum())
    forwarded = count - stepped
    return {
        "requests": n,
        "makespan_s": makespan,
        "ttft_s": _stats(ttft),
        "tpot_s": _stats(valid_tpot),
        "e2e_s": _stats(e2e),
        "throughput_rps": n / span,
        "input_tokens_per_s": prompt / span,
        "output_tokens_per_s": output_tokens / span,
        "goodput_rps": float(good.sum()) / span,
        "slo_met": float(good.mean()) if n else float("nan"),
        "iterations": int(count),
        "tokens_per_iteration": per_iteration,
        "prefill_tokens_per_iteration": float((iterations["prefill_tokens"] * iters).sum()
                                              / count) if count else 0.0,
        "decode_tokens_per_iteration": float((iterations["decode_tokens"] * iters).sum()
                                             / count) if count else 0.0,
        "token_budget": totals["budget"],
        "budget_utilization": per_iteration / totals["budget"] if count else 0.0,
        "prompt_tokens": prompt,
        "hit_rate_hbm": sources["hbm_hit"] / prompt_all,
        "hit_rate_host": sources["host_hit"] / prompt_all,
        "hit_rate_tier": sources["tier_hit"] / prompt_all,
        "split_recomputed_share": sources["split_recomputed"] / prompt_all,
        "computed_share": sources["computed"] / prompt_all,
        "link_h2d_utilization": totals["h2d_busy"] / (span * totals["replicas"]),
        "link_d2h_utilization": totals["d2h_busy"] / (span * totals["replicas"]),
        "compute_utilization": float(iterations["flops"].sum()) / (totals["peak_flops"] * span),
        "power_mean_w": energy / (span * gpus),
        "power_max_w": _peak_power(iterations, totals) if count else totals["idle_power"],
        "idle_power_w": totals["idle_watts"] / gpus,  # per GPU, the spec's (0 W where unknown)
        "energy_j": energy,
        "energy_per_request_j": energy / n if n else float("nan"),
        "energy_per_output_token_j": energy / output_tokens if output_tokens else float("nan"),
        "batch_limit": totals["limits"],
        "preemptions": totals["preemptions"],
        "output_cut": totals["output_cut"],
        "skipped": totals["skipped"],
        "stepped_iterations": stepped,
        "fast_forward_runs": int((iters > 1).sum()),
        "fast_forwarded_iterations": int(forwarded),
        **replica_figures(requests, int(totals["replicas"])),
    }


def replica_figures(requests: dict[str, NDArray[Any]], replicas: int) -> dict[str, Any]:
    """Where the router sent the requests: the largest and smallest replica's share of the
    requests, the imbalance (the busiest replica's count over the mean count; 1 when even) and
    ``per_replica``, one entry per replica: its requests, their share, and the shares of its
    prompt tokens found in HBM, loaded from host DRAM and from the further tier."""
    where = requests["replica"].astype(np.int64)
    counts = np.bincount(where, minlength=replicas)[:replicas]
    total = int(counts.sum())
    share = counts / total if total else np.full(replicas, np.nan)
    sources = {key: np.bincount(where, weights=requests[key].astype(np.float64),
                                minlength=replicas)[:replicas]
               for key in ("hbm_hit", "host_hit", "tier_hit", "split_recomputed", "computed")}
    prompt = sum(sources.values())
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = {key: np.where(prompt > 0, sources[key] / prompt, np.nan)
                 for key in ("hbm_hit", "host_hit", "tier_hit")}
    return {
        "replica_share_max": float(share.max()) if replicas else float("nan"),
        "replica_share_min": float(share.min()) if replicas else float("nan"),
        "replica_imbalance": float(counts.max() * replicas / total) if total else float("nan"),
        "per_replica": [
            {"replica": i, "requests": int(counts[i]), "share": float(share[i]),
             "hit_rate_hbm": float(rates["hbm_hit"][i]),
             "hit_rate_host": float(rates["host_hit"][i]),
             "hit_rate_tier": float(rates["tier_hit"][i])}
            for i in range(replicas)],
    }


def stage_summaries(requests: dict[str, NDArray[Any]], clock: StageClock
                    ) -> list[dict[str, Any]]:
    """One summary per stage of a staged run, as inference-perf scores a stage
    (kubernetes-sigs/inference-perf, ``inference_perf/reportgen/base.py`` at commit
    2ef9ad9032290ffd06f7d59f01444fab380fff0e): TTFT, TPOT and end-to-end latency (mean, p50,
    p90, p99); throughput in requests and tokens per second of the stage's span (its first
    arrival to its last finish, inference-perf's ``total_time``); the achieved rate (requests
    over its first to last arrival, ``send_duration``; NaN for fewer than two arrival times);
    the stage's start (from ``clock``, the run's :class:`~kvroof.workload.stage_clock.StageClock`)
    and end (its last finish; its start when none was served)."""
    plan, starts = clock.plan, clock.starts
    stage, labels, rates = plan.stage, plan.labels, plan.rates
    of = stage[requests["request"].astype(np.int64)] if requests["request"].size else \
        np.zeros(0, dtype=np.int64)
    out: list[dict[str, Any]] = []
    for k, (label, rate) in enumerate(zip(labels, rates, strict=True)):
        mask = of == k
        arrival, finish = requests["arrival"][mask], requests["finish"][mask]
        n = int(mask.sum())
        span = float(finish.max() - arrival.min()) if n else 0.0
        send = float(arrival.max() - arrival.min()) if n else 0.0
        tpot = requests["tpot"][mask]
        start = float(starts[k]) if k < len(starts) else float("nan")
        per = span if span > 0 else float("nan")
        out.append({
            "stage": label, "requested_rate_rps": rate, "start_s": start,
            "end_s": float(finish.max()) if n else start, "requests": n,
            "ttft_s": _stats(requests["ttft"][mask]), "tpot_s": _stats(tpot[np.isfinite(tpot)]),
            "e2e_s": _stats(requests["e2e"][mask]),
            "throughput_rps": n / per,
            "input_tokens_per_s": float(requests["input_tokens"][mask].sum()) / per,
            "output_tokens_per_s": float(requests["output_tokens"][mask].sum()) / per,
            "achieved_rate_rps": n / send if send > 0 else float("nan"),
            "send_duration_s": send,
        })
    return out
