"""The request trace of the serving simulation: prompts as chains of prefix blocks.

A :class:`~kvroof.workload.records.Workload` says how many tokens of each request are new (T)
and cached (K) under one fixed cache. A simulation decides K itself, from what its own caches
hold when the request is scheduled, so it needs each prompt's *identity*: the chain of prefix
blocks it is made of. :class:`RequestTrace` holds, per request (columns, numpy arrays):

- ``input_tokens`` (the prompt, >= 1) and ``output_tokens`` (-1 where the source does not say);
- ``arrival_time`` (seconds; a simulation that replays them checks that they do not decrease,
  :meth:`RequestTrace.check_times`), or ``None`` when the source has no times;
- the prompt's blocks: ``block_ids`` (int64) and ``block_ends`` (the token position where each
  block ends), request ``i``'s being ``[block_offsets[i], block_offsets[i + 1])``. A block id
  stands for the block *and everything before it* (Mooncake's hash chains), so two requests
  share a cached prefix exactly as far as their leading ids agree, and one request's chain
  names each block once (checked);
- ``preload_blocks``: how many leading blocks are in the host tier whenever the request looks
  for them (a table's K: "these tokens are cached", the seed paper's convention; a simulation
  puts them in host DRAM when the request is scheduled, so a long queue cannot evict them);
- ``group_id`` (conversation or document) and ``record`` (the line, row or request number
  in the source, for error messages; ``record_unit`` says which).

:class:`TraceBuilder` collects requests one at a time for the builders of
:mod:`kvroof.workload.requests`, one per source.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError
from kvroof.workload.records import UNKNOWN_OUTPUT, str_column

__all__ = ["RequestTrace", "TraceBuilder"]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]


def _frozen(values: ArrayLike, dtype: Any) -> Any:
    array_ = np.array(values, dtype=dtype)
    array_.setflags(write=False)
    return array_


@dataclass(frozen=True, eq=False)
class RequestTrace:
    """Requests with their prefix-block chains (see the module docstring)."""

    input_tokens: IntArray
    output_tokens: IntArray
    block_offsets: IntArray
    block_ids: IntArray
    block_ends: IntArray
    preload_blocks: IntArray
    group_id: NDArray[np.object_]
    record: IntArray
    arrival_time: FloatArray | None = None
    record_unit: str = "line"
    path: str = ""
    name: str = "trace"
    source: str = ""
    synthetic: bool = False
    skipped: int = 0

    def __post_init__(self) -> None:
        n = len(self.input_tokens)
        for name in ("input_tokens", "output_tokens", "block_offsets", "block_ids",
                     "block_ends", "preload_blocks", "record"):
            object.__setattr__(self, name, _frozen(getattr(self, name), np.int64))
        group = str_column(self.group_id)
        object.__setattr__(self, "group_id", group)
        if self.arrival_time is not None:
            object.__setattr__(self, "arrival_time", _frozen(self.arrival_time, np.float64))
        lengths = {"output_tokens": len(self.output_tokens), "preload_blocks":
                   len(self.preload_blocks), "group_id": len(group), "record": len(self.record),
                   "block_offsets": len(self.block_offsets) - 1}
        if self.arrival_time is not None:
            lengths["arrival_time"] = len(self.arrival_time)
        bad = {key: value for key, value in lengths.items() if value != n}
        if bad:
            raise KvroofError(f"trace {self.name!r}: {n} requests but " + ", ".join(
                f"{key} has {value}" for key, value in bad.items()))
        if len(self.block_ids) != len(self.block_ends) or (
                n and int(self.block_offsets[-1]) != len(self.block_ids)):
            raise KvroofError(f"trace {self.name!r}: block columns do not match their offsets")
        if n and int(self.input_tokens.min()) < 1:
            i = int(np.argmin(self.input_tokens))
            raise KvroofError(f"{self.where(i)}: input length must be >= 1, got "
                              f"{int(self.input_tokens[i])}")
        self._check_distinct_blocks()

    def _check_distinct_blocks(self) -> None:
        """A chain names each block once (an id stands for the block and everything before
        it); the simulation's caches count on it."""
        if len(self.block_ids) < 2:
            return
        counts = np.diff(self.block_offsets)
        owner = np.repeat(np.arange(len(counts)), counts)
        order = np.lexsort((self.block_ids, owner))
        ids, owners = self.block_ids[order], owner[order]
        twice = np.flatnonzero((owners[1:] == owners[:-1]) & (ids[1:] == ids[:-1]))
        if twice.size:
            i = int(twice[0])
            raise KvroofError(f"{self.where(int(owners[i]))}: block id {int(ids[i])} appears "
                              "twice in one request's chain (a chain names each block once)")

    def check_times(self) -> None:
        """A one-line error naming the first request whose arrival time is unknown or earlier
        than the one before it (a simulation replays requests in time order)."""
        times = self.arrival_time
        if times is None or not len(times):
            return
        if not np.all(np.isfinite(times)):
            i = int(np.flatnonzero(~np.isfinite(times))[0])
            raise KvroofError(f"{self.where(i)}: arrival time unknown")
        back = np.flatnonzero(np.diff(times) < 0)
        if back.size:
            i = int(back[0]) + 1
            raise KvroofError(f"{self.where(i)}: arrival time {times[i]:g} s is earlier than "
                              f"the one before it ({times[i - 1]:g} s); timestamps must not "
                              "decrease")

    def __len__(self) -> int:
        return int(self.input_tokens.shape[0])

    def to_frame(self) -> Any:
        """A pandas DataFrame with one row per request: ``input_tokens``, ``output_tokens``,
        ``arrival_time_s``, ``group_id``, ``record``, the prefix blocks and the prefix tokens
        seen before (:mod:`kvroof.workload.trace_frames`)."""
        from kvroof.workload.trace_frames import trace_frame

        return trace_frame(self)

    def _repr_html_(self) -> str:
        from kvroof.workload.trace_frames import trace_html

        return trace_html(self)

    def __repr__(self) -> str:
        from kvroof.workload.trace_frames import trace_repr

        return trace_repr(self)

    def where(self, index: int) -> str:
        """``FILE: line N`` (or row / conversation) of request ``index``, for messages."""
        place = self.path or self.name
        return f"{place}: {self.record_unit} {int(self.record[index])}"

    def blocks(self, index: int) -> tuple[IntArray, IntArray]:
        """Request ``index``'s block ids and block end positions."""
        lo, hi = int(self.block_offsets[index]), int(self.block_offsets[index + 1])
        return self.block_ids[lo:hi], self.block_ends[lo:hi]

    @property
    def output_known(self) -> NDArray[np.bool_]:
        known: NDArray[np.bool_] = self.output_tokens != UNKNOWN_OUTPUT
        return known

    def with_arrivals(self, times: ArrayLike, note: str = "") -> RequestTrace:
        """The same requests arriving at ``times`` (seconds)."""
        return replace(self, arrival_time=np.asarray(times, dtype=np.float64),
                       source=self.source + (f"; {note}" if note else ""))

    def with_outputs(self, outputs: ArrayLike, note: str = "") -> RequestTrace:
        """The same requests with output lengths ``outputs``."""
        return replace(self, output_tokens=np.asarray(outputs, dtype=np.int64),
                       source=self.source + (f"; {note}" if note else ""))

    def take(self, index: ArrayLike) -> RequestTrace:
        """The requests at ``index`` (integer positions, in that order)."""
        idx = np.asarray(index, dtype=np.int64)
        lo, hi = self.block_offsets[idx], self.block_offsets[idx + 1]
        counts = hi - lo
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        gather = (np.repeat(lo - offsets[:-1], counts) + np.arange(int(offsets[-1]))
                  ).astype(np.int64)
        return replace(
            self,
            input_tokens=self.input_tokens[idx], output_tokens=self.output_tokens[idx],
            block_offsets=offsets, block_ids=self.block_ids[gather],
            block_ends=self.block_ends[gather], preload_blocks=self.preload_blocks[idx],
            group_id=self.group_id[idx], record=self.record[idx],
            arrival_time=None if self.arrival_time is None else self.arrival_time[idx],
        )

    def repeat(self, copies: int, period: float) -> RequestTrace:
        """``copies`` copies of the trace, copy ``c`` shifted by ``c x period`` seconds and with
        its own block ids (no prefix is shared between copies)."""
        if isinstance(copies, bool) or not isinstance(copies, int) or copies < 1:
            raise KvroofError(f"copies: expected a positive integer, got {copies!r}")
        if self.arrival_time is None:
            raise KvroofError("repeat: the trace has no arrival times")
        span = int(self.block_ids.max()) + 1 if self.block_ids.size else 0
        n = len(self)
        ids = np.concatenate([self.block_ids + c * span for c in range(copies)])
        offsets = np.concatenate([self.block_offsets[:-1] + c * len(self.block_ids)
                                  for c in range(copies)] + [[copies * len(self.block_ids)]])
        times = np.concatenate([self.arrival_time + c * period for c in range(copies)])
        order = np.argsort(times, kind="stable")
        tiled = replace(
            self,
            input_tokens=np.tile(self.input_tokens, copies),
            output_tokens=np.tile(self.output_tokens, copies),
            block_offsets=offsets, block_ids=ids, block_ends=np.tile(self.block_ends, copies),
            preload_blocks=np.tile(self.preload_blocks, copies),
            group_id=np.tile(self.group_id, copies), record=np.tile(self.record, copies),
            arrival_time=None, name=f"{self.name} x{copies}",
            source=f"{self.source}; {copies} copies, {period:g} s apart",
        )
        if n:
            tiled = tiled.take(order)
        return replace(tiled, arrival_time=times[order])


