"""Typed specs (accelerators, links, systems, models, engine profiles), spec files and
registries.

Names are exported lazily (as in :mod:`kvroof`): importing one submodule, say
``kvroof.specs.registry``, does not load the HuggingFace importer or the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Engine": "kvroof.specs.engine",
    "Accelerator": "kvroof.specs.hardware",
    "HostMemory": "kvroof.specs.hardware",
    "Link": "kvroof.specs.hardware",
    "System": "kvroof.specs.hardware",
    "Tier": "kvroof.specs.hardware",
    "model_from_hf_config": "kvroof.specs.hf",
    "load_spec_file": "kvroof.specs.loader",
    "DenseFFN": "kvroof.specs.model",
    "GQAAttention": "kvroof.specs.model",
    "MLAAttention": "kvroof.specs.model",
    "ModelSpec": "kvroof.specs.model",
    "MoEFFN": "kvroof.specs.model",
    "PublishedParams": "kvroof.specs.model",
    "SlidingWindow": "kvroof.specs.model",
    "Registry": "kvroof.specs.registry",
    "SpecWarning": "kvroof.specs.registry",
    "default_registry": "kvroof.specs.registry",
}

__all__ = [
    "Accelerator",
    "DenseFFN",
    "Engine",
    "GQAAttention",
    "HostMemory",
    "Link",
    "MLAAttention",
    "MoEFFN",
    "ModelSpec",
    "PublishedParams",
    "Registry",
    "SlidingWindow",
    "SpecWarning",
    "System",
    "Tier",
    "default_registry",
    "load_spec_file",
    "model_from_hf_config",
]

if TYPE_CHECKING:
    from kvroof.specs.engine import Engine
    from kvroof.specs.hardware import Accelerator, HostMemory, Link, System, Tier
    from kvroof.specs.hf import model_from_hf_config
    from kvroof.specs.loader import load_spec_file
    from kvroof.specs.model import (
        DenseFFN,
        GQAAttention,
        MLAAttention,
        ModelSpec,
        MoEFFN,
        PublishedParams,
        SlidingWindow,
    )
    from kvroof.specs.registry import Registry, SpecWarning, default_registry


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kvroof.specs' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
