"""Request traces for the serving simulation: prompts as chains of prefix blocks.

A :class:`Workload` says how many tokens of each request are new (T) and cached (K) under one
fixed cache. A simulation decides K itself, from what its own caches hold when the request is
scheduled, so it needs each prompt's *identity*: the chain of prefix blocks it is made of.
:class:`RequestTrace` holds, per request (columns, numpy arrays):

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
- ``group_id`` (conversation or document) and ``record`` (the line, row or conversation number
  in the source, for error messages; ``record_unit`` says which).

Builders, one per source (:func:`load_requests` picks by format):

- Mooncake traces (:func:`load_mooncake_requests`): the trace's own ``hash_ids`` of 512-token
  blocks, the last one possibly partial, and its timestamps (milliseconds -> seconds). A
  timestamp earlier than the one before it, a zero length, more ``hash_ids`` than the prompt
  has blocks or an id written twice in one chain is a bad line (an error naming it, or
  skipped and counted with ``skip_bad``).
- ShareGPT (:func:`requests_from_workload` with ``kind="sharegpt"``): the prompt of a user turn
  is the conversation so far plus the new message (``K + T`` of the workload loader); the full
  blocks of that prompt get ids keyed by (conversation, block index), so a later turn shares
  every full block of the earlier turns' prompts. The replies are part of the next prompt but
  were decoded, not prefilled; whether their KV is cached is the simulator's business.
- Document QA (``kind="docqa"``): the document is the shared prefix (its full blocks keyed by
  (document, block index)); the question and the partial block around it are the request's
  own. With ``preloaded`` documents (the loader's option) the document blocks are preloaded.
- Tables (``kind="table"``): the first ``K`` tokens are the shared prefix (keyed by
  ``group_id`` when a row has one, else the row's own), preloaded into the host tier; the last
  prefix block ends exactly at ``K`` (possibly partial), so the simulation can find exactly
  ``K`` cached tokens.

Ids built here are small consecutive integers; they never mix with a Mooncake trace's (one trace
is one source).
"""

from __future__ import annotations

import bisect
import math
from array import array
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from kvroof.errors import KvroofError
from kvroof.workload.reading import (
    BadRecordError,
    BadRecords,
    count_field,
    hash_id_chain,
    iter_json_lines,
)
from kvroof.workload.records import UNKNOWN_OUTPUT, Workload, str_column

__all__ = [
    "MOONCAKE_BLOCK_TOKENS",
    "MOONCAKE_SLICE",
    "RequestTrace",
    "load_mooncake_requests",
    "load_requests",
    "requests_from_workload",
]

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per hash block in Mooncake's traces (FAST25-release/README.md)."""

MOONCAKE_SLICE = Path(__file__).resolve().parent / "data" / "mooncake_conversation_5min.jsonl"
"""The first five minutes (918 requests) of Mooncake's real conversation trace, shipped with
kvroof (Apache-2.0; attribution in ``data/README.md`` beside it)."""

DEFAULT_BLOCK_TOKENS = 512
"""Tokens per prefix block built for ShareGPT, document-QA and table traces: Mooncake's
granularity, so every source is matched alike."""


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


class _Builder:
    """Collects requests and their blocks in compact buffers."""

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


def load_mooncake_requests(
    path: str | Path, *, skip_bad: bool = False, name: str | None = None,
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> RequestTrace:
    """A Mooncake-style JSON Lines trace (``timestamp`` ms, ``input_length``,
    ``output_length``, ``hash_ids``) with its own block ids and arrival times."""
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int) or block_tokens < 1:
        raise KvroofError(f"block_tokens must be a positive integer, got {block_tokens!r}")
    file = Path(path)
    bad = BadRecords(file, skip_bad)
    builder = _Builder()
    last = -math.inf
    for lineno, record in iter_json_lines(file, bad):
        try:
            for field in ("timestamp", "input_length", "output_length", "hash_ids"):
                if field not in record:
                    raise BadRecordError(f"missing field {field!r}")
            stamp = record["timestamp"]
            if (isinstance(stamp, bool) or not isinstance(stamp, int | float)
                    or not math.isfinite(stamp)):
                raise BadRecordError(f"'timestamp' must be a number of milliseconds, got "
                                     f"{stamp!r}")
            if stamp < last:
                raise BadRecordError(f"timestamp {stamp!r} ms is earlier than the one before "
                                     f"it ({last:g} ms); the trace must be sorted by time")
            length = count_field("input_length", record["input_length"], minimum=1)
            output = count_field("output_length", record["output_length"], minimum=1)
            ids = hash_id_chain(record["hash_ids"], length, block_tokens)
        except BadRecordError as error:
            bad.reject(f"line {lineno}", str(error))
            continue
        last = float(stamp)
        ends = [min((j + 1) * block_tokens, length) for j in range(len(ids))]
        builder.add(length, output, ids, ends, 0, lineno, "", float(stamp) / 1000.0)
    bad.finish(len(builder.inputs))
    return builder.build(
        True, record_unit="line", path=str(file), name=name or file.stem,
        source=f"Mooncake trace {file} ({block_tokens}-token hash blocks, timestamps)",
        skipped=bad.skipped,
    )


