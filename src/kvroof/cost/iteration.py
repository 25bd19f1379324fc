"""One serving iteration: a batch of prefill chunks and decode tokens run in one forward pass.

The iteration's compute is the GPU roofline of :func:`kvroof.cost.timing.roofline_breakdown`
over all its tokens: FLOPs add up (each prefill chunk's attention over its context, each decode
token's attention over its context, the LM head of every finished prefill and every decode), the
weights are read once for the whole iteration (the experts its ``N`` tokens touch), the KV of
every context is read once, and the all-reduces carry all ``N`` tokens. A decode is one new
token (``T = 1``) on top of its context; MLA decodes run absorbed, as vLLM and SGLang run them.

Loads and saves over the host link are not part of the iteration: a simulator times them on the
link with :func:`kvroof.cost.transfer.transfer_breakdown`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import token_count
from kvroof.cost.deployment import Deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.timing import ComputeBreakdown, roofline_breakdown
from kvroof.cost.transfer import kv_bytes_per_rank
from kvroof.errors import KvroofError

__all__ = ["IterationCost", "iteration_cost"]


@dataclass(frozen=True)
class IterationCost:
    """Compute of one iteration (seconds, per GPU) and what it held."""

    compute: ComputeBreakdown
    prefill_tokens: float
    decode_tokens: int

    @property
    def tokens(self) -> float:
        """Tokens scheduled: prefill chunk tokens plus one per decode."""
        return self.prefill_tokens + self.decode_tokens

    @property
    def time(self) -> float:
        """``max(FLOP time, HBM time) + all-reduce time``."""
        return float(self.compute.total)


def iteration_cost(
    dep: Deployment,
    prefill_tokens: ArrayLike = (),
    prefill_context: ArrayLike = (),
    decode_context: ArrayLike = (),
    prefill_final: ArrayLike | None = None,
) -> IterationCost:
    """Compute of one iteration of prefill chunks (``prefill_tokens`` new tokens each, attending
    to ``prefill_context`` tokens already in their sequence's KV) and decodes (one token each on
    top of ``decode_context`` tokens). ``prefill_final`` marks the chunks that end their prompt
    (only those compute logits; default: all)."""
    t = np.atleast_1d(token_count("prefill_tokens", prefill_tokens))
    k = np.atleast_1d(token_count("prefill_context", prefill_context))
    d = np.atleast_1d(token_count("decode_context", decode_context))
    if t.ndim != 1 or k.ndim != 1 or d.ndim != 1 or t.shape != k.shape:
        raise KvroofError("prefill_tokens and prefill_context: expected two 1-D sequences of the "
                          f"same length, got shapes {t.shape} and {k.shape}")
    flops = 0.0
    kv = 0.0
    if t.size:
        parts = prefill_flops(dep.model, t, k, dep.mla_mode)
        per_chunk = np.asarray(parts.total, dtype=np.float64)
        if prefill_final is not None:
            final = np.atleast_1d(np.asarray(prefill_final, dtype=bool))
            if final.shape != t.shape:
                raise KvroofError(f"prefill_final: expected {t.size} flags, got {final.size}")
            per_chunk = per_chunk - np.where(final, 0.0, np.asarray(parts.lm_head))
        flops += float(per_chunk.sum())
        kv += float(np.asarray(kv_bytes_per_rank(dep, k + t)).sum())
    if d.size:
        flops += float(np.asarray(prefill_flops(dep.model, 1.0, d, "absorbed").total).sum())
        kv += float(np.asarray(kv_bytes_per_rank(dep, d + 1.0)).sum())
    total = float(t.sum()) + d.size
    if total == 0:
        raise KvroofError("iteration_cost: an iteration needs at least one token")
    compute = roofline_breakdown(dep, flops, total, kv)
    return IterationCost(compute=compute, prefill_tokens=float(t.sum()), decode_tokens=d.size)
