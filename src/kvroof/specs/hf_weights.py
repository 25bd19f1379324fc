"""The checkpoint's weight format from a HuggingFace config: ``quantization_config`` (``fp8``
-> FP8 linear layers; ``mxfp4`` -> MXFP4 expert weights of a MoE model, as gpt-oss ships them;
``awq``/``gptq`` -> int4 or int8), else ``torch_dtype`` (or ``dtype``); the embedding and LM
head keep ``torch_dtype``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kvroof.errors import short_repr
from kvroof.specs.hf_fields import HFConfig

__all__ = ["weight_format"]

_TORCH_DTYPES: Final = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def weight_format(cfg: HFConfig, moe: bool) -> dict[str, Any]:
    """The checkpoint's weight format from ``quantization_config`` (else ``torch_dtype``)."""
    key = "torch_dtype" if cfg.has("torch_dtype") or not cfg.has("dtype") else "dtype"
    raw = cfg.data[key] if cfg.has(key) else "bfloat16"
    base = _TORCH_DTYPES.get(raw) if isinstance(raw, str) else None
    if base is None:
        raise cfg.error(key, f"unsupported dtype {short_repr(raw, 40)} (expected one of "
                             f"{', '.join(_TORCH_DTYPES)})")
    quant = cfg.data.get("quantization_config")
    if quant is None:
        return {"dtype": base, "embeddings": base}
    if not isinstance(quant, Mapping):
        raise cfg.error("quantization_config", "expected a mapping")
    method = quant.get("quant_method", "")
    if not isinstance(method, str):
        raise cfg.error("quantization_config.quant_method",
                        f"expected a string, got {short_repr(method)}")
    if method == "fp8":
        return {"dtype": "fp8", "embeddings": base}
    if method == "mxfp4":
        if moe:  # gpt-oss: MoE expert weights only; attention, router, embeddings stay base
            return {"dtype": base, "experts": "mxfp4", "embeddings": base}
        return {"dtype": "mxfp4", "embeddings": base}
    if method in ("awq", "gptq"):
        bits_key = "w_bit" if quant.get("bits") is None and quant.get("w_bit") is not None \
            else "bits"
        bits = quant.get(bits_key)
        if isinstance(bits, bool) or not isinstance(bits, int) or bits not in (4, 8):
            raise cfg.error(f"quantization_config.{bits_key}", f"expected 4 or 8 bits for "
                                                               f"{method}, got "
                                                               f"{short_repr(bits, 20)}")
        return {"dtype": f"int{bits}", "embeddings": base}
    raise cfg.error("quantization_config.quant_method",
                    f"unsupported quantization {method[:40]!r} (supported: fp8, mxfp4, awq, gptq); "
                    "give weights explicitly in a model spec file")
