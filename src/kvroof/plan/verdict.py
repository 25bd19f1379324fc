"""The verdict of a candidate: one sentence, and why in kvroof's terms.

Decision, in this order:

1. ``cannot``: no rate meets the objectives with or without offloading.
2. ``off``: the workload reuses no prefix (host memory would hold nothing read again).
3. ``on``: offloading meets the objectives at a rate that failed without it (a gain larger
   than the searches' tolerance); the sentence names the recommended host memory per replica
   (the smallest that keeps 90% of the gain) and the gain.
4. ``off``: offloading lowers the rate (its failing rate is at or below the meeting rate
   without it).
5. ``off``: the two rates are within the tolerance: it adds nothing measurable; the sentence
   says the likeliest reason (the reused prefixes fit the HBM pool; loading costs more than
   recomputing below the reload threshold and the prefixes are shorter; or the hits save too
   little of the prefill).

The reasons: the workload's K/T against kappa_crit at its median T (transfer-bound loads or
loads hidden behind compute), the hit rates per tier at the highest meeting rate, where the time
goes there (compute and host-link use, what limited the batches), the reused prefixes against
the HBM and host pools, and the reload threshold.
"""

from __future__ import annotations

import math

from kvroof.plan.inputs import Objectives
from kvroof.plan.reload_threshold import ReloadThreshold
from kvroof.plan.result import Arm, Curve, Verdict
from kvroof.plan.workloads import ReuseStats
from kvroof.units import Kind, format_quantity

__all__ = ["decide", "rate_text", "size_text", "tokens_text"]

_LIMITS = {"queue": "the queue ran out", "budget": "the token budget", "seats": "sequence slots",
           "kv": "HBM for a waiting request's KV", "link": "the host link"}


def rate_text(rate: float) -> str:
    """``1.23 requests/s``."""
    return f"{rate:.3g} requests/s"


def tokens_text(count: int, noun: str = "token") -> str:
    """``1 token``, ``2,048 tokens``."""
    return f"{count:,} {noun}{'s' * (count != 1)}"


def size_text(size: float | None) -> str:
    """Host memory as ``512 GB`` (``unlimited`` for inf)."""
    if size is None:
        return "none"
    if not math.isfinite(size):
        return "unlimited"
    return format_quantity(size, Kind.CAPACITY, 3)


def _pct(share: float) -> str:
    return f"{100 * share:.1f}%" if math.isfinite(share) else "n/a"


def _targets(objectives: Objectives) -> str:
    names = [n for n, v in (("TTFT", objectives.ttft), ("TPOT", objectives.tpot))
             if v is not None]
    return " and ".join(names) + (" targets" if len(names) > 1 else " target")


def _kappa_reason(reuse: ReuseStats, kappa_alone: float | None,
                  kappa_busy: float | None) -> str:
    if reuse.share_with_prefix == 0:
        return "no request has a cached prefix (K = 0 for all)"
    kc = kappa_alone if kappa_alone is not None else math.inf
    kb = kappa_busy if kappa_busy is not None else math.inf
    where = (f"median K/T {reuse.median_kappa:.3g} over the {_pct(reuse.share_with_prefix)} of "
             f"requests with a cached prefix (median T {reuse.median_new:,.0f}, K "
             f"{reuse.median_cached:,.0f}); ")
    if math.isinf(kc) and math.isinf(kb):
        return where + ("at that T no K makes a prefill transfer-bound (kappa_crit infinite "
                        "alone and inside a full iteration): a load takes less time than the "
                        "request's own prefill")
    where += (f"kappa_crit at that T is {'infinite' if math.isinf(kc) else f'{kc:.3g}'} alone "
              f"and {'infinite' if math.isinf(kb) else f'{kb:.3g}'} inside a full iteration")
    if reuse.median_kappa < min(kc, kb):
        return where + ": below both, so a load takes less time than the request's own " \
                       "prefill (compute-bound)"
    if reuse.median_kappa >= max(kc, kb):
        return where + ": above both, so loading sets the TTFT of a reused request " \
                       "(transfer-bound)"
    return where + ": between them, so loads are transfer-bound alone and compute-bound in " \
                   "a busy iteration"


def _time_goes(arm: Arm) -> str:
    point = arm.at_max
    if point is None:
        return ""
    limits = sorted(point.batch_limit.items(), key=lambda kv: -kv[1])
    top = ", ".join(f"{_LIMITS.get(k, k)} {_pct(v)}" for k, v in limits[:2] if v > 0)
    return (f"at {rate_text(point.rps)} {arm.label}: compute busy "
            f"{_pct(point.compute_utilization)}, host link to GPU {_pct(point.link_h2d)} and "
            f"to host {_pct(point.link_d2h)}; batches limited by {top or 'nothing'}")


def _hits(arm: Arm) -> str:
    p = arm.at_max
    if p is None:
        return f"{arm.label}: no rate met the objectives"
    tier = f", tier {_pct(p.hit_tier)}" if p.hit_tier else ""
    return (f"{arm.label}: prompt tokens from HBM {_pct(p.hit_hbm)}, host DRAM "
            f"{_pct(p.hit_host)}{tier}, computed {_pct(p.computed)}")


