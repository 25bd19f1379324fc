"""What-ifs: how kappa_crit moves with a faster link, a smaller KV format, or MLA.

Each scenario is a change to a :class:`~kvroof.cost.deployment.Deployment` (``dataclasses.replace``
or a modified model); the numbers come from the same kappa functions as everything else.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.specs.hardware import Link
from kvroof.specs.model import GQAAttention, MLAAttention, ModelSpec
from kvroof.specs.registry import Registry, default_registry

__all__ = ["WhatIfRow", "standard_what_ifs", "what_if_table", "with_mla"]


def with_mla(model: ModelSpec, kv_lora_rank: int = 512, qk_rope_head_dim: int = 64) -> ModelSpec:
    """The model with its attention replaced by DeepSeek-style MLA of the same head count
    (``qk_nope_head_dim`` and ``v_head_dim`` = the old ``head_dim``, no query compression).
    KV per layer per token becomes ``kv_lora_rank + qk_rope_head_dim`` elements."""
    att = model.attention
    if isinstance(att, MLAAttention):
        return model
    assert isinstance(att, GQAAttention)
    mla = MLAAttention(kind="mla", num_heads=att.num_heads, q_lora_rank=None,
                       kv_lora_rank=kv_lora_rank, qk_nope_head_dim=att.head_dim,
                       qk_rope_head_dim=qk_rope_head_dim, v_head_dim=att.head_dim)
    return model.model_copy(update={
        "name": f"{model.name}-mla", "display_name": f"{model.label} (MLA latent)",
        "attention": mla,
    })


@dataclass(frozen=True)
class WhatIfRow:
    """One scenario: what changed, B_kv, the link bandwidth, and kappa_crit both ways."""

    scenario: str
    change: str
    kv_bytes_per_token: float
    bandwidth: float
    kappa_paper: float
    kappa_full: float
    never_transfer_bound: bool


Scenario = tuple[str, str, Callable[[Deployment], Deployment]]


def standard_what_ifs(registry: Registry | None = None) -> list[Scenario]:
    """PCIe 6, NVLink-C2C, HBM-class bandwidth, FP8 and INT4 KV, MLA, MLA + FP8."""
    reg = registry or default_registry()

    def link(name: str) -> Callable[[Deployment], Deployment]:
        spec: Link = reg.link(name)

        def apply(dep: Deployment) -> Deployment:
            if dep.bandwidth_source == "sustained" and spec.sustained_bandwidth is None:
                # No published measurement: assume the base link's sustained/peak ratio.
                ratio = float(np.asarray(dep.link_bandwidth)) * dep.host_link_sharers / (
                    dep.link.peak_bandwidth)
                return dataclasses.replace(
                    dep, link=spec, bandwidth=spec.peak_bandwidth * ratio / dep.host_link_sharers
                )
            return dataclasses.replace(dep, link=spec, bandwidth=None)

        return apply

    return [
        ("baseline", "as given", lambda dep: dep),
        ("PCIe 6", "host link PCIe Gen6 x16 (121 GB/s peak; sustained: the base link's "
         "sustained/peak ratio)", link("pcie-gen6-x16")),
        ("NVLink-C2C", "host link NVLink-C2C (450 GB/s per direction)", link("nvlink-c2c")),
        ("HBM-class", "host link as fast as the GPU's HBM",
         lambda dep: dataclasses.replace(dep, bandwidth=dep.accelerator.hbm_bandwidth)),
        ("FP8 KV", "KV cache in fp8 (1 B per element)",
         lambda dep: dataclasses.replace(dep, kv_dtype="fp8")),
        ("INT4 KV", "KV cache in int4 (0.5 B per element)",
         lambda dep: dataclasses.replace(dep, kv_dtype="int4")),
        ("MLA", "MLA latent 512 + RoPE 64 (absorbed prefill)",
         lambda dep: dataclasses.replace(dep, model=with_mla(dep.model), mla_mode="absorbed")),
        ("MLA + FP8", "MLA latent in fp8 (absorbed prefill)",
         lambda dep: dataclasses.replace(dep, model=with_mla(dep.model), mla_mode="absorbed",
                                         kv_dtype="fp8")),
    ]


def what_if_table(
    dep: Deployment, new_tokens: float = 128.0, scenarios: list[Scenario] | None = None
) -> list[WhatIfRow]:
    """kappa_crit (paper and full mode at ``new_tokens``) under each scenario."""
    rows = []
    for name, change, apply in scenarios or standard_what_ifs():
        changed = apply(dep)
        full = kappa_crit(changed, new_tokens)
        if name.startswith("MLA") and dep.model.is_mla:
            change += "; the model already uses MLA, so only the prefill form changes"
        rows.append(WhatIfRow(
            scenario=name,
            change=change,
            kv_bytes_per_token=kv_bytes_per_token(changed.model, changed.kv_dtype),
            bandwidth=float(np.asarray(changed.effective_bandwidth)),
            kappa_paper=float(kappa_paper_for(changed).kappa_crit),
            kappa_full=float(full.kappa_crit),
            never_transfer_bound=bool(full.never_transfer_bound),
        ))
    return rows
