"""Kernel mode's step times for the simulator: one engine iteration timed op by op from the
kernel tables, the same sum as :func:`kvroof.cost.kernel_iteration.kernel_iteration` (which
:func:`kvroof.cost.iteration.iteration_cost` calls in kernel mode), made cheap enough for the
simulator's inner loop and vectorized over the steps of a decode run.

An iteration of ``N`` tokens (prefill chunk tokens plus one a decode) with ``R`` logits rows (one
per chunk that ends its prompt and one per decode) takes

- every per-token op (GEMMs, MoE, element-wise kernels, all-reduces) at ``m = N``: a function of
  ``N`` alone, kept per ``N`` (the all-reduces apart: they are the iteration's communication, not
  busy time, for :mod:`kvroof.simulate.power`);
- the LM head at ``R`` rows, kept per ``R``;
- each chunk's attention from the tables and its MLA up-projection
  (:meth:`kvroof.cost.kernel_model.KernelModel.sequence_time`; its per-call floor only when the
  chunk is alone in the iteration);
- each decode's attention at its roofline at the achievable figures (the tables hold context
  attention only): ``max(FLOPs / compute, bytes / HBM)`` per decode, per attention op. Where an
  op's FLOPs per key are below its bytes per key times the ridge (``fpp x HBM <= bpp x
  compute``: every decode is HBM-bound) and it scores every key (rule ``full``), the sum over
  the decodes is ``(bytes per token x D + bytes per position x (sum of contexts + D)) / HBM``,
  from the contexts' sum alone; otherwise (a window, a chunk, or a compute-bound decode such as
  absorbed MLA) decode by decode from the contexts.

:meth:`KernelSteps.run` times ``steps`` decode-only iterations of the same ``D`` decodes, every
context one token longer each step, as arrays over the steps (the per-token ops and the LM head
are the same every step): the closed form of fast-forwarding in kernel mode, where step times are
not affine (:mod:`kvroof.simulate.fast_forward`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.cost.deployment import Deployment
from kvroof.cost.kernel_model import kernel_model
from kvroof.cost.kernel_op_time import Rates
from kvroof.cost.kernel_resolution import TimedOp

__all__ = ["KernelSteps"]

FloatArray = NDArray[np.float64]

_BLOCK: Final = 1 << 20
"""Most (step, decode) pairs :meth:`KernelSteps.run` holds in one array."""


class KernelSteps:
    """``dep``'s iteration times in kernel mode, per iteration (:meth:`iteration`) and per
    decode run (:meth:`run`); seconds per GPU, as (busy, all-reduce) pairs."""

    __slots__ = ("_decode_ops", "_logits", "_model", "_per_tokens", "_rates", "_tokens")

    def __init__(self, dep: Deployment) -> None:
        model = kernel_model(dep)
        self._model = model
        calibrated = dep.compute_efficiency is None and dep.calibration is not None
        self._rates: Rates | None = None if calibrated else model.rates(1.0)
        # decodes' attention: each attention op at its roofline (no decode table)
        self._decode_ops = tuple(TimedOp(top.op, "roofline", top.source, top.notes)
                                 for top in model.sequence_ops)
        self._tokens: dict[int, tuple[float, float]] = {}
        self._logits: dict[tuple[int, int], float] = {}
        self._per_tokens = calibrated

    def rates(self, tokens: int) -> Rates:
        """The fallback figures of an iteration of ``tokens`` tokens."""
        return self._rates if self._rates is not None else self._model.rates(float(tokens))

    def shared(self, tokens: int, rows: int) -> tuple[float, float]:
        """(busy, all-reduce) seconds of the per-token ops at ``tokens`` and the LM head at
        ``rows`` logits rows."""
        found = self._tokens.get(tokens)
        model = self._model
        if found is None:
            rates = self.rates(tokens)
            busy = comm = 0.0
            m = float(tokens)
            for top in model.token_ops:
                seconds = top.op.layers * float(model.op_time(top, m, rates))
                if top.op.kind == "allreduce":
                    comm += seconds
                else:
                    busy += seconds
            found = (busy, comm)
            self._tokens[tokens] = found
        key = (tokens if self._per_tokens else 0, rows)
        logits = self._logits.get(key)
        if logits is None:
            rates = self.rates(tokens)
            logits = sum(top.op.layers * float(model.op_time(top, float(rows), rates))
                         for top in model.logit_ops)
            self._logits[key] = logits
        return found[0] + logits, found[1]

    @staticmethod
    def _linear(top: TimedOp, rates: Rates) -> bool:
        """Whether ``top``'s decodes are all HBM-bound and score every key (their sum depends on
        the contexts' sum alone)."""
        op = top.op
        return op.rule == "full" and \
            op.flops_per_pair * float(rates.hbm) <= op.bytes_per_position * float(rates.compute)

    def decodes(self, count: int, context_sum: float, contexts: Callable[[], ArrayLike],
                rates: Rates) -> float:
        """Seconds of the attention of ``count`` decodes whose contexts sum to ``context_sum``
        (``contexts`` lists them, called only when an op needs them one by one)."""
        total = 0.0
        found: FloatArray | None = None
        hbm = float(rates.hbm)
        for top in self._decode_ops:
            op = top.op
            if self._linear(top, rates):
                total += op.layers * (op.bytes_per_token * count + op.bytes_per_position
                                      * (context_sum + count)) / hbm
                continue
            if found is None:
                found = np.asarray(contexts(), dtype=np.float64)
            flops, size = op.work(0.0, np.ones_like(found), found)
            total += op.layers * float(np.sum(np.maximum(flops / rates.compute, size / hbm)))
        return total

    def iteration(self, count: int, context_sum: float, contexts: Callable[[], ArrayLike],
                  chunks: Sequence[tuple[int, int, bool]]) -> tuple[float, float]:
        """(busy, all-reduce) seconds of an iteration of ``count`` decodes (contexts summing to
        ``context_sum``, listed by ``contexts``) and prefill ``chunks`` (new tokens, cached
        tokens, whether it ends its prompt)."""
        tokens = count + sum(chunk[0] for chunk in chunks)
        rows = count + sum(1 for chunk in chunks if chunk[2])
        rates = self.rates(tokens)
        busy, comm = self.shared(tokens, rows)
        if count:
            busy += self.decodes(count, context_sum, contexts, rates)
        if chunks:
            alone = len(chunks) + count == 1
            model = self._model
            if len(chunks) == 1:
                n, context, _ = chunks[0]
                busy += float(model.sequence_time(float(n), float(context), rates, alone))
            else:
                t = np.array([chunk[0] for chunk in chunks], dtype=np.float64)
                k = np.array([chunk[1] for chunk in chunks], dtype=np.float64)
                busy += float(np.sum(model.sequence_time(t, k, rates, alone)))
        return busy, comm

    def run(self, count: int, context_sum: float, contexts: Callable[[], ArrayLike],
            steps: int) -> tuple[FloatArray, float]:
        """(busy seconds of each step, all-reduce seconds of every step) of ``steps``
        decode-only iterations of ``count`` decodes, whose contexts sum to ``context_sum`` at
        the first (listed by ``contexts``) and grow by one token a step."""
        rates = self.rates(count)
        busy0, comm = self.shared(count, count)
        s = np.arange(steps, dtype=np.float64)
        busy = np.full(steps, busy0)
        hbm = float(rates.hbm)
        found: FloatArray | None = None
        for top in self._decode_ops:
            op = top.op
            if self._linear(top, rates):
                busy += op.layers * (op.bytes_per_token * count + op.bytes_per_position
                                     * (context_sum + count * s + count)) / hbm
                continue
            if found is None:
                found = np.asarray(contexts(), dtype=np.float64)
            block = max(1, _BLOCK // max(1, found.size))
            for first in range(0, steps, block):
                k = found[None, :] + s[first:first + block, None]
                flops, size = op.work(0.0, np.ones_like(k), k)
                busy[first:first + block] += op.layers * np.maximum(
                    flops / rates.compute, size / hbm).sum(axis=1)
        return busy, comm
