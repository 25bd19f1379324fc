"""The report's "kappa_crit by attention family" table and figure (numbers from
:mod:`kvroof.analysis.families`; nothing is computed here)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from kvroof.analysis.families import (
    FAMILIES,
    Family,
    FamilyKappa,
    KindShare,
    Placement,
    family_kappas,
    kind_shares,
)
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.memory_fit import fit_problem
from kvroof.report.config import ReportConfig
from kvroof.report.tables import Table
from kvroof.specs.registry import Registry
from kvroof.units import Kind, format_quantity

__all__ = ["FAMILY_PLACEMENTS", "families_figure_and_caption", "family_table"]

FAMILY_PLACEMENTS: tuple[Placement, ...] = (
    Placement("dgx-h100", 1), Placement("dgx-h100", 8), Placement("gh200", 1),
    Placement("hgx-h200", 8))
"""H100 + PCIe Gen5 at TP 1 and 8, one GH200, and HGX H200 at TP 8 (where DeepSeek fits)."""


def _settings(config: ReportConfig) -> dict[str, Any]:
    """The report's settings but TP (each placement has its own)."""
    return {k: v for k, v in config.settings().items() if k != "tp"}


def _cell(row: FamilyKappa) -> str:
    if row.alone is None or row.busy is None:
        return "does not fit"
    return f"{_num(row.alone)} / {_num(row.busy)}"


def _num(value: float) -> str:
    return "never" if value == float("inf") else f"{value:.3g}"


def _size(value: float) -> str:
    return format_quantity(value, Kind.CAPACITY)


SHARE_TOKENS = 32_000.0
"""The cached prefix at which the report splits bytes and FLOPs by layer kind (a long chat or a
large document; not a multiple of 8,192, so a chunked layer holds part of a chunk)."""


def family_sentence(family: Family, shares: Sequence[KindShare], new_tokens: float) -> str:
    """Why a family's kappa_crit moves as it does, from its layer kinds' shares (bytes and
    attention FLOPs per cached token far beyond every cap, at ``new_tokens``)."""
    per_token = sum(s.marginal_bytes for s in shares)
    flops = sum(s.marginal_flops for s in shares)
    layers = sum(s.layers for s in shares)
    kinds = {s.kind: s for s in shares}
    balance = (f"each cached token adds {_size(per_token)} to a load and "
               f"{flops / 1e9:.3g} GFLOP of attention to a {new_tokens:g}-token prefill "
               f"({flops / per_token:,.0f} FLOP per byte, K beyond every window and cap)")
    if "linear" in kinds:
        linear = kinds["linear"]
        return (f"{linear.layers} of {layers} layers keep no KV but a fixed "
                f"{_size(linear.state_bytes)} state, loaded once per request; only the full "
                f"layers grow with K: {balance}. The fixed load is paid at any K: where the "
                "compute is short (inside a busy iteration) it alone outlasts it, and any "
                "cached prefix is transfer-bound (kappa_crit 0).")
    if "sparse" in kinds:
        return ("below top-k (2,048) cached tokens a DSA layer attends like an absorbed MLA "
                "layer plus its indexer; beyond, only the indexer's scores grow with K: "
                f"{balance}. vLLM computes the indexer unsharded on every rank, so at TP 8 "
                "each GPU pays about what DeepSeek-V3's expanded attention costs it per cached "
                "token and kappa_crit stays near V3's; the load still moves every latent "
                "unless only the selected blocks are loaded (--sparse-load, a what-if).")
    if "chunked" in kinds:
        chunked = kinds["chunked"]
        return (f"{chunked.layers} of {layers} layers see only their chunk, so a load brings "
                f"back at most {_size(chunked.bounded_bytes)} for them (a saw-tooth in K that "
                "falls to nothing at each chunk boundary) and only the full layers grow with "
                f"K: {balance}. kappa_crit is where even the saw's troughs are transfer-bound, "
                "an integer K; with --local-kv all every layer loads every token.")
    if "shared" in kinds:
        shared = kinds["shared"]
        return (f"{shared.layers} of {layers} layers reuse earlier layers' KV: no bytes of "
                "their own but attention as usual, so compute per cached byte rises: "
                f"{balance}; the sliding layers' bounded cache is a fixed load.")
    if "sliding" in kinds:
        sliding = kinds["sliding"]
        return (f"{sliding.layers} of {layers} layers hold at most their window "
                f"({_size(sliding.bounded_bytes)} in all, a fixed load once K exceeds it); "
                f"beyond it only the global layers count: {balance}.")
    full = kinds.get("full")
    if full is not None and full.marginal_bytes and full.marginal_flops / full.marginal_bytes \
            > 10_000:
        return (f"the compressed latent keeps the bytes small while expanded prefill "
                f"up-projects every cached latent: {balance}, the most compute per cached "
                "byte of the families, so kappa_crit stays high once the weights are shared.")
    return (f"every layer keeps every token: {balance}. Alone, the weight reads set the compute "
            "at small T, so kappa_crit is high and falls with T; in a busy iteration it falls "
            "toward this FLOP-per-byte balance over the hardware's FLOPs per link byte.")


