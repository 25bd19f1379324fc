"""A workload: one row per prefill request, stored as columns (numpy arrays).

Each request prefills ``T`` new tokens on top of ``K`` tokens whose KV cache is reused (loaded
back from wherever it was offloaded). Columns:

- ``new_tokens`` (T) and ``cached_tokens`` (K): int64, >= 0.
- ``output_tokens``: int64; :data:`UNKNOWN_OUTPUT` (-1) where the source does not say.
- ``arrival_time``: float64 seconds, or ``None`` when the source has no times at all; inside
  the array, NaN marks a row whose time is unknown (a concatenation of a timed and an untimed
  workload, or an empty cell in a table).
- ``group_id``: the conversation or document a request belongs to, as text ("" when unknown);
  an object array of ``str``, so one long id costs memory once, not once per row.

Metadata: ``name``, ``synthetic`` (True for generated workloads: every output says so),
``source`` (where the rows came from and how tokens were counted) and ``skipped`` (bad input
records skipped on request, never silently).

The arrays are copied on construction and made read-only, so a ``Workload`` is immutable.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError
from kvroof.workload.summary import workload_stats

__all__ = [
    "UNKNOWN_OUTPUT",
    "FloatArray",
    "IntArray",
    "StrArray",
    "Workload",
    "WorkloadBuilder",
    "str_column",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
StrArray = NDArray[np.object_]

UNKNOWN_OUTPUT = -1
"""``output_tokens`` value of a request whose output length is not known."""


def _int_column(name: str, values: ArrayLike, minimum: int) -> IntArray:
    array_ = np.array(values)
    if array_.ndim != 1:
        raise KvroofError(f"{name}: expected a 1-D array, got shape {array_.shape}")
    if array_.size and array_.dtype.kind == "f":
        if not np.all(np.isfinite(array_)) or np.any(array_ != np.round(array_)):
            raise KvroofError(f"{name}: token counts must be whole numbers")
    elif array_.size and array_.dtype.kind not in "iu":
        raise KvroofError(f"{name}: expected integers, got {array_.dtype} values")
    column = array_.astype(np.int64)
    if column.size and int(column.min()) < minimum:
        raise KvroofError(f"{name}: values must be >= {minimum}, found {int(column.min())}")
    column.setflags(write=False)
    return column


def _time_column(values: ArrayLike) -> FloatArray:
    try:
        column = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise KvroofError("arrival_time: expected numbers (seconds)") from None
    if column.ndim != 1:
        raise KvroofError(f"arrival_time: expected a 1-D array, got shape {column.shape}")
    if np.any(np.isinf(column)):
        raise KvroofError("arrival_time: must be finite seconds (NaN marks an unknown time)")
    column.setflags(write=False)
    return column


def str_column(values: ArrayLike) -> StrArray:
    """A read-only 1-D object array of ``values`` as strings (a group id column)."""
    raw = np.asarray(values, dtype=object)
    if raw.ndim != 1:
        raise KvroofError(f"group_id: expected a 1-D array, got shape {raw.shape}")
    column = np.empty(raw.shape[0], dtype=object)
    column[:] = [v if isinstance(v, str) else str(v) for v in raw.tolist()]
    column.setflags(write=False)
    return column


@dataclass(frozen=True, eq=False)
class Workload:
    """Requests as columns; build one with :meth:`from_columns` or a loader."""

    new_tokens: IntArray
    cached_tokens: IntArray
    output_tokens: IntArray
    group_id: StrArray
    arrival_time: FloatArray | None = None
    name: str = "workload"
    synthetic: bool = False
    source: str = ""
    skipped: int = 0

    def __post_init__(self) -> None:
        columns: dict[str, Any] = {
            "new_tokens": _int_column("new_tokens", self.new_tokens, 0),
            "cached_tokens": _int_column("cached_tokens", self.cached_tokens, 0),
            "output_tokens": _int_column("output_tokens", self.output_tokens, UNKNOWN_OUTPUT),
            "group_id": str_column(self.group_id),
        }
        if self.arrival_time is not None:
            columns["arrival_time"] = _time_column(self.arrival_time)
        lengths = {key: len(value) for key, value in columns.items()}
        if len(set(lengths.values())) > 1:
            detail = ", ".join(f"{key} {n}" for key, n in lengths.items())
            raise KvroofError(f"workload {self.name!r}: columns differ in length ({detail})")
        if self.skipped < 0:
            raise KvroofError(f"workload {self.name!r}: skipped must be >= 0")
        for key, value in columns.items():
            object.__setattr__(self, key, value)

    @classmethod
    def from_columns(
        cls,
        new_tokens: ArrayLike,
        cached_tokens: ArrayLike,
        *,
        output_tokens: ArrayLike | None = None,
        arrival_time: ArrayLike | None = None,
        group_id: ArrayLike | None = None,
        name: str = "workload",
        synthetic: bool = False,
        source: str = "",
        skipped: int = 0,
    ) -> Workload:
        """A workload from T and K (any integer sequences); the optional columns default to
        unknown (output -1, no arrival times, group "")."""
        n = len(np.atleast_1d(np.asarray(new_tokens)))
        return cls(
            new_tokens=np.asarray(new_tokens),
            cached_tokens=np.asarray(cached_tokens),
            output_tokens=(
                np.full(n, UNKNOWN_OUTPUT, dtype=np.int64)
                if output_tokens is None
                else np.asarray(output_tokens)
            ),
            group_id=np.full(n, "", dtype=object) if group_id is None else np.asarray(group_id),
            arrival_time=None if arrival_time is None else np.asarray(arrival_time),
            name=name,
            synthetic=synthetic,
            source=source,
            skipped=skipped,
        )

    def to_frame(self) -> Any:
        """A pandas DataFrame with one row per request: ``new_tokens``, ``cached_tokens``,
        ``output_tokens`` (-1 where unknown), ``group_id`` and, when known, ``arrival_time``
        (seconds)."""
        from kvroof.display import require_pandas

        pandas = require_pandas()
        columns: dict[str, Any] = {"new_tokens": self.new_tokens,
                                   "cached_tokens": self.cached_tokens,
                                   "output_tokens": self.output_tokens, "group_id": self.group_id}
        if self.arrival_time is not None:
            columns["arrival_time"] = self.arrival_time
        return pandas.DataFrame(columns)

    def _repr_html_(self) -> str:
        if len(self) == 0:
            return f"<p>workload {self.name!r}: no requests</p>"
        stats = workload_stats(
            name=self.name, synthetic=self.synthetic, source=self.source, skipped=self.skipped,
            new_tokens=self.new_tokens, cached_tokens=self.cached_tokens,
            kappa_ratio=self.kappa_ratio(),
            known_output_tokens=self.output_tokens[self.output_known],
        )
        return stats._repr_html_()

    def __len__(self) -> int:
        return int(self.new_tokens.shape[0])

    def kappa_ratio(self) -> FloatArray:
        """K / T per request.

        A request with ``K == 0`` has ratio 0 (nothing to load, whatever T is); one with
        ``T == 0 < K`` has ratio +inf (everything is loaded, nothing computed). So the ratio
        is never NaN.
        """
        k = self.cached_tokens.astype(np.float64)
        t = self.new_tokens.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = k / t
        ratio[k == 0] = 0.0
        return ratio

    @property
    def output_known(self) -> NDArray[np.bool_]:
        """Which requests have a known output length."""
        known: NDArray[np.bool_] = self.output_tokens != UNKNOWN_OUTPUT
        return known

    def filter(self, mask: ArrayLike) -> Workload:
        """The requests where ``mask`` (booleans, one per request) is True. The metadata,
        ``skipped`` included (it counts bad input records, not filtered rows), is kept."""
        keep = np.asarray(mask)
        if keep.dtype != np.bool_ or keep.shape != (len(self),):
            raise KvroofError(
                f"filter: expected {len(self)} booleans, got {keep.dtype} of shape {keep.shape}"
            )
        return Workload(
            new_tokens=self.new_tokens[keep],
            cached_tokens=self.cached_tokens[keep],
            output_tokens=self.output_tokens[keep],
            group_id=self.group_id[keep],
            arrival_time=None if self.arrival_time is None else self.arrival_time[keep],
            name=self.name,
            synthetic=self.synthetic,
            source=self.source,
            skipped=self.skipped,
        )

    @classmethod
    def concat(cls, parts: Sequence[Workload], name: str | None = None) -> Workload:
        """The rows of ``parts`` in order. The result is synthetic if any part is (a mix of
        real and generated rows must not pass for real data); ``skipped`` adds up; arrival
        times are kept when any part has them (NaN for the rows of parts without)."""
        if not parts:
            raise KvroofError("concat: no workloads given")
        timed = any(p.arrival_time is not None for p in parts)
        arrival = (
            np.concatenate([
                p.arrival_time if p.arrival_time is not None else np.full(len(p), np.nan)
                for p in parts
            ])
            if timed
            else None
        )
        return cls(
            new_tokens=np.concatenate([p.new_tokens for p in parts]),
            cached_tokens=np.concatenate([p.cached_tokens for p in parts]),
            output_tokens=np.concatenate([p.output_tokens for p in parts]),
            group_id=np.concatenate([p.group_id for p in parts]),
            arrival_time=arrival,
            name=name if name is not None else "+".join(p.name for p in parts),
            synthetic=any(p.synthetic for p in parts),
            source="; ".join(dict.fromkeys(p.source for p in parts if p.source)),
            skipped=sum(p.skipped for p in parts),
        )

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` (pandas is optional: install it to use this). Columns
        new_tokens, cached_tokens, kappa_ratio, output_tokens (nullable Int64, <NA> where
        unknown), arrival_time (when known) and group_id; the metadata goes to ``df.attrs``."""
        try:
            pd: Any = import_module("pandas")
        except ImportError:
            raise KvroofError(
                "Workload.to_pandas needs pandas, which kvroof does not install "
                "(pip install pandas)"
            ) from None
        data: dict[str, Any] = {
            "new_tokens": self.new_tokens,
            "cached_tokens": self.cached_tokens,
            "kappa_ratio": self.kappa_ratio(),
        }
        output = pd.array(self.output_tokens, dtype="Int64")
        output[~self.output_known] = pd.NA
        data["output_tokens"] = output
        if self.arrival_time is not None:
            data["arrival_time"] = self.arrival_time
        data["group_id"] = self.group_id
        frame = pd.DataFrame(data)
        frame.attrs.update(
            name=self.name, synthetic=self.synthetic, source=self.source, skipped=self.skipped
        )
        return frame