class _Ids:
    """Consecutive ids for (group, block index) keys, and fresh ones."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, int, int], int] = {}
        self._next = 0

    def keyed(self, group: str, index: int, end: int) -> int:
        key = (group, index, end)
        found = self._keys.get(key)
        if found is None:
            found = self._keys[key] = self._next
            self._next += 1
        return found

    def fresh(self, count: int = 1) -> range:
        """``count`` new consecutive ids."""
        start = self._next
        self._next += count
        return range(start, start + count)


def _block_ends(start: int, stop: int, block_tokens: int) -> range | list[int]:
    """Ends of the blocks that cover tokens ``start`` to ``stop``: every ``block_tokens``
    from ``start``, the last one at ``stop``."""
    if stop <= start:
        return []
    ends = range(start + block_tokens, stop, block_tokens)
    return [*ends, stop]


def _chain(ids: _Ids, group: str | None, shared: int, prompt: int, block_tokens: int
           ) -> tuple[list[int], list[int]]:
    """Block ids and ends of a prompt whose first ``shared`` tokens are shared by ``group``
    (``None``: the request's own). Shared blocks are ``block_tokens`` long, the last one ends at
    ``shared``; the rest of the prompt follows in blocks of ``block_tokens``."""
    shared_ends = _block_ends(0, shared, block_tokens)
    rest_ends = _block_ends(max(shared, 0), prompt, block_tokens)
    if group is None:
        out_ids = list(ids.fresh(len(shared_ends) + len(rest_ends)))
    else:
        out_ids = [ids.keyed(group, index, end) for index, end in enumerate(shared_ends)]
        out_ids.extend(ids.fresh(len(rest_ends)))
    return out_ids, [*shared_ends, *rest_ends]


def requests_from_workload(
    workload: Workload, kind: str, *, block_tokens: int = DEFAULT_BLOCK_TOKENS,
    preloaded: bool = False, path: str = "",
) -> RequestTrace:
    """Prefix-block chains for a workload read by the ShareGPT, document-QA or table loader
    (``kind``; the rules are in the module docstring). ``preloaded``: document-QA documents are
    in the host tier before their first question (the loader's ``preloaded`` option)."""
    if kind not in ("sharegpt", "docqa", "table"):
        raise KvroofError(f"kind: expected sharegpt, docqa or table, got {kind!r}")
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int) or block_tokens < 1:
        raise KvroofError(f"block_tokens must be a positive integer, got {block_tokens!r}")
    new = workload.new_tokens.tolist()
    cached = workload.cached_tokens.tolist()
    groups = workload.group_id.tolist()
    documents: dict[str, int] = {}
    if kind == "docqa":  # a document's length is the K of any question that reuses it
        for g, k in zip(groups, cached, strict=True):
            documents[g] = max(documents.get(g, 0), k)
    ids = _Ids()
    builder = _Builder()
    for i, (t, k, group) in enumerate(zip(new, cached, groups, strict=True)):
        prompt = t + k
        if prompt < 1:
            raise KvroofError(f"{path or workload.name}: row {i + 1}: the prompt is empty "
                              "(T + K = 0)")
        key: str | None = group if group else None
        preload_tokens = 0
        if kind == "sharegpt":
            shared = prompt
        elif kind == "docqa":
            shared = min(documents.get(group, 0), prompt)
            preload_tokens = shared if preloaded else 0
        else:
            shared = k
            preload_tokens = k
        chain, ends = _chain(ids, key, shared, prompt, block_tokens)
        preload = bisect.bisect_right(ends, preload_tokens)  # ends ascend
        builder.add(prompt, int(workload.output_tokens[i]), chain, ends, preload, i + 1, group)
    times = workload.arrival_time
    timed = times is not None and bool(np.any(np.isfinite(times)))
    if timed:
        assert times is not None
        builder.times = array("d", times.tolist())
    unit = {"sharegpt": "conversation", "docqa": "document", "table": "row"}[kind]
    return builder.build(
        timed, record_unit="row", path=path, name=workload.name,
        source=f"{workload.source}; {block_tokens}-token prefix blocks built per {unit}",
        synthetic=workload.synthetic, skipped=workload.skipped,
    )


def load_requests(path: str | Path, format: str | None = None, *, skip_bad: bool = False,
                  block_tokens: int | None = None, **options: Any) -> RequestTrace:
    """A request trace from any workload file (format guessed when ``None``); ``options`` go to
    the workload loader (e.g. ``tokenizer``, ``preloaded``)."""
    from kvroof.workload.formats import guess_format, load_workload

    fmt = guess_format(path) if format is None else format
    if fmt == "mooncake":
        if options:
            raise KvroofError(f"option {sorted(options)[0]!r} does not apply to the mooncake "
                              "format")
        return load_mooncake_requests(path, skip_bad=skip_bad,
                                      block_tokens=block_tokens or MOONCAKE_BLOCK_TOKENS)
    workload = load_workload(path, fmt, skip_bad=skip_bad, **options)
    return requests_from_workload(workload, fmt, block_tokens=block_tokens or
                                  DEFAULT_BLOCK_TOKENS,
                                  preloaded=bool(options.get("preloaded")), path=str(path))
