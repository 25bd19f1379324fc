"""kvroof: is prefill with offloaded KV cache limited by GPU compute or by the host link?

The public API is re-exported here lazily, so ``import kvroof`` stays fast; the submodules
(``kvroof.specs``, ``kvroof.cost``, ``kvroof.units``) load on first use.

>>> import kvroof
>>> model = kvroof.get_model("Qwen/Qwen3-235B-A22B")
>>> kvroof.kv_bytes_per_token(model)
192512.0
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # specs
    "Accelerator": "kvroof.specs.hardware",
    "Link": "kvroof.specs.hardware",
    "System": "kvroof.specs.hardware",
    "HostMemory": "kvroof.specs.hardware",
    "Tier": "kvroof.specs.hardware",
    "ModelSpec": "kvroof.specs.model",
    "Registry": "kvroof.specs.registry",
    "SpecWarning": "kvroof.specs.registry",
    "default_registry": "kvroof.specs.registry",
    "load_spec_file": "kvroof.specs.loader",
    "model_from_hf_config": "kvroof.specs.hf",
    "get_model": "kvroof.lookup",
    "get_accelerator": "kvroof.lookup",
    "get_link": "kvroof.lookup",
    "get_system": "kvroof.lookup",
    # errors and units
    "KvroofError": "kvroof.errors",
    "SpecError": "kvroof.errors",
    "UnknownNameError": "kvroof.errors",
    "UnitError": "kvroof.units",
    "parse_quantity": "kvroof.units",
    # cost model
    "ParamCounts": "kvroof.cost.params",
    "param_counts": "kvroof.cost.params",
    "kv_bytes": "kvroof.cost.kv",
    "kv_bytes_per_token": "kvroof.cost.kv",
    "kv_bytes_per_token_per_layer": "kvroof.cost.kv",
}

__all__ = [
    "Accelerator",
    "HostMemory",
    "KvroofError",
    "Link",
    "ModelSpec",
    "ParamCounts",
    "Registry",
    "SpecError",
    "SpecWarning",
    "System",
    "Tier",
    "UnitError",
    "UnknownNameError",
    "__version__",
    "default_registry",
    "get_accelerator",
    "get_link",
    "get_model",
    "get_system",
    "kv_bytes",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "load_spec_file",
    "model_from_hf_config",
    "param_counts",
    "parse_quantity",
]

if TYPE_CHECKING:
    from kvroof.cost.kv import kv_bytes, kv_bytes_per_token, kv_bytes_per_token_per_layer
    from kvroof.cost.params import ParamCounts, param_counts
    from kvroof.errors import KvroofError, SpecError, UnknownNameError
    from kvroof.lookup import get_accelerator, get_link, get_model, get_system
    from kvroof.specs.hardware import Accelerator, HostMemory, Link, System, Tier
    from kvroof.specs.hf import model_from_hf_config
    from kvroof.specs.loader import load_spec_file
    from kvroof.specs.model import ModelSpec
    from kvroof.specs.registry import Registry, SpecWarning, default_registry
    from kvroof.units import UnitError, parse_quantity


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kvroof' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
