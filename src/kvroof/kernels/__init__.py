"""Measured GPU kernel tables: per-op efficiencies (GEMM, context attention, MoE) and
all-reduce times, derived from public per-op measurements (ai-dynamo/aiconfigurator,
Apache-2.0; see ``data/NOTICE`` and docs/kernels.md) and read lazily from the package's own
small format.

Layer 3 of kvroof (docs/architecture.md): data about hardware, below the cost model that
prices ops with it; it may import ``kvroof.errors``, ``kvroof.units``, ``kvroof.files`` and
``kvroof.specs``, never ``kvroof.cost`` or above.

>>> eff, cov = efficiency("h100-sxm", "gemm", "bf16", m=[64, 8192], n=8192, k=8192)
>>> covered("h100-sxm") >= {"gemm", "attention", "moe", "allreduce"}
True
"""

from kvroof.kernels.lookup import (
    OPS,
    Coverage,
    allreduce_time,
    attention_efficiency,
    covered,
    efficiency,
    gemm_efficiency,
    moe_efficiency,
    op_time,
    provenance,
    tables,
    variants,
)
from kvroof.kernels.store import shipped
from kvroof.kernels.tables import KernelTableError, SystemTables
from kvroof.kernels.work import attention_work, gemm_work, moe_work, roofline_time

__all__ = [
    "OPS",
    "Coverage",
    "KernelTableError",
    "SystemTables",
    "allreduce_time",
    "attention_efficiency",
    "attention_work",
    "covered",
    "efficiency",
    "gemm_efficiency",
    "gemm_work",
    "moe_efficiency",
    "moe_work",
    "op_time",
    "provenance",
    "roofline_time",
    "shipped",
    "tables",
    "variants",
]
