"""Mooncake-style traces (JSON Lines) -> requests with K from a simulated prefix cache.

Each line: ``timestamp`` (milliseconds), ``input_length``, ``output_length`` and ``hash_ids``,
the ids of the prompt's blocks of :data:`BLOCK_TOKENS` tokens in order (Mooncake's FAST'25
traces: remapped prefix-block hashes, 512-token blocks). A block id stands for the block and
everything before it, so a request reuses the *leading* blocks that are in the cache.

Per request, in file order:

- ``matched`` = how many leading ``hash_ids`` are in the cache (it stops at the first miss).
- ``K = min(matched * block, input_length - 1)``: the last block may be partial, and an engine
  always computes at least one token (vLLM recomputes the last token even on a full hit, to
  get the logits), so ``K <= input_length - 1`` and ``T = input_length - K >= 1``.
- Then every block of the request is in the cache.

Cache: unlimited (``lru_tokens=None``), or an LRU of ``lru_tokens // block`` blocks. Within a
request the blocks are touched from last to first, so its leading blocks (those most likely
to be reused) are the last of its blocks to be evicted, as in vLLM's free-block queue.

``arrival_time`` = ``timestamp / 1000`` seconds; ``output_tokens`` = ``output_length``. A trace
whose timestamps go backwards is still simulated in file order, with a warning. A line with
more ``hash_ids`` than ``ceil(input_length / block)``, or an id written twice in one chain, is
bad; fewer is accepted (the tokens past the last id can never be reused).
"""

from __future__ import annotations

import math
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

from kvroof.errors import KvroofError, short_repr
from kvroof.workload.reading import (
    BadRecordError,
    BadRecords,
    count_field,
    hash_id_chain,
    iter_json_lines,
    plain_name,
)
from kvroof.workload.records import Workload, WorkloadBuilder

__all__ = ["BLOCK_TOKENS", "PrefixCache", "load_mooncake"]

BLOCK_TOKENS = 512
"""Tokens per hash block in Mooncake's traces (FAST25-release/README.md)."""


class PrefixCache:
    """Block ids seen so far: all of them, or the most recently used ``capacity`` blocks."""

    def __init__(self, capacity: int | None = None) -> None:
        if capacity is not None and capacity < 0:
            raise KvroofError(f"cache capacity must be >= 0 blocks, got {capacity}")
        self.capacity = capacity
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def __contains__(self, block: object) -> bool:
        return block in self._blocks

    def match(self, blocks: list[int]) -> int:
        """How many leading ``blocks`` are cached."""
        matched = 0
        for block in blocks:
            if block not in self._blocks:
                break
            matched += 1
        return matched

    def insert(self, blocks: list[int]) -> None:
        """Mark ``blocks`` as just used (last to first), evicting the least recently used."""
        if self.capacity is None:
            self._blocks.update(dict.fromkeys(blocks))
            return
        for block in reversed(blocks):
            self._blocks[block] = None
            self._blocks.move_to_end(block)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)


def _timestamp(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRecordError(
            f"'timestamp' must be a number of milliseconds, got {short_repr(value)}")
    return float(value)


def _field(record: dict[str, Any], name: str) -> Any:
    if name not in record:
        raise BadRecordError(f"missing field {name!r}")
    return record[name]


def load_mooncake(
    path: str | Path,
    *,
    lru_tokens: int | None = None,
    block_tokens: int = BLOCK_TOKENS,
    skip_bad: bool = False,
    name: str | None = None,
) -> Workload:
    """Requests of a Mooncake-style trace, K from a prefix cache (see the module docstring)."""
    if isinstance(block_tokens, bool) or not isinstance(block_tokens, int) or block_tokens < 1:
        raise KvroofError(f"block_tokens must be a positive integer, got {block_tokens!r}")
    if lru_tokens is not None and (isinstance(lru_tokens, bool) or lru_tokens < 0):
        raise KvroofError(f"lru_tokens must be >= 0 tokens, got {lru_tokens!r}")
    if lru_tokens is not None and 0 < lru_tokens < block_tokens:
        raise KvroofError(f"lru_tokens {lru_tokens:,} holds no whole {block_tokens}-token block "
                          f"(0 for no cache, or at least {block_tokens})")
    file = Path(path)
    cache = PrefixCache(None if lru_tokens is None else lru_tokens // block_tokens)
    bad = BadRecords(file, skip_bad)
    builder = WorkloadBuilder(timed=True)
    backwards = 0
    last_time = -math.inf
    for lineno, record in iter_json_lines(file, bad):
        try:
            time_ms = _timestamp(_field(record, "timestamp"))
            length = count_field("input_length", _field(record, "input_length"), minimum=1)
            output = count_field("output_length", _field(record, "output_length"))
            blocks = hash_id_chain(_field(record, "hash_ids"), length, block_tokens)
        except BadRecordError as error:
            bad.reject(f"line {lineno}", str(error))
            continue
        cached = min(cache.match(blocks) * block_tokens, length - 1)
        cache.insert(blocks)
        if time_ms < last_time:
            backwards += 1
        last_time = max(last_time, time_ms)
        builder.add(length - cached, cached, output, "", time_ms / 1000.0)
    bad.finish(len(builder))
    if backwards:
        warnings.warn(
            f"{file}: {backwards} request(s) have an earlier timestamp than one before them; "
            "the cache was simulated in file order",
            UserWarning,
            stacklevel=2,
        )
    capacity = (
        "unlimited cache" if lru_tokens is None
        else f"LRU cache of {cache.capacity} blocks = {(cache.capacity or 0) * block_tokens} "
        "tokens"
    )
    source = f"Mooncake trace {file} ({block_tokens}-token blocks, {capacity})"
    return builder.build(name or plain_name(file).stem, source, skipped=bad.skipped)
