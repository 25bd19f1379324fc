"""kappa_crit by attention family: one model of each family, where its cached tokens' bytes and
FLOPs come from, and kappa_crit at a T on chosen placements, a request alone and inside a busy
iteration.

Per layer kind (:mod:`kvroof.cost.groups`), at a chosen ``K``:

- bytes per cached token: what a load of ``K`` tokens moves for those layers
  (:func:`kvroof.cost.kv.kv_bytes_by_kind`: every token, the last ``W``, the current chunk, a
  fixed state, a selected share of a sparse layer's latents), over ``K``; and far beyond every
  cap, where windowed, chunked and linear layers add nothing more per token;
- FLOPs per cached token: the attention FLOPs (pairs, indexer scores, MLA up-projection;
  :func:`kvroof.cost.flops.attention_flops_by_kind`) that ``K`` cached tokens add to a prefill of
  ``T``, over ``K``.

The ratio of the two, FLOPs per cached byte, against the hardware's FLOPs per link byte, is what
kappa_crit comes down to once the weight reads no longer bind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvroof.cost.checks import token_value
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.flops import MlaMode, attention_flops_by_kind
from kvroof.cost.groups import layer_groups
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.kv import kv_bytes_by_kind
from kvroof.cost.memory_fit import fit_problem
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry, default_registry

__all__ = [
    "FAMILIES",
    "PLACEMENTS",
    "Family",
    "FamilyKappa",
    "KindShare",
    "Placement",
    "family_kappas",
    "kind_shares",
]


@dataclass(frozen=True)
class Family:
    """An attention family and the registry model that stands for it."""

    name: str
    model: str


FAMILIES: tuple[Family, ...] = (
    Family("full attention, GQA", "qwen3-235b-a22b"),
    Family("full attention, MLA", "deepseek-v3"),
    Family("sliding window (5:1)", "gemma-3-27b"),
    Family("chunked local (3:1)", "llama-4-scout-17b-16e"),
    Family("linear hybrid (3:1)", "qwen3-next-80b-a3b"),
    Family("sparse (DSA)", "deepseek-v3.2"),
    Family("shared KV + sliding", "gemma-4-e2b"),
)


@dataclass(frozen=True)
class Placement:
    """Where a family's model runs: a system and a TP degree."""

    system: str
    tp: int

    @property
    def label(self) -> str:
        return f"{self.system} TP {self.tp}"


PLACEMENTS: tuple[Placement, ...] = (Placement("dgx-h100", 1), Placement("dgx-h100", 8),
                                     Placement("gh200", 1))
"""H100 SXM with PCIe Gen5 at TP 1 and 8, and one GH200 (NVLink-C2C)."""


@dataclass(frozen=True)
class KindShare:
    """One layer kind's share of a model's cached-token costs (whole model, all ranks)."""

    kind: str
    layers: int
    bytes_per_cached_token: float
    """What a load of ``K`` tokens moves for these layers, over ``K``."""
    flops_per_cached_token: float
    """The attention FLOPs ``K`` cached tokens add to a prefill of ``T``, over ``K``."""
    marginal_bytes: float
    """Bytes per cached token beyond every window, chunk and cap (K far larger)."""
    marginal_flops: float
    """Attention FLOPs per cached token there, at ``T``."""
    bounded_bytes: float
    """The most its windowed or chunked layers hold per request."""
    state_bytes: float


_FAR = float(2**30)  # beyond every window and cap, a multiple of power-of-two chunks


def kind_shares(model: ModelSpec, new_tokens: float, cached_tokens: float,
                kv_dtype: str = "bf16", mla_mode: MlaMode = "expanded", local_kv: str = "held",
                sparse_share: float = 1.0) -> list[KindShare]:
    """Each layer kind's bytes and FLOPs per cached token at (``new_tokens``,
    ``cached_tokens``), and its bytes per cached token far beyond every cap (module
    docstring)."""
    k = token_value("cached_tokens", cached_tokens, at_least_one=True)  # shares per token
    loads = kv_bytes_by_kind(model, k, kv_dtype, local_kv, sparse_share)
    far = kv_bytes_by_kind(model, np.array([_FAR, 2 * _FAR]), kv_dtype, local_kv, sparse_share)
    with_k = attention_flops_by_kind(model, new_tokens, k, mla_mode)
    without = attention_flops_by_kind(model, new_tokens, 0.0, mla_mode)
    far_flops = attention_flops_by_kind(model, new_tokens, np.array([_FAR, 2 * _FAR]),
                                        mla_mode)
    shares = []
    groups = layer_groups(model, mla_mode)
    for kind, load in loads.items():
        members = [g for g in groups if g.kind == kind]
        bounded = 0.0 if local_kv == "all" else sum(
            g.count * g.kv_bytes_per_position(kv_dtype) * g.most_kept for g in members
            if g.holds in ("window", "chunk"))
        flops = float(with_k.get(kind, 0.0)) - float(without.get(kind, 0.0))
        shares.append(KindShare(
            kind=kind, layers=sum(g.count for g in members),
            bytes_per_cached_token=float(load) / k, flops_per_cached_token=flops / k,
            marginal_bytes=float(far[kind][1] - far[kind][0]) / _FAR,
            marginal_flops=float(far_flops[kind][1] - far_flops[kind][0]) / _FAR
            if kind in far_flops else 0.0,
            bounded_bytes=bounded,
            state_bytes=sum(g.count * g.state_bytes for g in members)))
    return shares


@dataclass(frozen=True)
class FamilyKappa:
    """kappa_crit of one family's model on one placement: alone and in a busy iteration
    (``None`` when the weights do not fit; ``fit`` then says why)."""

    family: Family
    placement: Placement
    alone: float | None
    busy: float | None
    fit: str


def _placed(model: str, placement: Placement, registry: Registry,
            **settings: Any) -> Deployment:
    return deployment(model, system=placement.system, tp=placement.tp, registry=registry,
                      **settings)


def family_kappas(new_tokens: float, token_budget: float,
                  families: Sequence[Family] = FAMILIES,
                  placements: Sequence[Placement] = PLACEMENTS,
                  registry: Registry | None = None, **settings: Any) -> list[FamilyKappa]:
    """kappa_crit at ``new_tokens`` for every family on every placement, a request alone and
    inside an iteration of ``token_budget`` tokens; "does not fit" where the weights do not."""
    reg = registry or default_registry()
    rows = []
    for family in families:
        for placement in placements:
            dep = _placed(family.model, placement, reg, **settings)
            problem = fit_problem(dep)
            if problem:
                rows.append(FamilyKappa(family, placement, None, None, problem))
                continue
            alone = float(kappa_crit(dep, new_tokens).kappa_crit)
            busy_dep = dataclasses.replace(dep, iteration_tokens=max(token_budget, new_tokens))
            busy = float(kappa_crit(busy_dep, new_tokens).kappa_crit)
            rows.append(FamilyKappa(family, placement, alone, busy, ""))
    return rows

