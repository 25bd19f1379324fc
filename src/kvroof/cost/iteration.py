"""One serving iteration: a batch of prefill chunks and decode tokens run in one forward pass.

The iteration's compute is the GPU roofline of :func:`kvroof.cost.timing.roofline_breakdown`
over all its tokens: FLOPs add up (each prefill chunk's attention over its context, each decode
token's attention over its context, the LM head of every finished prefill and every decode), the
weights are read once for the whole iteration (the experts its ``N`` tokens touch), the KV of
every context is read once, and the all-reduces carry all ``N`` tokens. A decode is one new
token (``T = 1``) on top of its context; MLA decodes run absorbed, as vLLM and SGLang run them.

Loads and saves over the host link are not part of the iteration: a simulator times them on the
link with :func:`kvroof.cost.transfer.transfer_breakdown`.

In kernel mode (``compute_model: kernels``) :func:`iteration_cost` times the iteration op by op
instead (:func:`kvroof.cost.kernel_time.kernel_iteration`: per-token ops on all its tokens, each
chunk's attention from the tables, decodes' attention at its roofline). :class:`IterationModel`
(the simulator's fast path) holds the roofline and the FLOP and KV counts; the simulator times
kernel-mode iterations with :class:`kvroof.simulate.kernel_steps.KernelSteps`, the same sum.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from kvroof.cost.checks import token_count
from kvroof.cost.compute import ComputeBreakdown, roofline_breakdown
from kvroof.cost.deployment import Deployment
from kvroof.cost.flop_terms import decode_flops_sum, flop_terms, prefill_flops_total
from kvroof.cost.flops import decode_flops, prefill_flops
from kvroof.cost.pairs import capped_positions
from kvroof.cost.terms import kv_read, roofline, transfer_parts
from kvroof.errors import KvroofError

if TYPE_CHECKING:
    from kvroof.cost.deployment_terms import CostTerms

__all__ = ["IterationCost", "IterationModel", "iteration_cost"]


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
        kv += float(np.asarray(kv_read(dep.terms, k, t)).sum())
    if d.size:
        flops += float(np.asarray(decode_flops(dep.model, d)).sum())
        kv += float(np.asarray(kv_read(dep.terms, d, 1.0)).sum())
    total = float(t.sum()) + d.size
    if total == 0:
        raise KvroofError("iteration_cost: an iteration needs at least one token")
    compute = roofline_breakdown(dep, flops, total, kv)
    if dep.uses_kernels:  # compute_model kernels: op by op (kvroof.cost.kernel_time)
        from kvroof.cost.kernel_time import kernel_iteration

        flags = None if prefill_final is None else np.atleast_1d(
            np.asarray(prefill_final, dtype=bool))
        compute = dataclasses.replace(
            kernel_iteration(dep, t, k, d, flags), flops=compute.flops,
            hbm_bytes=compute.hbm_bytes, weight_bytes=compute.weight_bytes)
    return IterationCost(compute=compute, prefill_tokens=float(t.sum()), decode_tokens=d.size)


class IterationModel:
    """:func:`iteration_cost` for a simulator's inner loop: Python floats in and out, the same
    cost-model evaluation (:mod:`kvroof.cost.terms`), microseconds a call.

    Accumulate an iteration's FLOPs and KV reads with :meth:`prefill_chunk` and
    :meth:`decode_batch`, then :meth:`time` it; :meth:`load_time` and :meth:`save_time` give one
    request's host-link seconds (host-to-device load of its cached tokens, device-to-host save
    of its new tokens' KV). Inputs are token counts the caller keeps valid (non-negative).

    A decode in a window or chunk layer (or a sparse layer's top-k) scores a number of keys
    that is not linear in its context; :attr:`caps` lists those rules, and
    :meth:`decode_batch` takes one sum per rule (:meth:`capped_sums` computes them from the
    contexts). :attr:`window` is the window when there is exactly one window rule and nothing
    else is capped."""

    __slots__ = ("_decode", "_lm_head", "_read", "_terms", "caps", "window")

    def __init__(self, dep: Deployment) -> None:
        self._terms = dep.terms
        # decodes run absorbed (vLLM, SGLang) and linear layers take their recurrent step
        self._decode = flop_terms(dep.model, "absorbed", decode=True, replicated=float(dep.tp))
        self._lm_head = self._terms.flops.lm_head
        self._read = self._decode_reads(self._terms)
        self.caps: tuple[tuple[str, float], ...] = tuple(
            (rule, span) for rule, span, _ in self._decode.caps)
        self.window: float | None = self.caps[0][1] if (
            len(self.caps) == 1 and self.caps[0][0] == "window") else None

    def _decode_reads(self, terms: CostTerms) -> tuple[float, tuple[float, ...], float]:
        """(bytes per context position, bytes per capped key for each rule of ``caps``, fixed
        bytes per decode) one rank reads for a decode."""
        read = terms.read
        per_rule = {("window", span): b for span, b in read.windows}
        per_rule.update({("window", span): per_rule.get(("window", span), 0.0) + b
                         for span, b in read.caps})
        per_rule.update({("chunk", span): b for span, b in read.chunks})
        return read.per_token, tuple(per_rule.get((rule, span), 0.0)
                                     for rule, span, _ in self._decode.caps), read.fixed

    def capped_sums(self, contexts: Any) -> tuple[float, ...]:
        """For decodes on ``contexts`` cached tokens each: the sum of the keys each scores in
        every rule of :attr:`caps` (``min(K + 1, W)`` or ``(K mod C) + 1``)."""
        k = np.asarray(contexts, dtype=np.float64)
        return tuple(float(np.sum(capped_positions(rule, span, k))) for rule, span in self.caps)

    def prefill_chunk(self, new_tokens: float, context: float,
                      final: bool = True) -> tuple[float, float]:
        """(FLOPs, KV bytes read per rank) of one prefill chunk of ``new_tokens`` tokens on
        ``context`` tokens already in its sequence's KV (logits only when ``final``)."""
        flops = float(prefill_flops_total(self._terms.flops, float(new_tokens), float(context)))
        if not final and new_tokens > 0:
            flops -= self._lm_head
        kv = float(kv_read(self._terms, float(context), float(new_tokens)))
        return flops, kv

    def decode_batch(self, count: int, context_sum: float,
                     windowed_context_sum: Any = 0.0) -> tuple[float, float]:
        """(FLOPs, KV bytes read per rank) of ``count`` decodes whose contexts sum to
        ``context_sum``; ``windowed_context_sum`` is, for each rule of :attr:`caps`, the sum of
        the keys each decode scores (:meth:`capped_sums`; a number when there is one rule)."""
        if count == 0:
            return 0.0, 0.0
        flops = float(decode_flops_sum(self._decode, float(count), float(context_sum),
                                       windowed_context_sum))
        per_position, per_capped, fixed = self._read
        sums = windowed_context_sum if isinstance(windowed_context_sum, tuple | list) \
            else (windowed_context_sum,) * len(per_capped)
        kv = per_position * (context_sum + count) + fixed * count
        for coefficient, value in zip(per_capped, sums, strict=False):
            kv += coefficient * float(value)
        return flops, float(kv)

    def decode_flops(self, count: int, contexts: Any, steps: int) -> Any:
        """FLOPs of ``count`` decodes on ``contexts`` cached tokens each (a sequence) at each of
        ``steps`` steps, every context one token longer a step: :meth:`decode_batch`'s FLOPs
        as an array over the steps."""
        k = np.asarray(contexts, dtype=np.float64)
        s = np.arange(steps, dtype=np.float64)
        sums: list[Any] = []
        block = max(1, (1 << 20) // max(1, k.size))
        for rule, span in self.caps:
            value = np.empty(steps)
            for first in range(0, steps, block):
                grid = k[None, :] + s[first:first + block, None]
                value[first:first + block] = capped_positions(rule, span, grid).sum(axis=1)
            sums.append(value)
        return np.asarray(decode_flops_sum(self._decode, float(count), float(k.sum()) + count * s,
                                           tuple(sums) if sums else 0.0), dtype=np.float64)

    def breakdown(self, tokens: float, flops: float, kv_bytes: float) -> tuple[float, float, float]:
        """(FLOP seconds, HBM seconds, all-reduce seconds) of an iteration of ``tokens`` tokens."""
        parts = roofline(self._terms, float(flops), float(tokens), float(kv_bytes), None)
        return float(parts.flop_time), float(parts.hbm_time), float(parts.comm_time)

    def time(self, tokens: float, flops: float, kv_bytes: float) -> float:
        """Seconds of an iteration: ``max(FLOP time, HBM time) + all-reduce time``."""
        return float(roofline(self._terms, float(flops), float(tokens), float(kv_bytes),
                              None).total)

    def load_time(self, cached_tokens: float) -> float:
        """Host-link seconds to load one request's ``cached_tokens`` tokens (no save)."""
        if cached_tokens <= 0:
            return 0.0
        return float(transfer_parts(self._terms, float(cached_tokens), 0.0).total)

    def save_time(self, new_tokens: float) -> float:
        """Host-link seconds to save ``new_tokens`` tokens' KV to host memory."""
        if new_tokens <= 0:
            return 0.0
        return float(transfer_parts(self._terms, 0.0, float(new_tokens)).total)

