"""The cost model: pure, vectorized functions over specs (SI units)."""

from kvroof.cost.deployment import Deployment, Granularity, deployment
from kvroof.cost.flops import PrefillFlops, attention_pairs, decode_flops, prefill_flops
from kvroof.cost.kappa import (
    KappaResult,
    PaperKappa,
    SolveResult,
    kappa_crit,
    kappa_paper,
    kappa_paper_for,
    max_new_tokens_for_crossover,
    required_bandwidth,
    transfer_bound_compute,
)
from kvroof.cost.kv import kv_bytes, kv_bytes_per_token, kv_bytes_per_token_per_layer
from kvroof.cost.params import ParamCounts, param_counts
from kvroof.cost.timing import TTFTResult, allreduce_time, compute_time, ttft, ttft_batch
from kvroof.cost.transfer import kv_bytes_per_rank, transfer_breakdown, transfer_time

__all__ = [
    "Deployment",
    "Granularity",
    "KappaResult",
    "PaperKappa",
    "ParamCounts",
    "PrefillFlops",
    "SolveResult",
    "TTFTResult",
    "allreduce_time",
    "attention_pairs",
    "compute_time",
    "decode_flops",
    "deployment",
    "kappa_crit",
    "kappa_paper",
    "kappa_paper_for",
    "kv_bytes",
    "kv_bytes_per_rank",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "max_new_tokens_for_crossover",
    "param_counts",
    "prefill_flops",
    "required_bandwidth",
    "transfer_bound_compute",
    "transfer_breakdown",
    "transfer_time",
    "ttft",
    "ttft_batch",
]
