"""The LRU structures of the simulation (host tier and HBM pool) against plain reference
implementations written here block by block: random operation sequences must leave the same
blocks, in the same order, with the same token counts. The library takes bulk shortcuts when
every block is new; these references never do."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from kvroof.simulate.memory import HbmPool
from kvroof.simulate.request import block_sizes
from kvroof.simulate.tiers import LruTier


class ReferenceTier:
    """One block at a time: last block first, present ones refreshed, too-large ones skipped,
    then the oldest evicted into ``lower`` (oldest demoted last, as the library documents)."""

    def __init__(self, capacity: float, lower: ReferenceTier | None = None) -> None:
        self.capacity = capacity
        self.lower = lower
        self.blocks: OrderedDict[int, int] = OrderedDict()
        self.used = 0
        self.evicted = 0

    def insert(self, ids: list[int], sizes: list[int]) -> None:
        if self.capacity <= 0:
            return
        for block, size in reversed(list(zip(ids, sizes, strict=True))):
            if block in self.blocks:
                self.blocks.move_to_end(block)
            elif size <= self.capacity:
                self.blocks[block] = size
                self.used += size
        out: list[tuple[int, int]] = []
        while self.used > self.capacity:
            block, size = self.blocks.popitem(last=False)
            self.used -= size
            self.evicted += 1
            out.append((block, size))
        if self.lower is not None and out:
            out.reverse()
            self.lower.insert([b for b, _ in out], [s for _, s in out])


@pytest.mark.parametrize("seed", range(6))
def test_tier_insert_matches_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    capacity = rng.choice([50, 300, 2000, float("inf")])
    lower, ref_lower = LruTier(400), ReferenceTier(400)
    tier, ref = LruTier(capacity, lower), ReferenceTier(capacity, ref_lower)
    for _ in range(400):
        count = rng.randint(0, 8)
        ids = rng.sample(range(60), count)  # distinct within a call, often already present
        sizes = [rng.choice([1, 16, 37, 64, 500]) for _ in ids]
        tier.insert(ids, sizes)
        ref.insert(ids, sizes)
        assert list(tier.blocks.items()) == list(ref.blocks.items())
        assert (tier.used, tier.evicted) == (ref.used, ref.evicted)
        assert list(lower.blocks.items()) == list(ref_lower.blocks.items())


@pytest.mark.parametrize("seed", range(6))
def test_hbm_insert_matches_the_reference(seed: int) -> None:
    """HbmPool.insert against its rule: a new block is cached pinned once and its tokens move
    from the request to the cache; a cached one gains a pin (leaving the LRU if it was
    evictable) and the request's own copy is freed."""
    rng = random.Random(seed)
    pool = HbmPool(10**9)
    cached: dict[int, list[int]] = {}
    lru: list[int] = []
    used = evictable = 0
    for _ in range(300):
        ids = rng.sample(range(80), rng.randint(0, 6))
        sizes = [rng.randint(1, 512) for _ in ids]
        pool.used += sum(sizes)  # the request's private copy, as the engine allocates it
        used += sum(sizes)
        pinned, moved = pool.insert(ids, sizes)
        for block, size in zip(ids, sizes, strict=True):
            if block not in cached:
                cached[block] = [size, 1]
            else:
                if cached[block][1] == 0:
                    lru.remove(block)
                    evictable -= cached[block][0]
                cached[block][1] += 1
                used -= size
        assert pinned == ids and moved == sum(sizes)
        if rng.random() < 0.7:  # a request finishes: unpin what it pinned, last block first
            pool.unpin(ids)
            for block in reversed(ids):
                cached[block][1] -= 1
                if cached[block][1] == 0:
                    lru.append(block)
                    evictable += cached[block][0]
        assert pool.cached == cached and list(pool.lru) == lru
        assert (pool.used, pool.evictable) == (used, evictable)


def test_block_sizes_from_ends() -> None:
    # hand derivation: blocks ending at 512, 1024 and 1300 hold 512, 512 and 276 tokens
    assert block_sizes([512, 1024, 1300], 0) == [512, 512, 276]
    assert block_sizes([512, 1024, 1300], 2) == [276]
    assert block_sizes([512, 1024, 1300], 3) == []
