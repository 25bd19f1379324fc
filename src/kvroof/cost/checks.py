"""Input checks shared by the cost functions: one-line errors, never a silent NaN."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError
from kvroof.specs.base import DTYPE_BYTES

__all__ = [
    "MAX_TOKENS",
    "MIN_EFFICIENCY",
    "FloatArray",
    "dtype_bytes",
    "efficiency",
    "is_whole_number",
    "maximum",
    "minimum",
    "nonnegative",
    "one_of",
    "positive",
    "scalar_or_array",
    "token_count",
    "token_value",
    "when_positive",
    "whole_tokens",
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


def is_whole_number(value: float) -> bool:
    """Whether ``value`` is a finite whole number: what a token count written by a user must be
    (the cost functions themselves take any T and K, for smooth curves)."""
    return math.isfinite(value) and float(value).is_integer()


def whole_tokens(value: float) -> float:
    """``value`` if it is a finite whole number, else a ValueError saying so (a validator for
    token counts in user files: pydantic names the field)."""
    if not is_whole_number(value):
        raise ValueError(f"expected a whole number of tokens, got {value:g}")
    return value


def token_count(name: str, value: ArrayLike, *, at_least_one: bool = False) -> FloatArray:
    """A token count (or array of them): finite, >= 0 (> 0 with ``at_least_one``), and at most
    :data:`MAX_TOKENS`."""
    array = positive(name, value) if at_least_one else nonnegative(name, value)
    if np.any(array > MAX_TOKENS):
        raise KvroofError(f"{name}: at most {MAX_TOKENS:.0e} tokens, got {value!r}")
    return array


def token_value(name: str, value: ArrayLike, *, at_least_one: bool = False) -> Any:
    """:func:`token_count` that keeps a Python number a Python ``float`` (the fast path of the
    cost functions: arithmetic on floats costs nanoseconds, on 0-d arrays microseconds)."""
    if type(value) is float or type(value) is int:
        number = float(value)
        if not math.isfinite(number):
            raise KvroofError(f"{name}: must be finite, got {value!r}")
        if at_least_one and number <= 0:
            raise KvroofError(f"{name}: must be positive, got {value!r}")
        if number < 0:
            raise KvroofError(f"{name}: must not be negative, got {value!r}")
        if number > MAX_TOKENS:
            raise KvroofError(f"{name}: at most {MAX_TOKENS:.0e} tokens, got {value!r}")
        return number
    return token_count(name, value, at_least_one=at_least_one)


def maximum(a: Any, b: Any) -> Any:
    """``max`` of two floats, or ``np.maximum`` when either is an array."""
    if type(a) is float and type(b) is float:
        return a if a >= b else b
    return np.maximum(a, b)


def minimum(a: Any, b: Any) -> Any:
    """``min`` of two floats, or ``np.minimum`` when either is an array."""
    if type(a) is float and type(b) is float:
        return a if a <= b else b
    return np.minimum(a, b)


def when_positive(t: Any, value: Any) -> Any:
    """``value`` where ``t > 0``, else 0 (floats stay floats)."""
    if type(t) is float:
        return value if t > 0 else 0.0 * value
    return np.where(t > 0, value, 0.0)


def positive(name: str, value: ArrayLike) -> FloatArray:
    """``value`` as a float array, every element finite and > 0."""
    array = _as_float_array(name, value)
    if np.any(array <= 0):
        raise KvroofError(f"{name}: must be positive, got {value!r}")
    return array


MIN_EFFICIENCY = 1e-9
"""The smallest efficiency taken: a rate divided by less is a typo, and divided by a subnormal
number (below 2.2e-308) it overflows to infinity."""


def efficiency(name: str, value: ArrayLike) -> FloatArray:
    """An efficiency in [:data:`MIN_EFFICIENCY`, 1]."""
    array = _as_float_array(name, value)
    if np.any((array <= 0) | (array > 1)):
        raise KvroofError(f"{name}: must be in (0, 1], got {value!r}")
    if np.any(array < MIN_EFFICIENCY):
        raise KvroofError(f"{name}: must be at least {MIN_EFFICIENCY:g} (a smaller share is "
                          f"almost certainly a typo), got {value!r}")
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


def one_of(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Refuse ``value`` unless it is one of ``choices`` (a setting's names)."""
    if value not in choices:
        raise KvroofError(f"{name}: expected one of {', '.join(choices)}, got {value!r}")


def scalar_or_array(array: FloatArray) -> Any:
    """A 0-d array becomes a Python float; anything else stays an array."""
    return float(array) if array.ndim == 0 else array
