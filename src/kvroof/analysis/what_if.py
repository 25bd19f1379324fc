"""What-ifs: how kappa_crit moves with a faster link, a smaller KV format, or MLA.

Each scenario is a change to a :class:`~kvroof.cost.deployment.Deployment` (``dataclasses.replace``
or a modified model); the numbers come from the same kappa functions as everything else.

Link what-ifs change hardware that exists together, never a link alone:

- ``PCIe 6``: the same host with a Gen6 x16 link per GPU; the host's DRAM, shared by its
  GPUs by NUMA node, still bounds each load (a Gen6 host would bring newer DRAM too: the row
  says which bound binds);
- ``NVLink-C2C (GH200-style)``: the whole host swapped for one Grace per GPU, its LPDDR5X and
  its NVLink-C2C, as a GH200 has (the GPUs stay the base system's);
- ``NVLink-C2C (GB200-style)``: one Grace per two GPUs, sharing its C2C and LPDDR5X;
- ``HBM-class``: a link as fast as the GPU's HBM with no host memory behind it: no DRAM can feed
  it, so this is the bound of a peer GPU's HBM or a pooled HBM tier, not of a host.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper_for
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.errors import KvroofError
from kvroof.specs.hardware import Link, System
from kvroof.specs.model import GQAAttention, MLAAttention, ModelSpec
from kvroof.specs.registry import Registry, default_registry

__all__ = ["WhatIfRow", "grace_host", "standard_what_ifs", "what_if_table", "with_mla"]


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


def grace_host(base: System, grace: System, gpus_per_grace: int) -> System:
    """``base``'s GPUs on a Grace host: one Grace (``grace``'s CPU, LPDDR5X and NVLink-C2C) per
    ``gpus_per_grace`` GPUs, each Grace's C2C shared by its GPUs; no other tiers."""
    if base.num_accelerators % gpus_per_grace:
        raise KvroofError(f"gpus_per_grace: {gpus_per_grace} does not divide the "
                          f"{base.num_accelerators} GPUs of {base.name}")
    graces = base.num_accelerators // gpus_per_grace
    memory = grace.host_memory.model_copy(update={"sockets": graces,
                                                  "inter_socket_bandwidth": None})
    return base.model_copy(update={
        "name": f"{base.name}-on-grace-{gpus_per_grace}",
        "display_name": f"{base.label}, GPUs on {graces} Grace CPU(s) ({gpus_per_grace} per "
                        "Grace, NVLink-C2C)",
        "aliases": (),
        "cpu": f"{graces}x NVIDIA Grace",
        "host_link": grace.host_link,
        "gpus_per_host_link": gpus_per_grace,
        "host_link_sustained_bandwidth": None,
        "host_memory": memory,
        "gpu_sockets": tuple(gpu // gpus_per_grace for gpu in range(base.num_accelerators)),
        "tiers": (),
        "calibration": None,
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
    bound: str = ""
    """What bounds the per-GPU load bandwidth: ``link``, ``host DRAM`` or ``no host``."""


Scenario = tuple[str, str, Callable[[Deployment], Deployment]]


def _bandwidth_bound(dep: Deployment) -> str:
    if dep.system is None:
        return "link"
    link = float(np.asarray(dep.link_bandwidth)) * float(np.asarray(dep.link_efficiency))
    return "host DRAM" if dep.host_dram_share < link else "link"


def standard_what_ifs(registry: Registry | None = None) -> list[Scenario]:
    """PCIe 6, NVLink-C2C hosts (GH200-style and GB200-style), HBM-class bandwidth, FP8 and INT4
    KV, MLA, MLA + FP8."""
    reg = registry or default_registry()

    def pcie6(dep: Deployment) -> Deployment:
        spec: Link = reg.link("pcie-gen6-x16")
        if dep.resolved_bandwidth_source == "sustained" and spec.sustained_bandwidth is None:
            # No published measurement: assume the base link's sustained/peak ratio.
            ratio = float(np.asarray(dep.link_bandwidth)) * dep.host_link_sharers / (
                dep.link.peak_bandwidth)
            return dataclasses.replace(
                dep, link=spec, bandwidth=spec.peak_bandwidth * ratio / dep.host_link_sharers
            )
        if dep.system is not None:
            system = dep.system.model_copy(update={"host_link": spec.name,
                                                   "host_link_sustained_bandwidth": None})
            return dataclasses.replace(dep, system=system, link=spec, bandwidth=None)
        return dataclasses.replace(dep, link=spec, bandwidth=None)

    def grace(per_grace: int, reference: str) -> Callable[[Deployment], Deployment]:
        def apply(dep: Deployment) -> Deployment:
            template = reg.system(reference)
            base = dep.system
            if base is None:
                base = template.model_copy(update={"accelerator": dep.accelerator.name,
                                                   "num_accelerators": max(dep.tp, per_grace)})
            host = grace_host(base, template, per_grace)
            return dataclasses.replace(dep, system=host, link=reg.link(host.host_link),
                                       bandwidth=None, gpus_loading=None,
                                       host_memory_locality="local")
        return apply

    def hbm_class(dep: Deployment) -> Deployment:
        return dataclasses.replace(dep, system=None, bandwidth=dep.accelerator.hbm_bandwidth,
                                   gpus_loading=None, tier_fractions={})

    return [
        ("baseline", "as given", lambda dep: dep),
        ("PCIe 6", "host link PCIe Gen6 x16 (121 GB/s peak; sustained: the base link's "
         "sustained/peak ratio); the same host DRAM", pcie6),
        ("C2C, GH200-style", "whole host swapped: one Grace (LPDDR5X, 307 GB/s STREAM) and its "
         "NVLink-C2C (450 GB/s peak, 346 sustained) per GPU", grace(1, "gh200")),
        ("C2C, GB200-style", "whole host swapped: one Grace per two GPUs, sharing its C2C and "
         "LPDDR5X", grace(2, "gb200")),
        ("HBM-class", "a link as fast as the GPU's HBM; no host memory feeds it (hypothetical: "
         "a peer GPU's HBM or a pooled HBM tier)", hbm_class),
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
            bound="no host" if name == "HBM-class" else _bandwidth_bound(changed),
        ))
    return rows
