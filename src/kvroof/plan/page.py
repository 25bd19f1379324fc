"""A plan as text: the tables the terminal prints and the page written as Markdown
(``plan.md``) and as one self-contained HTML file (``plan.html``, its figures embedded).

The page is built once as a list of blocks (headings, paragraphs, lists, tables, figures) and
rendered either way, so the two say the same thing. Figures are files the caller drew (the
figure functions live in :mod:`kvroof.plot.plan`); the HTML page embeds their bytes.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kvroof.plan.result import Arm, CandidatePlan, Plan
from kvroof.plan.verdict import size_text, tokens_text
from kvroof.units import Kind, format_quantity

__all__ = ["FIGURES", "Block", "arm_header", "arm_rows", "page_blocks", "render_html",
           "render_markdown", "summary_rows", "threshold_rows"]

FIGURES: dict[str, str] = {
    "rate-vs-latency.png": "TTFT and TPOT against the arrival rate, with and without "
                           "offloading",
    "gain-vs-host-memory.png": "gain against host memory per replica",
    "reload-threshold.png": "reload threshold against new tokens",
}
"""Figure file -> what it shows, in the order the page shows them."""

ARM_HEADER = ("arm", "host/replica", "host/HBM", "max rate", "TTFT", "TPOT", "goodput",
              "HBM hit", "host hit", "gain", "sims")


@dataclass(frozen=True)
class Block:
    """One block of the page: ``kind`` is h1, h2, h3, p, ul, table or figure; ``text`` the
    heading, paragraph or figure caption; ``items`` list items or table rows (the first the
    header); ``name`` a figure's file."""

    kind: str
    text: str = ""
    items: tuple[tuple[str, ...], ...] = ()
    name: str = ""


def _rate(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.3g} r/s"


