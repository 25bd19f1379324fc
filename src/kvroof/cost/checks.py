"""Input checks shared by the cost functions: one-line errors, never a silent NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError
from kvroof.specs.base import DTYPE_BYTES

__all__ = [
    "MAX_TOKENS",
    "FloatArray",
    "dtype_bytes",
    "efficiency",
    "nonnegative",
    "positive",
    "scalar_or_array",
    "token_count",
]

FloatArray = NDArray[np.float64]


def _as_float_array(name: str, value: ArrayLike) -> FloatArray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise KvroofError(
            f"{name}: expected a number or an array of numbers, got {value!r}"
        ) from None
    if not np.all(np.isfinite(array)):
        raise KvroofError(f"{name}: must be finite, got {value!r}")
    return array


def nonnegative(name: str, value: ArrayLike) -> FloatArray:
    """``value`` as a float array, every element finite and >= 0."""
    array = _as_float_array(name, value)
    if np.any(array < 0):
        raise KvroofError(f"{name}: must not be negative, got {value!r}")
    return array


MAX_TOKENS = 1e15
"""Token counts above this are input errors (and would overflow the FLOP counts)."""


def token_count(name: str, value: ArrayLike, *, at_least_one: bool = False) -> FloatArray:
    """A token count (or array of them): finite, >= 0 (> 0 with ``at_least_one``), and at most
    :data:`MAX_TOKENS`."""
    array = positive(name, value) if at_least_one else nonnegative(name, value)
    if np.any(array > MAX_TOKENS):
        raise KvroofError(f"{name}: at most {MAX_TOKENS:.0e} tokens, got {value!r}")
    return array


def positive(name: str, value: ArrayLike) -> FloatArray:
    """``value`` as a float array, every element finite and > 0."""
    array = _as_float_array(name, value)
    if np.any(array <= 0):
        raise KvroofError(f"{name}: must be positive, got {value!r}")
    return array


def efficiency(name: str, value: ArrayLike) -> FloatArray:
    """An efficiency in (0, 1]."""
    array = _as_float_array(name, value)
    if np.any((array <= 0) | (array > 1)):
        raise KvroofError(f"{name}: must be in (0, 1], got {value!r}")
    return array


def dtype_bytes(dtype: str, name: str = "") -> float:
    """Bytes per element of ``dtype`` (bf16 2, fp8 1, int4 0.5, ...); ``name`` is the field
    an error names."""
    try:
        return DTYPE_BYTES[dtype.lower()]
    except (KeyError, AttributeError):
        where = f"{name}: " if name else ""
        raise KvroofError(
            f"{where}unknown dtype {dtype!r} (expected one of {', '.join(DTYPE_BYTES)})"
        ) from None


def scalar_or_array(array: FloatArray) -> Any:
    """A 0-d array becomes a Python float; anything else stays an array."""
    return float(array) if array.ndim == 0 else array
