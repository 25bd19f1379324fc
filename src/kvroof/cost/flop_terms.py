"""The constants of a model's prefill FLOPs (:class:`FlopTerms`, whole model, all layers) and the
totals built from them: per new token (projections, FFN, per-layer inputs), per (query, key)
pair (:mod:`kvroof.cost.pairs`) and per position (MLA's expanded up-projection).

The counting conventions are in :mod:`kvroof.cost.flops`, which builds each part of a prefill
from these constants; the cost model's hot paths use :func:`prefill_flops_total` and
:func:`decode_flops_sum`, which add them up without the parts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kvroof.cost.checks import when_positive
from kvroof.cost.groups import attention_projection_flops, layer_groups
from kvroof.cost.pairs import capped_pairs
from kvroof.errors import KvroofError
from kvroof.specs.layers import LayerKind
from kvroof.specs.model import ModelSpec, MoEFFN

__all__ = [
    "MLA_MODES",
    "Cap",
    "FlopTerms",
    "MlaMode",
    "capped_core",
    "check_mla_mode",
    "decode_flops_sum",
    "ffn_layer_flops",
    "flop_terms",
    "per_layer_input_flops",
    "per_layer_input_parts",
    "prefill_flops_total",
    "projection_flops_per_token",
]

MlaMode = Literal["expanded", "absorbed"]
MLA_MODES: tuple[MlaMode, ...] = ("expanded", "absorbed")


def check_mla_mode(mla_mode: str) -> None:
    if mla_mode not in MLA_MODES:
        raise KvroofError(f"mla_mode: expected one of {', '.join(MLA_MODES)}, got {mla_mode!r}")


def projection_flops_per_token(model: ModelSpec) -> float:
    """Projection FLOPs per new token of one layer of the model's ``attention`` (MLA: query,
    ``kv_a`` and output; the up-projection is counted apart, see ``mla_up`` in
    :func:`prefill_flops`)."""
    return attention_projection_flops(model.attention, model.hidden_size)


def ffn_layer_flops(model: ModelSpec, layer: int, kind: LayerKind) -> tuple[float, float,
                                                                              float, float]:
    """(dense, routed, shared, router) FLOPs per token of the FFN of layer ``layer`` (of kind
    ``kind``)."""
    d = float(model.hidden_size)
    ffn = model.ffn
    if not isinstance(ffn, MoEFFN):
        return 6.0 * d * (kind.ffn_intermediate_size or ffn.intermediate_size), 0.0, 0.0, 0.0
    if not ffn.is_moe_layer(layer):
        return 6.0 * d * (ffn.dense_intermediate_size or 0), 0.0, 0.0, 0.0
    shared = (6.0 * d * ffn.shared_expert_intermediate_size * ffn.num_shared_experts
              + (2.0 * d if ffn.shared_expert_gate else 0.0))
    return (0.0, 6.0 * d * ffn.expert_intermediate_size * ffn.experts_per_token, shared,
            2.0 * d * ffn.num_experts)


def _ffn_flops_per_token(model: ModelSpec) -> tuple[float, float, float, float]:
    """(dense, routed, shared, router) FLOPs per token summed over all layers."""
    totals = [0.0, 0.0, 0.0, 0.0]
    for layer, (_, kind) in enumerate(model.layer_kinds):
        for part, value in enumerate(ffn_layer_flops(model, layer, kind)):
            totals[part] += value
    return totals[0], totals[1], totals[2], totals[3]


def per_layer_input_parts(model: ModelSpec) -> tuple[float, float]:
    """(model-level projection, each layer's gate and projection back) FLOPs per token of the
    per-layer inputs: ``2 d L h_ple`` and ``4 d h_ple`` (0 without per-layer inputs)."""
    ple = model.per_layer_input
    if ple is None:
        return 0.0, 0.0
    d = model.hidden_size
    return float(2 * d * model.num_layers * ple.hidden_size), float(4 * d * ple.hidden_size)


def per_layer_input_flops(model: ModelSpec) -> float:
    """Per-layer input FLOPs per token (0 without per-layer inputs)."""
    projection, per_layer = per_layer_input_parts(model)
    return projection + model.num_layers * per_layer


Cap = tuple[str, float, float]
"""``(rule, span, FLOPs per pair summed over the layers)`` for ``window`` and ``chunk`` rules."""


@dataclass(frozen=True)
class FlopTerms:
    """The per-token, per-pair and per-position constants of a model's prefill FLOPs (whole
    model, all layers), from which :func:`prefill_flops` and :func:`prefill_flops_total` build
    every count. ``up`` is the MLA expanded up-projection per position (0 otherwise),
    ``absorbed`` the MLA absorbed-mode FLOPs per new token (0 otherwise); ``pair_full`` the
    FLOPs per pair of the layers that see every earlier position, ``index_pairs`` those of the
    sparse layers' indexers (which see every earlier position too), ``caps`` the window and
    chunk rules with their FLOPs per pair."""

    projections: float
    linear: float
    index_tokens: float
    per_layer_input: float
    dense: float
    routed: float
    shared: float
    router: float
    absorbed: float
    up: float
    pair_full: float
    index_pairs: float
    caps: tuple[Cap, ...]
    lm_head: float
    per_token: float = field(init=False)
    """FLOPs that every new token costs whatever the context."""
    full_pairs: float = field(init=False)
    """FLOPs per pair over every layer that sees every earlier position (indexers too)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_token", self.projections + self.linear
                           + self.index_tokens + self.per_layer_input + self.dense + self.routed
                           + self.shared + self.router + self.absorbed)
        object.__setattr__(self, "full_pairs", self.pair_full + self.index_pairs)


