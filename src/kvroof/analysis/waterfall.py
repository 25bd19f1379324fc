"""From the paper's kappa_crit to kvroof's full one, one change at a time.

Each step changes one thing and recomputes kappa_crit with the library's own functions, so the
ratio between consecutive steps says how much that change moves the answer:

1. paper: the paper's formula with the paper's inputs (sparse-class C, stated link bandwidth);
2. dense peak: the accelerator's dense peak for the compute dtype instead;
3. link bandwidth: the deployment's link bandwidth (peak or sustained) instead;
4. achievable compute: the deployment's compute efficiency (the published achievable matmul
   rate by default) in the paper's formula;
5. full model, busy iteration: everything the cost model counts except the request's own weight
   reads (it shares them with an iteration of ``iteration_tokens``, default 8,192): attention
   over the cached context, MLA up-projection, LM head once, TP (compute split N ways, GQA KV
   split min(N, kv_heads) ways, the MLA latent not split) and its all-reduces, per-copy latency,
   write-back, host DRAM by NUMA node;
6. request alone: the request reads the weights for itself (the HBM roof).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from kvroof.cost.deployment import Deployment
from kvroof.cost.kappa import kappa_crit, kappa_paper, kappa_paper_for

__all__ = ["WaterfallStep", "kappa_waterfall", "waterfall_sentence"]


@dataclass(frozen=True)
class WaterfallStep:
    """kappa_crit after a change, and the factor relative to the step before."""

    step: str
    kappa_crit: float
    factor: float


def kappa_waterfall(
    dep: Deployment, new_tokens: float, paper_compute: float, paper_bandwidth: float,
    iteration_tokens: float = 8192.0,
) -> list[WaterfallStep]:
    """The steps from the paper's kappa_crit to the full-mode one for ``dep`` (alone) at
    ``new_tokens``."""
    model = dep.model
    active = model.published.active if model.published else None
    paper = kappa_paper_for(dep)
    alone = dataclasses.replace(dep, iteration_tokens=None)
    busy = dataclasses.replace(dep, iteration_tokens=max(iteration_tokens, new_tokens))
    achievable = paper.kappa_crit * paper.compute / float(dep.effective_compute)
    values = [
        ("paper", float(kappa_paper(active or paper.active_params, paper.kv_bytes_per_token,
                                    paper_bandwidth, paper_compute).kappa_crit)),
        ("dense peak", float(kappa_paper(paper.active_params, paper.kv_bytes_per_token,
                                         paper_bandwidth, paper.compute).kappa_crit)),
        ("link bandwidth", float(paper.kappa_crit)),
        ("achievable compute", float(achievable)),
        (f"full model, TP {dep.tp}, busy iteration", float(kappa_crit(busy,
                                                                       new_tokens).kappa_crit)),
        ("request alone (weight reads)", float(kappa_crit(alone, new_tokens).kappa_crit)),
    ]
    steps = []
    previous = values[0][1]
    for name, value in values:
        factor = value / previous if previous not in (0.0, float("inf")) else float("nan")
        steps.append(WaterfallStep(name, value, factor))
        previous = value
    return steps


def waterfall_sentence(steps: list[WaterfallStep]) -> str:
    """One sentence that says what each change did."""
    parts = []
    for step in steps[1:]:
        if step.kappa_crit == float("inf"):
            parts.append(f"{step.step}: never transfer-bound")
        elif not math.isfinite(step.factor):
            parts.append(f"{step.step} -> {step.kappa_crit:.3g}")
        else:
            parts.append(f"{step.step} x{step.factor:.2g} (-> {step.kappa_crit:.3g})")
    return f"from the paper's {steps[0].kappa_crit:.3g}: " + "; ".join(parts)
