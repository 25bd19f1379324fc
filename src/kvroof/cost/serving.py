"""What a client measures beyond the GPU: the serving engine's overheads on a TTFT.

A TTFT is either **kernel time** (``ttft_clock: kernel``, the default: the transfer and the
compute of the prefill, plus any ``request_overhead`` set) or **client-side** (``ttft_clock:
client``): the engine profile's serving overheads are added as well,

    ``serving_overhead + serving_overhead_per_token x (T + K) + iteration_overhead x 1``

(HTTP, tokenizing and hashing the ``T + K`` prompt tokens, prefix lookup, scheduling; a lone
prefill is one engine iteration in kvroof). An engine without published figures adds nothing,
and the result says which clock applied (:class:`kvroof.cost.ttft_result.TTFTResult`).
"""

from __future__ import annotations

from typing import Any

from kvroof.cost.deployment_settings import DeploymentSettings

__all__ = ["serving_overhead", "serving_terms"]


def serving_terms(dep: DeploymentSettings) -> tuple[float, float, float]:
    """(per request, per prompt token, per iteration) seconds the client-side clock adds: the
    engine profile's figures under ``ttft_clock: client`` (0 where it publishes none), else
    zeros."""
    engine = dep.engine
    if dep.ttft_clock != "client" or engine is None:
        return 0.0, 0.0, 0.0
    return (float(engine.serving_overhead or 0.0), float(engine.serving_overhead_per_token or 0.0),
            float(engine.iteration_overhead or 0.0))


def serving_overhead(dep: DeploymentSettings, prompt_tokens: Any, iterations: Any = 1.0) -> Any:
    """Seconds the client-side clock adds to a request of ``prompt_tokens`` (``T + K``) run in
    ``iterations`` engine iterations (0 under the kernel clock)."""
    fixed, per_token, per_iteration = serving_terms(dep)
    if not (fixed or per_token or per_iteration):
        return 0.0
    return fixed + per_token * prompt_tokens + per_iteration * iterations
