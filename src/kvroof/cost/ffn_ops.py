"""The ops of the feed-forward layers on one tensor-parallel rank: a dense FFN's ``gate_up``
(``n = 2 ff/TP``), ``activation`` (SiLU-and-mul, ``6 ff/TP`` bytes a token) and ``down``
(``k = ff/TP``), one group per distinct width; a MoE layer's ``router`` on every rank (``n =
E``, plus the shared experts' output gate), the fused ``moe`` (``E`` experts of ``d x
ff_e/TP``, top-``k``; its activation is inside the kernel) and its shared experts'
``shared_gate_up``/``shared_down`` (:func:`ffn_ops`; :mod:`kvroof.cost.ops` assembles the
whole pass).
"""

from __future__ import annotations

from collections import Counter

from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.forward_op import Op, elementwise_op, gemm_op
from kvroof.cost.op_dtypes import moe_dtype
from kvroof.specs.model import ModelSpec, MoEFFN

__all__ = ["ffn_ops", "ffn_signatures"]


def ffn_signatures(model: ModelSpec) -> Counter[tuple[str, float]]:
    """How many layers have each FFN: ``("dense", width)`` or ``("moe", 0)``."""
    ffn = model.ffn
    found: Counter[tuple[str, float]] = Counter()
    for layer, (_, kind) in enumerate(model.layer_kinds):
        if not isinstance(ffn, MoEFFN):
            found[("dense", float(kind.ffn_intermediate_size or ffn.intermediate_size))] += 1
        elif ffn.is_moe_layer(layer):
            found[("moe", 0.0)] += 1
        else:
            found[("dense", float(ffn.dense_intermediate_size or 0))] += 1
    return found


def ffn_ops(dep: DeploymentSettings, gemm: str | None, weight: float,
            expert_weight: float) -> list[Op]:
    """The FFN ops of every layer on one rank (module docstring); ``gemm``, ``weight`` and
    ``expert_weight``: the GEMMs' table data type and bytes per dense and per expert weight."""
    model = dep.model
    tp = dep.tp
    d = float(model.hidden_size)
    ffn = model.ffn
    ops: list[Op] = []
    for (kind, width), n in ffn_signatures(model).items():
        if kind == "dense":
            if not width:
                continue
            group = "dense" if width == getattr(ffn, "intermediate_size", width) else \
                f"dense {width:g}"
            ops += [gemm_op("gate_up", group, n, 2 * width / tp, d, gemm, weight),
                    elementwise_op("activation", group, n, 6 * width / tp),
                    gemm_op("down", group, n, d, width / tp, gemm, weight)]
            continue
        assert isinstance(ffn, MoEFFN)
        experts = moe_dtype(dep)
        ops.append(gemm_op("router", "moe", n, ffn.num_experts + (1 if ffn.shared_expert_gate
                                                                  else 0), d, "bf16", 2.0,
                           replicated=True))
        ops.append(Op(
            name="moe", kind="moe", group="moe", layers=n, scale="tokens", dtype=experts,
            weight_bytes=expert_weight, hidden=d, inter_per_rank=ffn.expert_intermediate_size / tp,
            experts=ffn.num_experts, top_k=ffn.experts_per_token,
            why="" if experts is not None else "experts in a data type without MoE tables"))
        if ffn.num_shared_experts:
            width = float(ffn.shared_expert_intermediate_size * ffn.num_shared_experts)
            ops += [gemm_op("shared_gate_up", "moe", n, 2 * width / tp, d, gemm, expert_weight),
                    elementwise_op("shared_activation", "moe", n, 6 * width / tp),
                    gemm_op("shared_down", "moe", n, d, width / tp, gemm, expert_weight)]
    return ops