def flop_terms(model: ModelSpec, mla_mode: MlaMode = "expanded", *, decode: bool = False,
               replicated: float = 1.0) -> FlopTerms:
    """The constants of ``model``'s prefill FLOPs under ``mla_mode`` (``decode``: linear layers
    take their recurrent step; ``replicated``: a factor on the work every TP rank repeats, the
    sparse layers' indexers, whose weights and scores vLLM keeps unsharded)."""
    check_mla_mode(mla_mode)
    projections = linear = index_tokens = absorbed = up = pair_full = index_pairs = 0.0
    caps: dict[tuple[str, float], float] = {}
    for group in layer_groups(model, mla_mode):
        n = group.count
        if group.kind == "linear":
            linear += n * (group.decode_projections if decode else group.projections)
            continue
        projections += n * group.projections
        absorbed += n * group.absorbed
        up += n * group.up
        index_tokens += n * group.index_tokens * replicated
        index_pairs += n * group.index_pair * replicated
        if group.rule == "full":
            pair_full += n * group.per_pair
        else:
            key = (group.rule, group.span)
            caps[key] = caps.get(key, 0.0) + n * group.per_pair
    dense, routed, shared, router = _ffn_flops_per_token(model)
    return FlopTerms(
        projections=projections, linear=linear, index_tokens=index_tokens,
        per_layer_input=per_layer_input_flops(model), dense=dense, routed=routed,
        shared=shared, router=router, absorbed=absorbed, up=up, pair_full=pair_full,
        index_pairs=index_pairs,
        caps=tuple((rule, span, flops) for (rule, span), flops in caps.items()),
        lm_head=2.0 * model.hidden_size * model.vocab_size,
    )


def capped_core(terms: FlopTerms, t: Any, k: Any) -> Any:
    core: Any = 0.0
    for rule, span, flops in terms.caps:
        core = core + flops * capped_pairs(rule, span, t, k)
    return core


def _attention_core(terms: FlopTerms, t: Any, k: Any) -> Any:
    core = terms.pair_full * (t * k + t * (t + 1.0) / 2.0)
    if terms.caps:
        core = core + capped_core(terms, t, k)
    return core


def prefill_flops_total(terms: FlopTerms, t: Any, k: Any) -> Any:
    """Total prefill FLOPs for validated token counts (floats or broadcasting arrays); the same
    sum as :attr:`PrefillFlops.total`, without materializing each part."""
    full = terms.full_pairs
    total = terms.per_token * t + full * (t * k + t * (t + 1.0) / 2.0)
    if terms.caps:
        total = total + capped_core(terms, t, k)
    if terms.up:
        total = total + terms.up * when_positive(t, k + t)  # nothing runs with nothing to do
    return total + when_positive(t, terms.lm_head)


def decode_flops_sum(terms: FlopTerms, count: Any, context_sum: Any,
                     capped_sums: Any = 0.0) -> Any:
    """:func:`prefill_flops_total` summed over ``count`` decodes (``T = 1`` each, logits each)
    whose contexts sum to ``context_sum``: a decode on ``K`` cached tokens scores ``K + 1`` pairs
    in a layer that sees every position and :func:`capped_positions` in a window or chunk layer,
    so the sum needs ``capped_sums``, one sum of those per entry of ``terms.caps`` (a number
    when there is one)."""
    flops = (count * (terms.per_token + terms.lm_head)
             + terms.full_pairs * (context_sum + count))
    if terms.caps:
        sums = capped_sums if isinstance(capped_sums, tuple | list) else (capped_sums,)
        if len(sums) != len(terms.caps):
            raise KvroofError(f"capped_sums: expected {len(terms.caps)} sums (one per window "
                              f"or chunk rule), got {len(sums)}")
        for (_, _, per_pair), value in zip(terms.caps, sums, strict=True):
            flops = flops + per_pair * value
    if terms.up:
        flops = flops + terms.up * (context_sum + count)
    return flops
