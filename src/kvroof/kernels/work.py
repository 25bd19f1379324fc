"""The work of one kernel call: FLOPs, bytes moved and the roofline time they bound.

These counts *define* the efficiencies in the shipped tables: a table stores
``efficiency = roofline time / measured time`` with the roofline time computed here, so a time
is recovered exactly as ``roofline time / efficiency`` with the same counts. The derivation
(``tools/kernels/derive.py``), the lookup (:mod:`kvroof.kernels.lookup`) and kernel mode's cost
model (:meth:`kvroof.cost.forward_op.Op.work`, :mod:`kvroof.cost.kernel_op_time`) all call
these functions: they are the only place the counts are written. All quantities are SI: FLOPs,
bytes, FLOP/s, bytes/s, seconds; sizes are element counts.

The functions take floats or numpy arrays (or anything ``np.asarray`` takes) and broadcast them;
a result is a Python float when every size is a number, else an array. The bytes per element
come from the data type's table (:data:`GEMM_DTYPES`, :data:`MOE_DTYPES`, :data:`KV_DTYPES`);
an op in a type the tables do not have passes ``dtype=None`` with its own ``weight_bytes``
(activations are then 16-bit), and a caller may override either count.

GEMM ``(m, n, k)``: ``y[m, n] = x[m, k] @ w[k, n]``.

- FLOPs ``2 m n k``;
- bytes ``m k a + k n w + m n 2``: activations of ``a`` bytes, weights of ``w`` bytes, a 16-bit
  output (block scales are left out: under 1% of the bytes).

Context attention, batch 1, no cached prefix: ``seq_len`` tokens attend causally to the tokens
before them (at most ``window`` of them when ``window > 0``).

- query-key pairs ``P = S (S + 1) / 2`` (full), ``w (w + 1) / 2 + (S - w) w`` (window ``w < S``);
- FLOPs ``4 heads head_dim P`` (``QK^T`` and ``PV``, two FLOPs a multiply-add);
- bytes ``S head_dim (2 heads a + 2 kv_heads c)``: Q read and O written in the compute type of
  ``a`` bytes, K and V read once in the KV cache type of ``c`` bytes.

Fused MoE layer per GPU, tensor-parallel experts (every rank holds every expert, sliced to
``inter_per_rank`` columns), routing given (no router GEMM):

- pairs ``tokens top_k``; FLOPs ``6 tokens top_k hidden inter_per_rank`` (gate, up and down);
- experts touched ``min(E, tokens top_k)`` (every pair on a distinct expert until all are
  used: exact for balanced routing, an upper bound for any other);
- bytes ``touched 3 hidden inter_per_rank w + 4 tokens hidden`` (the touched experts' weights
  of ``w`` bytes each, 16-bit activations read and written once); a caller may give its own
  count of touched experts (kvroof's roofline: the expected distinct experts of random routing).

Skewed (power-law) routing keeps these counts (its touched experts are fewer), so its
efficiency can exceed 1 at few tokens, where fewer experts are read than the bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError

__all__ = [
    "ATTENTION_DTYPES",
    "GEMM_DTYPES",
    "KV_DTYPES",
    "MOE_DTYPES",
    "DtypeInfo",
    "attention_pairs",
    "attention_work",
    "gemm_work",
    "kv_bytes",
    "moe_work",
    "roofline_time",
]

Array = NDArray[np.float64]
Number = Any
"""A float or a float64 array (what the counts take and return)."""


@dataclass(frozen=True)
class DtypeInfo:
    """How a kernel data type is priced: the dense peak it runs at (a key of an accelerator's
    ``peak_compute``), and the bytes per activation and per weight element."""

    peak: str
    activation_bytes: float
    weight_bytes: float


GEMM_DTYPES: Final[dict[str, DtypeInfo]] = {
    "bf16": DtypeInfo("bf16", 2.0, 2.0),
    "fp8": DtypeInfo("fp8", 1.0, 1.0),  # per-tensor scales
    "fp8_block": DtypeInfo("fp8", 1.0, 1.0),  # 1x128 / 128x128 block scales
    "nvfp4": DtypeInfo("fp4", 0.5625, 0.5625),  # 4 bits + an fp8 scale per 16 elements
}
"""GEMM data types of the tables (names as kvroof writes them)."""

ATTENTION_DTYPES: Final[dict[str, DtypeInfo]] = {
    "bf16": DtypeInfo("bf16", 2.0, 2.0),
    "fp8": DtypeInfo("fp8", 1.0, 1.0),
}
"""Attention compute types (Q, O and the matrix math)."""

KV_DTYPES: Final[dict[str, float]] = {"bf16": 2.0, "fp8": 1.0}
"""Bytes per element of the KV cache types of the attention tables."""

MOE_DTYPES: Final[dict[str, DtypeInfo]] = {
    "bf16": DtypeInfo("bf16", 2.0, 2.0),
    "fp8": DtypeInfo("fp8", 2.0, 1.0),
    "fp8_block": DtypeInfo("fp8", 2.0, 1.0),
    "int4_wo": DtypeInfo("bf16", 2.0, 0.5),  # int4 weights, bf16 math (Marlin)
    "w4a16_mxfp4": DtypeInfo("bf16", 2.0, 4.25 / 8),  # MXFP4 weights dequantized, bf16 math
    "w4a8_mxfp4_mxfp8": DtypeInfo("fp8", 2.0, 4.25 / 8),  # MXFP4 weights, MXFP8 math
    "nvfp4": DtypeInfo("fp4", 2.0, 4.5 / 8),  # NVFP4 weights and math
}
"""MoE weight/compute data types of the tables; activations enter and leave in 16 bits."""

_UNTYPED: Final = DtypeInfo("", 2.0, 2.0)
"""An op in no table data type: 16-bit activations (its weight bytes are the caller's)."""


def _dtype(table: dict[str, DtypeInfo], dtype: str | None, what: str,
           weight_bytes: float | None) -> DtypeInfo:
    if dtype is None:
        if weight_bytes is None:
            raise KvroofError(f"a {what} without a table data type needs its weight_bytes")
        return _UNTYPED
    info = table.get(dtype)
    if info is None:
        raise KvroofError(f"{what} dtype {dtype!r} has no roofline definition; known: "
                          f"{', '.join(sorted(table))}")
    return info


def kv_bytes(kv_dtype: str) -> float:
    """Bytes per element of the attention tables' KV cache type ``kv_dtype``."""
    found = KV_DTYPES.get(kv_dtype)
    if found is None:
        raise KvroofError(f"KV dtype {kv_dtype!r} has no roofline definition; known: "
                          f"{', '.join(sorted(KV_DTYPES))}")
    return found


def _num(x: ArrayLike) -> Number:
    """``x`` as a float (a number) or a float64 array (anything else)."""
    if type(x) is float:
        return x
    if type(x) is int or isinstance(x, (float, np.integer, np.floating)):
        return float(x)
    return np.asarray(x, dtype=np.float64)


def gemm_work(m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str | None = "bf16", *,
              activation_bytes: float | None = None, weight_bytes: float | None = None
              ) -> tuple[Number, Number]:
    """FLOPs and bytes of the GEMM ``[m, k] x [k, n]`` in ``dtype`` (arrays broadcast; bytes
    per activation and per weight from :data:`GEMM_DTYPES`, or the ones given; ``dtype``
    None: 16-bit activations and ``weight_bytes``)."""
    info = _dtype(GEMM_DTYPES, dtype, "GEMM", weight_bytes)
    a = info.activation_bytes if activation_bytes is None else activation_bytes
    w = info.weight_bytes if weight_bytes is None else weight_bytes
    # (a float is taken as it is without a call: kernel mode counts ops in its scalar loop)
    m_ = m if type(m) is float else _num(m)
    n_ = n if type(n) is float else _num(n)
    k_ = k if type(k) is float else _num(k)
    flops = 2.0 * m_ * n_ * k_
    bytes_ = m_ * k_ * a + k_ * n_ * w + m_ * n_ * 2.0
    return flops, bytes_


def attention_pairs(seq_len: ArrayLike, window: ArrayLike = 0) -> Number:
    """Query-key pairs of causal attention over ``seq_len`` tokens, each seeing at most
    ``window`` keys (itself included) when ``window > 0``."""
    s = seq_len if type(seq_len) is float else _num(seq_len)
    w = window if type(window) is float else _num(window)
    full = s * (s + 1.0) / 2.0
    if type(w) is float and not w > 0.0:
        return full
    windowed = w * (w + 1.0) / 2.0 + (s - w) * w
    if type(s) is float and type(w) is float:
        return windowed if w < s else full
    return np.where((w > 0) & (w < s), windowed, full)


def attention_work(seq_len: ArrayLike, heads: ArrayLike, kv_heads: ArrayLike,
                   head_dim: ArrayLike, window: ArrayLike = 0, dtype: str = "bf16",
                   kv_dtype: str = "bf16") -> tuple[Number, Number]:
    """FLOPs and bytes of one sequence's causal context attention on one GPU (``heads`` and
    ``kv_heads`` per GPU), no cached prefix."""
    info = _dtype(ATTENTION_DTYPES, dtype, "attention", None)
    c = kv_bytes(kv_dtype)
    s, h, kv, d = _num(seq_len), _num(heads), _num(kv_heads), _num(head_dim)
    flops = 4.0 * h * d * attention_pairs(s, window)
    bytes_ = s * (d * (2.0 * h * info.activation_bytes + 2.0 * kv * c))
    return flops, bytes_


def moe_work(tokens: ArrayLike, hidden: ArrayLike, inter_per_rank: ArrayLike,
             experts: ArrayLike, top_k: ArrayLike, dtype: str | None = "bf16", *,
             weight_bytes: float | None = None, touched: ArrayLike | None = None
             ) -> tuple[Number, Number]:
    """FLOPs and bytes of one fused MoE layer on one GPU with tensor-parallel experts (bytes
    per weight from :data:`MOE_DTYPES`, or ``weight_bytes``; ``dtype`` None: ``weight_bytes``;
    ``touched``: the experts read, ``min(experts, tokens top_k)`` unless given)."""
    info = _dtype(MOE_DTYPES, dtype, "MoE", weight_bytes)
    w = info.weight_bytes if weight_bytes is None else weight_bytes
    t = tokens if type(tokens) is float else _num(tokens)
    h, i, e, k = _num(hidden), _num(inter_per_rank), _num(experts), _num(top_k)
    flops = 6.0 * t * k * h * i
    if touched is None:
        pairs = t * k
        read = (e if e < pairs else pairs) if type(pairs) is float and type(e) is float \
            else np.minimum(e, pairs)
    else:
        read = _num(touched)
    bytes_ = read * 3.0 * h * i * w + 2.0 * info.activation_bytes * t * h
    return flops, bytes_


def roofline_time(flops: ArrayLike, bytes_: ArrayLike, peak_flops: float,
                  hbm_bandwidth: float) -> Array:
    """``max(flops / peak_flops, bytes / hbm_bandwidth)`` in seconds."""
    f = np.asarray(flops, dtype=np.float64)
    b = np.asarray(bytes_, dtype=np.float64)
    return np.maximum(f / peak_flops, b / hbm_bandwidth)
