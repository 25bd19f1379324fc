"""HBM: the KV space of a replica (per TP rank, in tokens) and the prefix cache that lives in it.

Tokens in use = the private tokens of running requests (tokens of their prompts outside shared
prefix blocks, and their decoded tokens) + the tokens of every cached prefix block. A block is
*pinned* while a running request uses it and *evictable* otherwise; evictable blocks sit in an
LRU list and make room, oldest first, when an allocation needs it (vLLM's free-block queue with
prefix caching). A finished or preempted request unpins its blocks last to first, so its leading
blocks, the likeliest to be shared, are evicted last.

A request's prompt blocks become cached blocks as the chunks that fill them are scheduled
(:mod:`kvroof.simulate.prefix_blocks`): its private tokens for them move to the cache; a block
that another request cached meanwhile is shared and the private copy freed. vLLM allocates
16-token blocks; this pool counts tokens (the rounding wastes at most 15 tokens a request).

For a hybrid model (full-attention and sliding-window layers) the pool counts *units*, one
token of one KV cache group, as vLLM's hybrid allocator shares one block pool among its groups
(:mod:`kvroof.simulate.kv_groups`): a token of the full-attention layers takes ``full_units``
units, and the window layers' blocks that fall behind their window join the cache unpinned
(:meth:`HbmPool.insert_free`). Otherwise a unit is a token of every layer (``full_units`` 1).
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["HbmPool"]


class HbmPool:
    """KV space of ``capacity`` tokens with an LRU prefix cache (``caching`` off: no blocks are
    kept after their request)."""

    __slots__ = ("cached", "caching", "capacity", "evictable", "evicted", "full_units", "lru",
                 "used")

    def __init__(self, capacity: int, caching: bool = True, full_units: int = 1) -> None:
        self.capacity = capacity
        self.full_units = full_units  # units a token of the full-attention layers takes
        self.caching = caching
        self.used = 0
        self.cached: dict[int, list[int]] = {}  # block id -> [tokens, pins]
        self.lru: OrderedDict[int, int] = OrderedDict()  # unpinned cached blocks -> tokens
        self.evictable = 0
        self.evicted = 0

    @property
    def available(self) -> int:
        """Tokens an allocation can get (free space plus evictable blocks)."""
        return self.capacity - self.used + self.evictable

    @property
    def in_use(self) -> int:
        """Tokens held by running requests (private tokens and pinned blocks)."""
        return self.used - self.evictable

    def allocate(self, tokens: int) -> bool:
        """Take ``tokens`` tokens, evicting LRU blocks if needed; False (nothing taken) if even
        every evictable block would not make room."""
        if self.capacity - self.used >= tokens:
            self.used += tokens
            return True
        if self.available < tokens:
            return False
        lru = self.lru
        cached = self.cached
        while self.capacity - self.used < tokens:
            block, size = lru.popitem(last=False)
            del cached[block]
            self.used -= size
            self.evictable -= size
            self.evicted += 1
        self.used += tokens
        return True

    def release(self, tokens: int) -> None:
        self.used -= tokens

    def match(self, block_ids: list[int]) -> int:
        """How many leading blocks are cached."""
        cached = self.cached
        count = 0
        for block in block_ids:
            if block not in cached:
                break
            count += 1
        return count

    def pin(self, block_ids: list[int]) -> None:
        cached = self.cached
        lru = self.lru
        for block in block_ids:
            entry = cached[block]
            if entry[1] == 0:
                del lru[block]
                self.evictable -= entry[0]
            entry[1] += 1

    def unpin(self, block_ids: list[int]) -> None:
        cached = self.cached
        lru = self.lru
        for block in reversed(block_ids):
            entry = cached[block]
            entry[1] -= 1
            if entry[1] == 0:
                lru[block] = entry[0]
                self.evictable += entry[0]

    def insert(self, block_ids: list[int], sizes: list[int]) -> tuple[list[int], int]:
        """Cache a request's prompt blocks (``sizes`` tokens each), pinned by it:
        returns the blocks it now pins and the private tokens it gives up for them (tokens of
        blocks another request cached meanwhile are freed, the others move to the cache)."""
        cached = self.cached
        if cached.keys().isdisjoint(block_ids):  # none cached yet (the common case)
            cached.update({block: [size, 1] for block, size in zip(block_ids, sizes, strict=True)})
            return list(block_ids), sum(sizes)
        lru = self.lru
        pinned: list[int] = []
        moved = 0
        for block, size in zip(block_ids, sizes, strict=True):
            entry = cached.get(block)
            if entry is None:
                cached[block] = [size, 1]
            else:
                if entry[1] == 0:
                    del lru[block]
                    self.evictable -= entry[0]
                entry[1] += 1
                self.used -= size  # the request's own copy is freed
            pinned.append(block)
            moved += size
        return pinned, moved

    def insert_free(self, keys: list[int], sizes: list[int]) -> int:
        """Cache blocks a request frees (``sizes`` units each), unpinned at the LRU's newest end
        in this order: returns the units they keep (a key already cached keeps its entry and the
        copy is not kept)."""
        cached = self.cached
        lru = self.lru
        kept = 0
        for key, size in zip(keys, sizes, strict=True):
            if key in cached:
                continue
            cached[key] = [size, 0]
            lru[key] = size
            kept += size
        self.evictable += kept
        return kept