class WorkloadBuilder:
    """Collects rows one at a time (compact typed buffers, not Python lists of ints) and
    builds a :class:`Workload`; the loaders use it while they stream a file."""

    def __init__(self, timed: bool = False) -> None:
        self._new = array("q")
        self._cached = array("q")
        self._output = array("q")
        self._arrival: array[float] | None = array("d") if timed else None
        self._groups: list[str] = []

    def __len__(self) -> int:
        return len(self._new)

    def add(
        self,
        new_tokens: int,
        cached_tokens: int,
        output_tokens: int = UNKNOWN_OUTPUT,
        group_id: str = "",
        arrival_time: float = float("nan"),
    ) -> None:
        self._new.append(new_tokens)
        self._cached.append(cached_tokens)
        self._output.append(output_tokens)
        self._groups.append(group_id)
        if self._arrival is not None:
            self._arrival.append(arrival_time)

    def build(
        self, name: str, source: str, synthetic: bool = False, skipped: int = 0
    ) -> Workload:
        return Workload(
            new_tokens=np.frombuffer(self._new, dtype=np.int64),
            cached_tokens=np.frombuffer(self._cached, dtype=np.int64),
            output_tokens=np.frombuffer(self._output, dtype=np.int64),
            group_id=np.array(self._groups, dtype=object),
            arrival_time=(
                None if self._arrival is None else np.frombuffer(self._arrival, np.float64)
            ),
            name=name,
            synthetic=synthetic,
            source=source,
            skipped=skipped,
        )
