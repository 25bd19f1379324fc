"""Request traces for the serving simulation, built from each source's records.

A :class:`~kvroof.workload.trace.RequestTrace` (defined in :mod:`kvroof.workload.trace`,
imported here too) holds each request's prompt as a chain of prefix blocks; this module builds
one per source (:func:`load_requests` picks by format):

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
from pathlib import Path
from typing import Any

import numpy as np

from kvroof.errors import KvroofError
from kvroof.workload.reading import (
    BadRecordError,
    BadRecords,
    count_field,
    hash_id_chain,
    iter_json_lines,
)
from kvroof.workload.records import Workload
from kvroof.workload.trace import RequestTrace, TraceBuilder

__all__ = [
    "MOONCAKE_BLOCK_TOKENS",
    "MOONCAKE_SLICE",
    "RequestTrace",
    "load_mooncake_requests",
    "load_requests",
    "requests_from_workload",
]

MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per hash block in Mooncake's traces (FAST25-release/README.md)."""

MOONCAKE_SLICE = Path(__file__).resolve().parent / "data" / "mooncake_conversation_5min.jsonl"
"""The first five minutes (918 requests) of Mooncake's real conversation trace, shipped with
kvroof (Apache-2.0; attribution in ``data/README.md`` beside it)."""

DEFAULT_BLOCK_TOKENS = 512
"""Tokens per prefix block built for ShareGPT, document-QA and table traces: Mooncake's
granularity, so every source is matched alike."""


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
    builder = TraceBuilder()
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
    builder = TraceBuilder()
    record_unit = "row" if kind == "table" else "request"  # a user turn, a question
    for i, (t, k, group) in enumerate(zip(new, cached, groups, strict=True)):
        prompt = t + k
        if prompt < 1:
            raise KvroofError(f"{path or workload.name}: {record_unit} {i + 1}: the prompt is "
                              "empty (T + K = 0)")
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
        timed, record_unit=record_unit, path=path, name=workload.name,
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
