"""Engine profiles: how a serving engine (or a copy microbenchmark) moves cached KV between host
memory and the GPU, as settings the cost model already has.

An engine profile names what the cost model otherwise assumes: how the cache is cut into copies
(``block_tokens``, ``copy_layout``), how each copy is made (``copy_method``: the GPU's DMA copy
engines or a copy kernel on the SMs) with its fixed cost per copy (``copy_overhead``) and the
share of the link's peak its large copies reach (``link_share``, capped at ``copy_rate_cap``
where the method's own throughput is the limit), whether the layers load while the previous ones
compute (``loading``), how MLA is prefilled and loaded under TP, whether the new tokens' KV is
saved in the same step (``write_back``), the granularity of prefix reuse (``reuse_block_tokens``:
the tokens after the last whole block of a cached prefix are recomputed) and any fixed time per
request (``request_overhead``).

What the engine adds to a TTFT measured by its client (HTTP, tokenization, prefix lookup,
scheduling; added by ``kvroof ttft`` only when a deployment asks for a client-side TTFT,
``ttft_clock: client``, and by ``kvroof simulate`` unless ``--no-engine-overhead``):
``serving_overhead`` per request, ``serving_overhead_per_token`` per prompt token and
``iteration_overhead`` per engine iteration (CPU time not hidden behind the GPU; the simulator
adds it to every iteration). ``None`` means no published figure (0 is used).
``allreduce_backend`` names the measured all-reduce of the kernel tables (:mod:`kvroof.kernels`)
that the engine's tensor-parallel all-reduce is priced with in kernel mode;
``allreduce_nccl_above`` a message size above which the engine calls NCCL instead (``None``:
the backend's table already holds the engine's own choice by size).

A copy of ``S`` bytes then takes ``copy_overhead + S / (share x link bandwidth)``: its delivered
bandwidth is ``S / (overhead + S / (share x BW))`` (:mod:`kvroof.cost.copy_size`). Fields listed
in ``fitted`` come from kvroof's fit to published copy measurements (``kvroof validate``), not
from the engine's own documentation; their sources say so.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from kvroof.specs.base import Bandwidth, Capacity, PositiveInt, SourcedSpec, Time

__all__ = ["ALLREDUCE_BACKENDS", "COPY_METHODS", "FITTABLE", "LOADINGS", "OFFLOAD_STORES",
           "AllreduceBackend", "CopyMethod", "Engine", "Loading", "OffloadStore"]

CopyMethod = Literal["copy-engine", "copy-kernel"]
COPY_METHODS: tuple[CopyMethod, ...] = ("copy-engine", "copy-kernel")
Loading = Literal["layerwise", "whole-prefix"]
LOADINGS: tuple[Loading, ...] = ("layerwise", "whole-prefix")
OffloadStore = Literal["as-computed", "none"]
OFFLOAD_STORES: tuple[OffloadStore, ...] = ("as-computed", "none")
"""What an engine stores in host DRAM (:attr:`Engine.offload_store`)."""
AllreduceBackend = Literal["vllm_graph", "vllm_eager", "sglang_graph", "sglang_eager", "trtllm",
                           "nccl"]
ALLREDUCE_BACKENDS: tuple[AllreduceBackend, ...] = ("vllm_graph", "vllm_eager", "sglang_graph",
                                                    "sglang_eager", "trtllm", "nccl")
"""All-reduce backends of the kernel tables (:func:`kvroof.kernels.allreduce_time`)."""
FITTABLE: tuple[str, ...] = ("copy_overhead", "link_share")
"""Engine fields kvroof's copy-size fit may provide."""


class Engine(SourcedSpec):
    """A serving engine's KV loading path (see the module docstring).

    ``block_tokens`` ``None`` moves a request's cache as one block (one copy per layer with
    ``copy_layout`` per-layer: a kernel launch per layer). ``mla_mode`` and ``mla_tp_load``
    ``None`` mean the source does not say (kvroof's defaults apply). ``loading`` sets the
    default overlap of TTFT: ``layerwise`` (layer ``i+1`` loads while layer ``i`` computes) or
    ``whole-prefix`` (the request waits for its whole prefix: serial).

    ``offload_store`` is what the engine puts in host DRAM when it has a host tier:
    ``as-computed`` (every new full block, copied device-to-host once computed, without blocking
    the step: vLLM's OffloadingConnector, SGLang HiCache's ``write_through``, LMCache) or
    ``none`` (nothing is stored; only what something else put there is found). The simulator
    stores on the link's device-to-host direction; ``write_back`` says only whether the save
    also delays the step that produced the KV (the cost model's save term), so ``write_back``
    needs a store.
    """

    kind_name: ClassVar[str] = "engine"

    version: str = ""
    block_tokens: PositiveInt | None
    copy_layout: Literal["per-layer", "per-layer-kv", "per-block"]
    copy_method: CopyMethod
    copy_overhead: Time
    link_share: Annotated[float, Field(gt=0, le=1)]
    copy_rate_cap: Bandwidth | None = None
    loading: Loading
    reuse_block_tokens: PositiveInt | None = None
    mla_mode: Literal["expanded", "absorbed"] | None = None
    mla_tp_load: Literal["every-rank", "rank0-broadcast", "shard-allgather"] | None = None
    write_back: bool
    offload_store: OffloadStore = "as-computed"
    request_overhead: Time = 0.0
    serving_overhead: Time | None = None
    serving_overhead_per_token: Time | None = None
    iteration_overhead: Time | None = None
    allreduce_backend: AllreduceBackend | None = None
    allreduce_nccl_above: Capacity | None = None
    fitted: tuple[Literal["copy_overhead", "link_share"], ...] = ()

    @model_validator(mode="after")
    def _check(self) -> Engine:
        if len(set(self.fitted)) != len(self.fitted):
            raise ValueError("fitted: a field is listed twice")
        if self.write_back and self.offload_store == "none":
            raise ValueError("offload_store: 'none' contradicts write_back: true (a save "
                             "that delays the step is a store)")
        return self