def _time(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return format_quantity(value, Kind.TIME, 3)


def _pct(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{100 * value:.1f}%"


def _gain(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "inf" if math.isinf(value) else f"{value:.2f}x"


def arm_header(plan: Plan) -> tuple[str, ...]:
    """:data:`ARM_HEADER` with the objectives' percentile, and a tier column when a cache tier
    is simulated."""
    p = plan.objectives.percentile
    header = [h if h not in ("TTFT", "TPOT") else f"{h} p{p:g}" for h in ARM_HEADER]
    if plan.settings.get("tier"):
        header.insert(header.index("host hit") + 1, "tier hit")
    return tuple(header)


def arm_rows(cand: CandidatePlan, tier: bool = False) -> list[tuple[str, ...]]:
    """One row per arm of ``cand`` (without offloading, then every host-memory size):
    ``ARM_HEADER``'s columns (and the tier's hit rate after the host's with ``tier``); a
    ``>=`` before the rate: the search's ceiling; ``*`` after the gain: it pays (meets a rate
    that failed without offloading)."""
    if cand.without is None or cand.curve is None or cand.with_offload is None:
        return []
    arms: list[tuple[Arm, str]] = [(cand.without, "")]
    if cand.curve.arms:
        arms += [(a, f"{_gain(g)}{'*' if p else ''}")
                 for a, g, p in zip(cand.curve.arms, cand.curve.gains, cand.curve.pays,
                                    strict=True)]
    else:
        arms.append((cand.with_offload, _gain(cand.gain)))
    rows: list[tuple[str, ...]] = []
    for arm, gain in arms:
        at = arm.at_max
        name = "without" if not arm.offload else (
            "with (default)" if arm is cand.with_offload else "with")
        if cand.curve.recommended is arm:
            name += ", recommended"
        if arm.hypothetical:
            name += ", beyond the host's memory"
        ratio = "-" if arm.capacity_ratio is None else (
            "inf" if math.isinf(arm.capacity_ratio) else f"{arm.capacity_ratio:.2g}")
        cells = [
            name, "-" if not arm.offload else size_text(arm.dram_bytes), ratio,
            (">=" if arm.status == "at_least" else "") + _rate(arm.max_rps),
            _time(at.ttft if at else None), _time(at.tpot if at else None),
            _rate(at.goodput_rps) if at else "-", _pct(at.hit_hbm) if at else "-",
            _pct(at.hit_host) if at else "-", gain or "1.00x", str(arm.simulations)]
        if tier:
            cells.insert(9, _pct(at.hit_tier) if at else "-")
        rows.append(tuple(cells))
    return rows


def threshold_rows(cand: CandidatePlan) -> list[tuple[str, ...]]:
    """``(T, K* alone, K* in a full iteration)`` rows of the reload threshold."""
    th = cand.threshold
    if th is None:
        return []

    def k(value: int | None) -> str:
        return "never" if value is None else f"{value:,}"

    return [(f"{t:,}", k(a), k(b)) for t, a, b in zip(th.new_tokens, th.alone, th.busy,
                                                       strict=True)]


def summary_rows(plan: Plan) -> list[tuple[str, str]]:
    """The head of the terminal output: what was planned."""
    r = plan.reuse
    rows = [
        ("model", plan.model),
        ("workload", f"{plan.workload}: {plan.workload_description} ({r.requests:,} "
                     "requests" + (", SYNTHETIC" if plan.synthetic else "") + ")"),
        ("reuse", f"{_pct(r.cached_share)} of prompt tokens cached (unlimited cache), "
                  f"{_pct(r.share_with_prefix)} of requests; median K/T "
                  f"{r.median_kappa:.3g} at median T {r.median_new:,.0f}"),
        ("objectives", plan.objectives.text + (" (none given: MLPerf's Llama-2-70B server "
                                               "latencies)" if plan.objectives.defaulted
                                               else "")),
        ("engine", f"{plan.settings['scheduler']} scheduler, {plan.settings['load_mode']} "
                   f"loads, {plan.settings['router']} routing; offloading: cache policy "
                   f"{plan.settings['offload_cache_policy']}"
                   + (f", tier {plan.settings['tier']}" if plan.settings.get("tier") else "")
                   + (f"; engine profile {plan.settings['deployment']['engine']}"
                      if plan.settings["deployment"].get("engine") else "")),
        ("search", f"bracketing and bisection over Poisson arrival rates to "
                   f"{plan.search.tolerance:.0%}; {plan.simulations:,} simulations"),
    ]
    if plan.target_rps is not None:
        rows.append(("target", _rate(plan.target_rps).replace(" r/s", " requests/s")))
    return rows


def _sizing_lines(cand: CandidatePlan, plan: Plan) -> list[str]:
    lines: list[str] = []
    sw, so = cand.sizing_without, cand.sizing_with
    if sw is None or so is None:
        return lines
    if plan.target_rps is not None:
        def gpus(s: object, label: str) -> str:
            g = getattr(s, "gpus", None)
            r = getattr(s, "replicas", None)
            return f"{label}: no rate meets the objectives" if g is None else \
                f"{label}: {g:,} GPUs ({r:,} replicas of TP {cand.tp})"
        lines.append(f"for {plan.target_rps:.3g} requests/s: {gpus(sw, 'without offloading')}; "
                     f"{gpus(so, 'with it')} (replicas assumed to add up linearly)")
    if plan.prices.gpu_hour is not None:
        def cost(s: object) -> str:
            value = getattr(s, "per_million_tokens", None)
            out = getattr(s, "per_million_output_tokens", None)
            return "-" if value is None else f"{value:.4g} per million tokens ({out:.4g} per " \
                                             "million output tokens)"
        lines.append(f"cost at the highest meeting rate: without offloading {cost(sw)}; with "
                     f"it {cost(so)}")
    return lines


def page_blocks(plan: Plan, figures: Sequence[str] = ()) -> list[Block]:
    """The page of ``plan`` (``figures``: the files of :data:`FIGURES` that were drawn)."""
    blocks = [Block("h1", f"kvroof plan: {plan.model}, {plan.workload} workload")]
    if plan.synthetic:
        blocks.append(Block("p", "SYNTHETIC workload: generated from stated assumptions, not "
                                 "measured traffic."))
    blocks.append(Block("h2", "Verdicts"))
    blocks.append(Block("table", items=(("candidate", "verdict"), *(
        (c.label, c.verdict.sentence if c.verdict else f"no plan: {c.error}")
        for c in plan.candidates))))
    blocks.append(Block("h2", "What was asked"))
    blocks.append(Block("table", items=(("input", "value"), *summary_rows(plan))))
    blocks.append(Block("p", "The workload assumes:"))
    blocks.append(Block("ul", items=tuple((a,) for a in (
        plan.assumptions or ("the trace as it is (output lengths as recorded)",)))))
    r = plan.reuse
    blocks.append(Block("p", f"Prefix reuse (an unlimited cache): {r.reused_tokens:,} tokens of "
                             f"prefix blocks are used by more than one request, of "
                             f"{r.distinct_tokens:,} distinct prompt tokens; one LRU cache of "
                             f"{r.lru_tokens[0]:,} / {r.lru_tokens[1]:,} / {r.lru_tokens[2]:,} "
                             "tokens keeps 50% / 90% / all of the reused tokens until their "
                             "reuse."))
    s = plan.settings
    blocks.append(Block("p", f"Simulated engine: {s['scheduler']} scheduler, {s['load_mode']} "
                             f"loads, {s['router']} routing; the offloading arm's cache policy "
                             f"{s['offload_cache_policy']}"
                             + (f", tier {s['tier']}" if s.get("tier") else "")
                             + f"; arrivals: {s['arrivals']} (seed {s['seed']})."))
    for cand in plan.candidates:
        blocks += _candidate_blocks(cand, plan)
    if figures:
        blocks.append(Block("h2", "Figures"))
        for name in figures:
            blocks.append(Block("figure", FIGURES.get(name, name), name=name))
    blocks.append(Block("h2", "How it was searched"))
    blocks.append(Block("p", (
        f"For each candidate and each arm (without offloading: the HBM prefix cache only; with "
        f"offloading: host DRAM below it at each size), the highest Poisson arrival rate at "
        f"which the p{plan.objectives.percentile:g} TTFT and TPOT of the whole trace meet the "
        "objectives: the first rate is estimated from the cost model (or the rate found "
        "without offloading), then doubled or halved (x1.5 from a found rate) until one "
        "rate meets and one fails, then bisected (geometric mean) until the failing rate is "
        f"within {plan.search.tolerance:.0%} of the meeting one. Every rate uses the same "
        f"Poisson draw, rescaled. {plan.simulations:,} simulations, "
        f"{plan.simulated_s / 3600:.3g} h of serving simulated.")))
    if plan.notes:
        blocks.append(Block("p", "Notes of the simulator:"))
        blocks.append(Block("ul", items=tuple((n,) for n in plan.notes)))
    return blocks


def _candidate_blocks(cand: CandidatePlan, plan: Plan) -> list[Block]:
    gpus = f"{cand.gpus} GPU{'s' * (cand.gpus != 1)}"
    blocks = [Block("h2", f"{cand.label}: {cand.deployment}, {cand.replicas} "
                          f"replica{'s' * (cand.replicas != 1)} ({gpus})")]
    if cand.choices:
        blocks.append(Block("p", "kvroof chose: " + "; ".join(cand.choices) + "."))
    if cand.error is not None or cand.verdict is None:
        blocks.append(Block("p", f"No plan: {cand.error}"))
        return blocks
    blocks.append(Block("p", f"**{cand.verdict.sentence}**"))
    blocks.append(Block("p", "Why:"))
    blocks.append(Block("ul", items=tuple((w,) for w in cand.verdict.why)))
    header = arm_header(plan)
    blocks.append(Block("p", "The highest rate meeting the objectives per arm (host memory "
                             "per replica; host/HBM: the capacity ratio, host pool over HBM KV "
                             f"pool of {cand.hbm_tokens:,} tokens; latencies, goodput and hit "
                             "rates at that rate; * after a gain: it pays, meeting a rate that "
                             "failed without offloading):"))
    blocks.append(Block("table", items=(header, *arm_rows(cand, bool(plan.settings.get(
        "tier"))))))
    curve = cand.curve
    if curve is not None:
        if curve.note:
            blocks.append(Block("p", f"Host-memory curve: {curve.note}."))
        elif curve.pays_from_ratio is not None:
            rec = curve.recommended
            blocks.append(Block("p", (
                f"Offloading starts to pay at a capacity ratio of {curve.pays_from_ratio:.2g} "
                "(host pool over HBM pool); the smallest size keeping "
                f"{curve.most:.0%} of the largest gain ({_gain(curve.best_gain)}) is "
                f"{size_text(rec.dram_bytes) if rec else '-'} per replica.")))
        else:
            blocks.append(Block("p", "Offloading pays at no size of the curve (no size meets "
                                     "a rate that failed without it)."))
    th = cand.threshold
    if th is not None:
        blocks.append(Block("p", (
            f"Reload threshold (the smallest cached prefix worth loading rather than "
            f"recomputing; {th.overlap} overlap, the request alone and inside a full iteration "
            f"of {th.iteration_tokens:,} tokens; up to {th.max_cached:,} cached tokens): at the "
            f"workload's median T = {th.median_new:,}, "
            + ("never" if th.setting is None else tokens_text(th.setting))
            + " alone and " + ("never" if th.setting_busy is None else
                               f"{th.setting_busy:,}") + " in a full iteration.")))
        blocks.append(Block("table", items=(("T (new tokens)", "K* alone", "K* in a full "
                                             "iteration"), *threshold_rows(cand))))
    sizing = _sizing_lines(cand, plan)
    if sizing:
        blocks.append(Block("ul", items=tuple((line,) for line in sizing)))
    v = cand.validity
    if v is not None:
        blocks.append(Block("p", "What these answers rest on:"))
        blocks.append(Block("ul", items=(
            (f"compute model: {v.compute_model}",), (f"engine profile: {v.engine}",),
            (f"engine semantics: {v.semantics}",),
            (f"closest validation case: {v.closest_case}; {v.closest_error}",),
            *((f"closest serving validation, {q.text()}",) for q in v.serving),
            *((f"outside what was validated: {o}",) for o in v.outside))))
    return blocks


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block]) -> str:
    """The page as Markdown (figures as image links to their files)."""
    out: list[str] = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + b.text)
        elif b.kind == "p":
            out.append(b.text)
        elif b.kind == "ul":
            out.append("\n".join(f"- {item[0]}" for item in b.items))
        elif b.kind == "table":
            header, *rows = b.items
            lines = ["| " + " | ".join(_md_cell(c) for c in header) + " |",
                     "|" + "|".join("---" for _ in header) + "|"]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("\n".join(lines))
        elif b.kind == "figure":
            out.append(f"![{b.text}]({b.name})")
        out.append("")
    return "\n".join(out)


