"""Shortcuts to look specs up in the default registry (built-ins + ``KVROOF_SPEC_PATH``)."""

from __future__ import annotations

from kvroof.specs.engine import Engine
from kvroof.specs.hardware import Accelerator, Link, System
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import default_registry

__all__ = ["get_accelerator", "get_engine", "get_link", "get_model", "get_system"]


def get_model(name: str) -> ModelSpec:
    """The model called ``name`` (or an alias such as a HuggingFace id)."""
    return default_registry().model(name)


def get_accelerator(name: str) -> Accelerator:
    """The accelerator called ``name`` (or an alias)."""
    return default_registry().accelerator(name)


def get_link(name: str) -> Link:
    """The link called ``name`` (or an alias)."""
    return default_registry().link(name)


def get_system(name: str) -> System:
    """The system called ``name`` (or an alias)."""
    return default_registry().system(name)


def get_engine(name: str) -> Engine:
    """The engine profile called ``name`` (or an alias)."""
    return default_registry().engine(name)