def family_table(config: ReportConfig, reg: Registry) -> Table:
    """kappa_crit at the report's T for one model per attention family, alone and in a busy
    iteration, on H100 + PCIe Gen5 (TP 1 and 8), GH200 and HGX H200 (TP 8)."""
    t = config.new_tokens
    kappas = family_kappas(t, config.token_budget, FAMILIES, FAMILY_PLACEMENTS, reg,
                           **_settings(config))
    rows = []
    notes = []
    for family in FAMILIES:
        model = reg.model(family.model)
        shares = kind_shares(model, t, SHARE_TOKENS)
        per_token = sum(s.marginal_bytes for s in shares)
        fixed = sum(s.state_bytes + s.bounded_bytes for s in shares)
        cells = [_cell(r) for r in kappas if r.family == family]
        rows.append([family.name, model.name,
                     " + ".join(f"{s.layers} {s.kind}" for s in shares),
                     _size(per_token), _size(fixed) if fixed else "-", *cells])
        notes.append(f"{family.name} ({model.name}): "
                     + family_sentence(family, shares, t))
    header = ["family", "model", "layers", "KV per cached token", "bounded + fixed per request",
              *[f"{p.label} alone / busy" for p in FAMILY_PLACEMENTS]]
    notes.insert(0, f"kappa_crit at T = {t:g}: a request alone / inside a busy iteration of "
                    f"{config.token_budget:g} tokens that shares the weight reads; 'does not "
                    "fit' where the weights (plus the KV reserve) exceed the GPUs' memory. KV "
                    "per cached token: the bytes a load adds per token beyond every window, "
                    "chunk and top-k cap (bf16); bounded + fixed: what the windowed and chunked "
                    "layers hold at most and the linear layers' states. dgx-h100 is H100 SXM "
                    "with PCIe Gen5; gh200 links its Grace memory over NVLink-C2C.")
    return Table("families", f"kappa_crit by attention family (T = {t:g})", header, rows, notes)


def families_figure_and_caption(config: ReportConfig, reg: Registry,
                                ) -> tuple[Figure, str, str]:
    """The families figure, its caption and its finding (the alt text): each model on the
    first of dgx-h100 TP 8 and hgx-h200 TP 8 where it fits (solid), and on one GH200 where it
    fits (dashed)."""
    from kvroof.plot.families import families_figure

    def fits(model: str, placement: Placement) -> Deployment | None:
        dep = deployment(model, system=placement.system, tp=placement.tp, registry=reg,
                         **_settings(config))
        return None if fit_problem(dep) else dep

    firsts: list[Deployment | None] = []
    seconds: list[Deployment | None] = []
    left_out = []
    for family in FAMILIES:
        first = fits(family.model, Placement("dgx-h100", 8)) or fits(
            family.model, Placement("hgx-h200", 8))
        second = fits(family.model, Placement("gh200", 1))
        firsts.append(first)
        seconds.append(second)
        if first is None:
            left_out.append(f"{family.model} fits neither dgx-h100 nor hgx-h200 at TP 8")
        if second is None:
            left_out.append(f"{family.model} does not fit one GH200")
    figure = families_figure(FAMILIES, firsts, seconds, config.new_tokens, SHARE_TOKENS)
    caption = ("One model per attention family. Top left: kappa_crit against T for a request "
               "alone (solid: dgx-h100 TP 8, or hgx-h200 TP 8 where DeepSeek's weights need "
               "it; dashed: one GH200). Top right: load time over compute time against K at "
               f"T = {config.new_tokens:g}: a chunked model's load is a saw-tooth, a hybrid's "
               "starts at its fixed state, a sparse model's compute stops growing at top-k. "
               f"Bottom: a {SHARE_TOKENS:,.0f}-token prefix's load bytes and attention FLOPs "
               f"(at T = {config.new_tokens:g}) per cached token, by layer kind: windows, the "
               "current chunk and fixed states included (the table 'kappa_crit by attention "
               "family' explains each family). Not shown: "
               + "; ".join(left_out) + ".")
    from kvroof.cost.kappa import kappa_crit

    values = [(family.name, float(kappa_crit(dep, config.new_tokens).kappa_crit))
              for family, dep in zip(FAMILIES, firsts, strict=True) if dep is not None]
    finite = [(name, v) for name, v in values if v != float("inf")]
    alt = "kappa_crit by attention family (a request alone, first placement that fits)"
    if finite:
        low = min(finite, key=lambda item: item[1])
        high = max(finite, key=lambda item: item[1])
        alt += (f" at T = {config.new_tokens:g}: lowest {_num(low[1])} ({low[0]}), highest "
                f"{_num(high[1])} ({high[0]}); the bars show where each family's load bytes "
                "and attention FLOPs per cached token come from.")
    else:
        alt += ": no family is transfer-bound at any K."
    return figure, caption, alt