def decide(*, reuse: ReuseStats, objectives: Objectives, without: Arm, with_offload: Arm,
           curve: Curve, threshold: ReloadThreshold, kappa_alone: float | None,
           kappa_busy: float | None, hbm_tokens: int, host_tokens: float,
           tolerance: float) -> Verdict:
    """The :class:`Verdict` (module docstring)."""
    targets = _targets(objectives)
    why = [f"workload: {_kappa_reason(reuse, kappa_alone, kappa_busy)}"]
    why.append(f"hit rates at the highest meeting rate: {_hits(without)}; {_hits(with_offload)}")
    for arm in (with_offload, without):
        if arm.at_max is not None:
            why.append("where the time goes " + _time_goes(arm))
            if arm.at_max.skipped:
                why.append(f"{arm.at_max.skipped:,} requests of the trace were skipped: no "
                           "replica can serve them (longer than the context, or more KV than "
                           "a replica holds)")
            break
    host = "unlimited" if not math.isfinite(host_tokens) else f"{host_tokens:,.0f}"
    why.append(f"reused prefixes: {reuse.reused_tokens:,} tokens of prefix blocks used more than "
               f"once; an LRU cache of {reuse.lru_tokens[1]:,} tokens keeps 90% of them until "
               f"their reuse, of {reuse.lru_tokens[2]:,} all of them; the HBM KV pool holds "
               f"{hbm_tokens:,} tokens per replica, the host pool {host} "
               f"({with_offload.label})")
    setting = threshold.setting
    setting_text = ("never (recomputing stays as fast up to "
                    f"{threshold.max_cached:,} tokens)" if setting is None
                    else tokens_text(setting, "cached token"))
    why.append(f"reload threshold at T = {threshold.median_new:,}: loading beats recomputing from "
               f"{setting_text} alone, from "
               + ("never" if threshold.setting_busy is None else
                  f"{threshold.setting_busy:,}") + " inside a full iteration")
    w, o = without.max_rps, with_offload.max_rps
    if w == 0 and o == 0:
        lowest = min((p for p in (*without.points, *with_offload.points)),
                     key=lambda p: p.rps, default=None)
        detail = (f" (at {rate_text(lowest.rps)}: TTFT p{objectives.percentile:g} "
                  f"{format_quantity(lowest.ttft, Kind.TIME, 3)}, TPOT "
                  f"{format_quantity(lowest.tpot, Kind.TIME, 3)})") if lowest else ""
        return Verdict("cannot", f"Neither meets {objectives.text} at any rate tried{detail}: "
                       "relax the objectives or use faster hardware.", tuple(why))
    if reuse.reused_tokens == 0 or reuse.share_with_prefix == 0:
        return Verdict("off", "Leave it off: no request reuses a prefix, so host memory would "
                       "hold nothing that is read again (offloading only adds write-back "
                       "traffic).", tuple(why))
    if o > 0 and o >= without.failing_rps:
        chosen = curve.recommended or with_offload
        if w == 0:
            return Verdict("on", f"Turn it on with {size_text(chosen.dram_bytes)} per replica: "
                           f"it meets your {targets} up to {rate_text(chosen.max_rps)}, which "
                           "no rate meets without it.", tuple(why))
        gain = chosen.max_rps / w
        return Verdict("on", f"Turn it on with {size_text(chosen.dram_bytes)} per replica: "
                       f"+{gain - 1:.0%} rate at your {targets} ({rate_text(chosen.max_rps)} "
                       f"against {rate_text(w)}).", tuple(why))
    if w > 0 and with_offload.failing_rps <= w:
        loss = 1 - o / w
        return Verdict("off", f"Leave it off: it lowers the highest rate meeting your {targets} "
                       f"by {loss:.0%} ({rate_text(o)} against {rate_text(w)}).", tuple(why))
    if reuse.lru_tokens[2] <= hbm_tokens:
        reason = (f"your prefixes fit in HBM (an LRU cache of {reuse.lru_tokens[2]:,} tokens "
                  f"keeps every reuse; the HBM KV pool holds {hbm_tokens:,} tokens per replica)")
    elif setting is None or reuse.median_cached < setting:
        below = (f"below {setting:,} tokens" if setting is not None else
                 f"up to {threshold.max_cached:,} tokens")
        reason = (f"your prefixes are short: loading costs more than recomputing {below} and "
                  f"the median cached prefix is {reuse.median_cached:,.0f}")
    else:
        reason = (f"host hits save too little of the prefill: {_pct(reuse.cached_share)} of "
                  "prompt tokens are reused at best")
    return Verdict("off", f"Leave it off: it adds nothing measurable at your {targets} "
                   f"({rate_text(o)} against {rate_text(w)}, within the search's "
                   f"{tolerance:.0%}): {reason}.", tuple(why))
