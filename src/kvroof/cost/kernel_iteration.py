"""Kernel mode's serving iteration: one engine step of prefill chunks and decodes timed op by op
(:func:`kernel_iteration`, which :func:`kvroof.cost.iteration.iteration_cost` calls in kernel
mode): per-token ops on all its tokens, the LM head on one row per finishing chunk and per
decode, each chunk's attention from the table and each decode's at its roofline (the tables hold
context attention only).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from kvroof.cost.deployment import Deployment
from kvroof.cost.kernel_model import kernel_model
from kvroof.cost.kernel_op_time import attention_seconds, gemm_seconds
from kvroof.cost.kernel_resolution import TimedOp
from kvroof.cost.kernel_result import KernelBreakdown, OpTime, breakdown_from_ops
from kvroof.errors import KvroofError

__all__ = ["kernel_iteration"]

FloatArray = NDArray[np.float64]


def kernel_iteration(dep: Deployment, prefill_tokens: FloatArray, prefill_context: FloatArray,
                     decode_context: FloatArray, final: FloatArray | None = None
                     ) -> KernelBreakdown:
    """One serving iteration in kernel mode: per-token ops on all its tokens (prefill chunks
    and one token a decode), the LM head on one row per finishing chunk and per decode, each
    chunk's attention its own (table), each decode's attention at its roofline (the tables hold
    context attention only)."""
    model = kernel_model(dep)
    t, k, d = prefill_tokens, prefill_context, decode_context
    tokens = float(t.sum()) + float(d.size)
    if tokens == 0:
        raise KvroofError("iteration_cost: an iteration needs at least one token")
    logits = float(np.count_nonzero(final if final is not None else t > 0)) + float(d.size)
    rates = model.rates(tokens)
    alone = t.size + d.size == 1
    rows: list[OpTime] = []
    for top in model.ops:
        op = top.op
        if op.scale == "sequence":
            seconds = float(np.sum(attention_seconds(top, t, k, rates, alone))) if t.size else 0.0
            flops, size = (np.sum(v) for v in top.op.work(0.0, t, k)) if t.size else (0.0, 0.0)
            if d.size:
                fallback = TimedOp(op, "roofline", top.source, top.notes)
                seconds += float(np.sum(attention_seconds(fallback, np.ones_like(d), d, rates)))
                f2, b2 = top.op.work(0.0, np.ones_like(d), d)
                flops, size = flops + np.sum(f2), size + np.sum(b2)
        elif op.scale == "positions":
            seconds = float(np.sum(gemm_seconds(top, k + t, rates))) if t.size else 0.0
            flops, size = (np.sum(v) for v in top.op.work(k + t, t, k)) if t.size else (0.0, 0.0)
        else:
            m = logits if op.scale == "logits" else tokens
            seconds = float(model.op_time(top, m, rates))
            flops, size = top.op.work(m, 0.0, 0.0)
        notes = top.notes + (("decodes' attention at its roofline (no decode table)",)
                             if op.scale == "sequence" and d.size else ())
        rows.append(OpTime(top, op.layers * seconds, op.layers * float(flops),
                           op.layers * float(size), notes))
    return breakdown_from_ops(dep, rows, sum(float(row.seconds) for row in rows))
