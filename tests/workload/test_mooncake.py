"""Mooncake-style traces: K from the leading cached 512-token blocks, capped at
input_length - 1; unlimited and LRU caches, with cases worked out block by block."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvroof.errors import KvroofError
from kvroof.workload.mooncake import PrefixCache, load_mooncake
from kvroof.workload.reading import SkippedRecordsWarning

Writer = Callable[..., Path]


def req(t_ms: float, length: int, hashes: list[int], out: int = 10) -> dict[str, Any]:
    return {"timestamp": t_ms, "input_length": length, "output_length": out,
            "hash_ids": hashes}


def test_unlimited_cache(write_jsonl: Writer) -> None:
    path = write_jsonl([
        req(0, 1200, [1, 2, 3]),     # ceil(1200/512) = 3 blocks, nothing cached: K 0, T 1200
        req(100, 1500, [1, 2, 9]),   # leading 1, 2 cached: K = 2 x 512 = 1024, T = 476
        req(250, 1200, [1, 2, 3]),   # all 3 cached: min(3 x 512, 1200 - 1) = 1199, T = 1
        req(300, 1600, [7, 2, 3]),   # 2 and 3 cached but block 0 is not: K 0, T 1600
    ])
    w = load_mooncake(path)
    assert w.cached_tokens.tolist() == [0, 1024, 1199, 0]
    assert w.new_tokens.tolist() == [1200, 476, 1, 1600]
    assert w.output_tokens.tolist() == [10, 10, 10, 10]
    assert w.arrival_time is not None
    assert w.arrival_time.tolist() == [0.0, 0.1, 0.25, 0.3]  # ms / 1000
    assert "unlimited cache" in w.source


def test_lru_eviction_changes_k(write_jsonl: Writer) -> None:
    path = write_jsonl([
        req(0, 1024, [1, 2]),
        req(1, 1024, [3, 4]),
        req(2, 1024, [1, 2]),
    ])
    # Unlimited: the third request finds 1, 2: K = min(1024, 1023) = 1023.
    assert load_mooncake(path).cached_tokens.tolist() == [0, 0, 1023]
    # LRU of 1024 tokens = 2 blocks: [3, 4] evicts 1 and 2, so the third request misses.
    lru = load_mooncake(path, lru_tokens=1024)
    assert lru.cached_tokens.tolist() == [0, 0, 0]
    assert lru.new_tokens.tolist() == [1024, 1024, 1024]
    assert "LRU cache of 2 blocks = 1024 tokens" in lru.source
    # 1500 tokens floor to 2 blocks: the same. 1536 tokens = 3 blocks: request 1 touches
    # 2 then 1 (last to first): [2, 1]; request 2 adds 4, 3: [2, 1, 4, 3], over capacity,
    # so the oldest (2) goes: [1, 4, 3]; request 3 matches block 1 only: K = 512.
    assert load_mooncake(path, lru_tokens=1500).cached_tokens.tolist() == [0, 0, 0]
    assert load_mooncake(path, lru_tokens=1536).cached_tokens.tolist() == [0, 0, 512]


def test_lru_keeps_leading_blocks(write_jsonl: Writer) -> None:
    path = write_jsonl([req(0, 1536, [1, 2, 3]), req(1, 1536, [1, 2, 5])])
    # 2-block LRU: request 1 touches 3, 2, 1 (last to first), so block 3 is evicted and the
    # leading blocks 1, 2 stay; request 2 reuses them: K = 1024, T = 512. (Touching in
    # prompt order would evict block 1 and give K = 0.)
    w = load_mooncake(path, lru_tokens=1024)
    assert w.cached_tokens.tolist() == [0, 1024]
    assert w.new_tokens.tolist() == [1536, 512]


def test_zero_capacity_caches_nothing(write_jsonl: Writer) -> None:
    path = write_jsonl([req(0, 600, [1, 2]), req(1, 600, [1, 2])])
    assert load_mooncake(path, lru_tokens=0).cached_tokens.tolist() == [0, 0]
    # less than one block holds nothing: an error rather than a cache of size 0 in disguise
    with pytest.raises(KvroofError, match="lru_tokens 511 holds no whole 512-token block"):
        load_mooncake(path, lru_tokens=511)


def test_block_size_option(write_jsonl: Writer) -> None:
    path = write_jsonl([req(0, 200, [1, 2]), req(1, 300, [1, 2, 3])])
    # 100-token blocks: request 2 reuses blocks 1, 2 = 200 tokens, T = 100
    w = load_mooncake(path, block_tokens=100)
    assert w.cached_tokens.tolist() == [0, 200]
    with pytest.raises(KvroofError, match="block_tokens must be a positive integer"):
        load_mooncake(path, block_tokens=0)
    with pytest.raises(KvroofError, match="lru_tokens must be >= 0"):
        load_mooncake(path, lru_tokens=-1)


def test_fewer_hash_ids_than_blocks(write_jsonl: Writer) -> None:
    path = write_jsonl([req(0, 2000, [1]), req(1, 2000, [1])])
    # only the first block can ever match: K = 512, T = 1488
    assert load_mooncake(path).cached_tokens.tolist() == [0, 512]


def test_prefix_cache_unit() -> None:
    cache = PrefixCache(capacity=3)
    cache.insert([1, 2, 3, 4])  # touched 4, 3, 2, 1: 4 is the oldest and goes
    assert 4 not in cache and len(cache) == 3
    assert cache.match([1, 2, 3, 4]) == 3
    assert cache.match([2, 1]) == 2
    assert cache.match([9, 1]) == 0
    with pytest.raises(KvroofError):
        PrefixCache(capacity=-1)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"input_length": 10, "output_length": 1, "hash_ids": [1]}, "missing field 'timestamp'"),
        (req(1, 0, []), "'input_length' must be >= 1"),
        (req(1, 600, [1, 2, 3]), "3 hash_ids but input_length 600 fills at most 2 blocks"),
        (req(1, 600, ["a"]), "'hash_ids' must be a list of non-negative integers"),
        (req(1, 600, [-3]), "'hash_ids' must be a list of non-negative integers"),
        (req(1, 1500, [4, 9, 4]), "hash_ids repeat 4"),   # one chain names a block once
        ({"timestamp": "x", "input_length": 1, "output_length": 1, "hash_ids": []},
         "'timestamp' must be a number"),
        ({"timestamp": 1, "input_length": 5, "hash_ids": [1]}, "missing field 'output_length'"),
    ],
)
def test_bad_lines(write_jsonl: Writer, bad: dict[str, Any], message: str) -> None:
    path = write_jsonl([req(0, 100, [1]), bad])
    with pytest.raises(KvroofError, match=f"line 2: {message}"):
        load_mooncake(path)
    with pytest.warns(SkippedRecordsWarning, match="skipped 1 bad line"):
        assert load_mooncake(path, skip_bad=True).skipped == 1


def test_docqa_file_is_not_a_trace(write_jsonl: Writer) -> None:
    path = write_jsonl([{"doc_id": "a", "document_tokens": 5, "question_tokens": 1}])
    with pytest.raises(KvroofError, match="line 1: missing field 'timestamp'"):
        load_mooncake(path)
    with pytest.raises(KvroofError, match=r"no usable lines \(1 bad line skipped"):
        load_mooncake(path, skip_bad=True)


def test_backwards_timestamps_are_reported(write_jsonl: Writer) -> None:
    path = write_jsonl([req(500, 100, [1]), req(100, 100, [1])])
    with pytest.warns(UserWarning, match="1 request.* earlier timestamp"):
        w = load_mooncake(path)
    assert w.cached_tokens.tolist() == [0, 99]  # file order: min(512, 100 - 1)
