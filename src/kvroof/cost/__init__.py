"""The cost model: pure, vectorized functions over specs (SI units)."""

from kvroof.cost.kv import kv_bytes, kv_bytes_per_token, kv_bytes_per_token_per_layer
from kvroof.cost.params import ParamCounts, param_counts

__all__ = [
    "ParamCounts",
    "kv_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "param_counts",
]
