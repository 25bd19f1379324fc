"""The paper's own inputs for its offload roofline (Meng, Lee, Wang, arXiv 2601.19910, Fig. 4):
its GPUs and links by registry name, paper mode from its compute C and link bandwidth BW for a
deployment on them (as the report's paper-mode table computes it), and the kappa_crit it
prints."""

from __future__ import annotations

from kvroof.analysis.paper import PAPER_COMPUTE, PAPER_KAPPA_CRIT, PAPER_LINK_BANDWIDTH
from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_paper
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.paper_kappa import PaperKappa
from kvroof.cost.params import param_counts

__all__ = ["PAPER_ACCELERATORS", "PAPER_LINKS", "paper_inputs", "printed_kappa_crit"]

PAPER_ACCELERATORS: dict[str, str] = {"a100-sxm": "a100", "h100-sxm": "h100", "b200": "b200"}
"""The paper's GPUs by registry name (keys of :data:`kvroof.analysis.paper.PAPER_COMPUTE`)."""
PAPER_LINKS: dict[str, str] = {"pcie-gen4-x16": "pcie4", "pcie-gen5-x16": "pcie5"}
"""The paper's links by registry name (keys of :data:`PAPER_LINK_BANDWIDTH`)."""


def paper_inputs(dep: Deployment) -> PaperKappa | None:
    """Paper mode with the paper's own C and BW for a deployment on one of its GPUs and links
    (N_active as published, B_kv in the deployment's KV type), as the report's paper-mode table
    computes it; None for other hardware."""
    gpu = PAPER_ACCELERATORS.get(dep.accelerator.name)
    link = PAPER_LINKS.get(dep.link.name)
    if gpu is None or link is None:
        return None
    model = dep.model
    active = model.published.active if model.published else param_counts(model).active
    return kappa_paper(active, kv_bytes_per_token(model, dep.kv_dtype),
                       PAPER_LINK_BANDWIDTH[link], PAPER_COMPUTE[gpu])


def printed_kappa_crit(dep: Deployment) -> float | None:
    """The kappa_crit the paper prints for this model and hardware, if it prints one."""
    gpu = PAPER_ACCELERATORS.get(dep.accelerator.name)
    link = PAPER_LINKS.get(dep.link.name)
    if gpu is None or link is None:
        return None
    return PAPER_KAPPA_CRIT.get((dep.model.name, f"{gpu}-{link}"))

