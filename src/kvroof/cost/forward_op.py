"""The op value type of kernel mode: one kernel of a forward pass on one tensor-parallel rank
(:class:`Op`: a GEMM, attention, fused MoE, all-reduce, element-wise or roofline-only kernel),
its per-rank shape and the FLOPs and bytes one call moves (:meth:`Op.work`), the (query, key)
pairs and positions an attention call covers, and the two constructors the op lists of
:mod:`kvroof.cost.attention_ops`, :mod:`kvroof.cost.ffn_ops` and :mod:`kvroof.cost.ops` build
their GEMMs and element-wise kernels with. Nothing here knows a model or a deployment.

A GEMM's and a fused MoE's counts are :mod:`kvroof.kernels.work`'s (the counts that define the
kernel tables' efficiencies), in the op's table data type whether or not the accelerator has
that table (an op in a type without tables, ``dtype`` None, with 16-bit activations and its own
``weight_bytes``). A MoE layer reads the experts its tokens are expected to touch under random
routing, kvroof's roofline count, unless a table times it: then it reads the tables' count,
``min(E, m top_k)`` experts (:attr:`Op.experts_read`, which
:func:`kvroof.cost.kernel_resolution.resolve_op` sets). So an op's FLOPs and bytes are the ones
its time is computed from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from kvroof.cost.checks import minimum
from kvroof.cost.pairs import capped_pairs
from kvroof.cost.weight_bytes import touched_share
from kvroof.kernels.work import gemm_work, moe_work

__all__ = [
    "ExpertsRead",
    "Op",
    "OpKind",
    "Scale",
    "elementwise_op",
    "gemm_op",
    "positions_read",
    "query_key_pairs",
]

OpKind = Literal["gemm", "attention", "moe", "allreduce", "elementwise", "roofline"]
ExpertsRead = Literal["expected", "bound"]
"""How a MoE layer counts the experts it reads (:attr:`Op.experts_read`)."""
Scale = Literal["tokens", "positions", "sequence", "logits", "pass"]
"""What sets an op's size: the tokens of the forward pass (``m = T``, or ``N`` in a busy
iteration), the request's positions (``m = K + T``), the request's sequence (``T`` new tokens
attending to ``K + T`` keys), one logits row per request, or nothing (once per pass)."""


@dataclass(frozen=True)
class Op:
    """One kernel of a forward pass on one rank, run ``layers`` times (once per layer that has
    it; 1 for a per-pass op). Sizes are element counts per rank.

    ``dtype`` is the kernel tables' data type of a GEMM or MoE (``None``: one the tables do not
    have, priced by the roofline; ``why`` says so); it sets the bytes per activation and per
    weight (:data:`kvroof.kernels.work.GEMM_DTYPES`, :data:`~kvroof.kernels.work.MOE_DTYPES`),
    and ``weight_bytes`` is used only without one. ``experts_read``: a MoE layer's count of the
    experts it reads, ``expected`` (the distinct experts ``m`` tokens touch under random
    routing, ``E (1 - (1 - top_k/E)^m)``) or ``bound`` (``min(E, m top_k)``, every pair on a
    distinct expert until all are used: the kernel tables' count, for a table-timed layer).

    An attention op has ``heads``, ``kv_heads``, ``head_dim``, its pair ``rule`` (``full``,
    ``window`` or ``chunk`` with ``span``) and, for its roofline, ``flops_per_pair`` and the
    bytes it reads per position and per new token (without a prefix, those of
    :func:`kvroof.kernels.work.attention_work`); ``table`` is False for attention the tables do
    not cover (MLA, sparse, other KV types)."""

    name: str
    kind: OpKind
    group: str
    layers: int
    scale: Scale
    n: float = 0.0
    k: float = 0.0
    dtype: str | None = "bf16"
    weight_bytes: float = 2.0
    replicated: bool = False
    heads: float = 0.0
    kv_heads: float = 0.0
    head_dim: int = 0
    rule: str = "full"
    span: float = 0.0
    kv_dtype: str | None = "bf16"
    table: bool = True
    flops_per_pair: float = 0.0
    bytes_per_position: float = 0.0
    flops_per_token: float = 0.0
    bytes_per_token: float = 0.0
    fixed_bytes: float = 0.0
    hidden: float = 0.0
    inter_per_rank: float = 0.0
    experts: int = 0
    top_k: int = 0
    experts_read: ExpertsRead = "expected"
    why: str = ""

    @property
    def label(self) -> str:
        """``group: name`` (``full: qkv``, ``moe: moe``, ``model: lm_head``)."""
        return f"{self.group}: {self.name}"

    def size(self, t: Any, k: Any) -> Any:
        """The op's size for a request of ``t`` new tokens on ``k`` cached ones: ``m`` tokens of
        a per-token op (``t``), the positions of a per-position one (``k + t``), 1 logits row."""
        if self.scale == "positions":
            return k + t
        return 1.0 if self.scale == "logits" else t

    def work(self, m: Any, t: Any = 0.0, k: Any = 0.0) -> tuple[Any, Any]:
        """(FLOPs, bytes) of one call on one rank: a per-token op at ``m`` tokens, an attention
        op for ``t`` new tokens on ``k`` cached ones (:mod:`kvroof.cost.ops`). A GEMM or a MoE
        layer is counted by :func:`kvroof.kernels.work.gemm_work` or
        :func:`~kvroof.kernels.work.moe_work` in its data type (module docstring; without
        one, 16-bit activations and ``weight_bytes``), a MoE layer reading the experts
        ``experts_read`` counts."""
        if self.kind == "gemm":
            return gemm_work(m, self.n, self.k, self.dtype,
                             weight_bytes=None if self.dtype else self.weight_bytes)
        if self.kind == "moe":
            experts = float(self.experts)
            touched = None if self.experts_read == "bound" else \
                experts * touched_share(1.0 - self.top_k / experts, m)
            return moe_work(m, self.hidden, self.inter_per_rank, experts, self.top_k,
                            self.dtype, weight_bytes=None if self.dtype else self.weight_bytes,
                            touched=touched)
        if self.kind == "attention":
            return (self.flops_per_pair * query_key_pairs(self.rule, self.span, t, k),
                    self.bytes_per_token * t
                    + self.bytes_per_position * positions_read(self.rule, self.span, t, k))
        if self.kind == "roofline":
            return self.flops_per_token * m, self.bytes_per_token * m + self.fixed_bytes
        return 0.0 * m, self.bytes_per_token * m


def query_key_pairs(rule: str, span: float, t: Any, k: Any) -> Any:
    """(query, key) pairs ``t`` new tokens after ``k`` cached ones score under ``rule``
    (``full``; ``window``, ``topk``: at most ``span`` keys a query; ``chunk``)."""
    if rule == "full":
        return t * k + t * (t + 1.0) / 2.0
    return capped_pairs("chunk" if rule == "chunk" else "window", span, t, k)


def positions_read(rule: str, span: float, t: Any, k: Any) -> Any:
    """Positions whose keys and values (or latents) one attention call reads: every one
    (``full``), the window's (``min(K, W - 1) + T``), the current chunk's (``K mod C + T``), or
    at most ``top-k`` a query (``topk``: ``min(K + T, top-k T)``)."""
    if rule == "full":
        return k + t
    if rule == "window":
        return minimum(k, span - 1.0) + t
    if rule == "topk":
        return minimum(k + t, span * t)
    floor = float(math.floor(k / span)) if type(k) is float else np.floor(k / span)
    return k - floor * span + t


def gemm_op(name: str, group: str, layers: int, n: float, k: float, dtype: str | None,
            weight_bytes: float, *, scale: Scale = "tokens", replicated: bool = False) -> Op:
    """A GEMM of ``n`` output and ``k`` input features per rank (``dtype`` None: a data type
    without GEMM tables, priced by its roofline)."""
    why = "" if dtype is not None else "weights in a data type without GEMM tables"
    return Op(name=name, kind="gemm", group=group, layers=layers, scale=scale, n=float(n),
              k=float(k), dtype=dtype, weight_bytes=weight_bytes, replicated=replicated, why=why)


def elementwise_op(name: str, group: str, layers: int, bytes_per_token: float) -> Op:
    """An element-wise kernel moving ``bytes_per_token`` a token."""
    return Op(name=name, kind="elementwise", group=group, layers=layers, scale="tokens",
              dtype=None, bytes_per_token=float(bytes_per_token))
