"""Which kernel tables price a deployment's ops: the data type of its GEMMs (:func:`gemm_dtype`),
of its MoE experts (:func:`moe_dtype`) and of its KV cache for attention
(:data:`ATTENTION_KV_DTYPES`), as the tables of :mod:`kvroof.kernels` name them; ``None`` where
the tables have no such type (the op is then priced by its roofline).
"""

from __future__ import annotations

from kvroof.cost.deployment_settings import DeploymentSettings

__all__ = ["ATTENTION_KV_DTYPES", "float_dtype", "gemm_dtype", "moe_dtype"]

ATTENTION_KV_DTYPES = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8"}
"""KV cache types with attention tables (fp16 is priced as bf16: the same kernels)."""


def float_dtype(dtype: str) -> bool:
    """Whether ``dtype`` is a 16- or 32-bit floating-point type (priced with the bf16 tables)."""
    return dtype in ("bf16", "fp16", "fp32", "tf32")


def gemm_dtype(dep: DeploymentSettings) -> str | None:
    """The kernel tables' GEMM data type for the deployment's linear layers: ``bf16`` for 16-
    and 32-bit weights (fp16 as bf16), ``fp8_block`` for an FP8 checkpoint (DeepSeek-V3, Kimi-K2,
    MiniMax and GLM publish 128 x 128 block scales), ``fp8`` (per-tensor scales) for FP8 set by
    ``weight_dtype`` or ``compute_dtype`` (an engine quantizing on load), ``nvfp4`` for FP4;
    ``None`` for a type without tables (int8, int4)."""
    weights = dep.weight_dtype or dep.model.weights.dtype
    if weights == "fp8":
        return "fp8" if dep.weight_dtype is not None else "fp8_block"
    if weights in ("fp4", "nvfp4"):
        return "nvfp4"
    if float_dtype(weights):
        return "fp8" if dep.compute_dtype == "fp8" else "bf16"
    return None


def moe_dtype(dep: DeploymentSettings) -> str | None:
    """The kernel tables' MoE data type for the deployment's experts: as :func:`gemm_dtype`,
    and ``w4a16_mxfp4`` for MXFP4 experts (gpt-oss: vLLM's Triton MXFP4 path), ``int4_wo`` for
    int4 weights."""
    experts = dep.weight_dtype or dep.model.weights.expert_dtype
    if experts == "fp8":
        return "fp8" if dep.weight_dtype is not None else "fp8_block"
    if experts == "mxfp4":
        return "w4a16_mxfp4"
    if experts in ("fp4", "nvfp4"):
        return "nvfp4"
    if experts == "int4":
        return "int4_wo"
    if float_dtype(experts):
        return "fp8" if dep.compute_dtype == "fp8" else "bf16"
    return None

