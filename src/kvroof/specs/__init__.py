"""Typed specs (accelerators, links, systems, models, engine profiles), spec files and
registries."""

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