def _inline(text: str) -> str:
    escaped = html.escape(text)
    parts = escaped.split("**")
    return "".join(f"<strong>{part}</strong>" if i % 2 else part for i, part in enumerate(parts))


_STYLE = ("body{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;"
          "line-height:1.45;color:#222}table{border-collapse:collapse;margin:.5rem 0 1rem}"
          "td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;font-size:.9rem}"
          "th{background:#f2f2f2}img{max-width:100%}figure{margin:1rem 0}"
          "figcaption{font-size:.9rem;color:#555}")


def render_html(blocks: Sequence[Block], images: Mapping[str, bytes]) -> str:
    """The page as one HTML file, the figures (``images``: file -> PNG bytes) embedded."""
    title = next((b.text for b in blocks if b.kind == "h1"), "kvroof plan")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"]
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append(f"<{b.kind}>{_inline(b.text)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{_inline(b.text)}</p>")
        elif b.kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_inline(i[0])}</li>" for i in b.items) + "</ul>")
        elif b.kind == "table":
            header, *rows = b.items
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in header)
                       + "</tr></thead><tbody>" + "".join(
                           "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>"
                           for row in rows) + "</tbody></table>")
        elif b.kind == "figure":
            data = images.get(b.name)
            if data is None:
                continue
            encoded = base64.b64encode(data).decode("ascii")
            out.append(f'<figure><img alt="{html.escape(b.text)}" '
                       f'src="data:image/png;base64,{encoded}"><figcaption>'
                       f"{html.escape(b.text)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