class TraceBuilder:
    """Collects requests and their blocks in compact buffers and builds a
    :class:`RequestTrace`; the builders of :mod:`kvroof.workload.requests` use it."""

    def __init__(self) -> None:
        self.inputs = array("q")
        self.outputs = array("q")
        self.offsets = array("q", [0])
        self.ids = array("q")
        self.ends = array("q")
        self.preload = array("q")
        self.records = array("q")
        self.times = array("d")
        self.groups: list[str] = []

    def add(self, input_tokens: int, output_tokens: int, ids: list[int], ends: list[int],
            preload: int, record: int, group: str = "", time: float = math.nan) -> None:
        self.inputs.append(input_tokens)
        self.outputs.append(output_tokens)
        self.ids.extend(ids)
        self.ends.extend(ends)
        self.offsets.append(len(self.ids))
        self.preload.append(preload)
        self.records.append(record)
        self.groups.append(group)
        self.times.append(time)

    def build(self, timed: bool, **meta: Any) -> RequestTrace:
        return RequestTrace(
            input_tokens=np.frombuffer(self.inputs, dtype=np.int64),
            output_tokens=np.frombuffer(self.outputs, dtype=np.int64),
            block_offsets=np.frombuffer(self.offsets, dtype=np.int64),
            block_ids=np.frombuffer(self.ids, dtype=np.int64),
            block_ends=np.frombuffer(self.ends, dtype=np.int64),
            preload_blocks=np.frombuffer(self.preload, dtype=np.int64),
            group_id=np.array(self.groups, dtype=object),
            record=np.frombuffer(self.records, dtype=np.int64),
            arrival_time=np.frombuffer(self.times, dtype=np.float64) if timed else None,
            **meta,
        )

