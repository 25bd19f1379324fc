"""Cache tiers below HBM: host DRAM and, optionally, a further tier (NVMe, CXL, a remote store).

Each is an LRU of prefix blocks with a capacity in tokens (infinite allowed). A block enters the
host tier when its write-back finishes (or at arrival, for a trace's preloaded prefixes); the
host tier's evictions drop into the tier below (demotion is not timed: it does not use the
GPU's link), whose own evictions are lost. A lookup touches what it finds. Blocks are inserted
last to first, so a prompt's leading blocks are evicted last.
"""

from __future__ import annotations

import math
from collections import OrderedDict

__all__ = ["LruTier"]


class LruTier:
    """An LRU of blocks holding at most ``capacity`` tokens."""

    __slots__ = ("blocks", "capacity", "evicted", "lower", "used")

    def __init__(self, capacity: float, lower: LruTier | None = None) -> None:
        self.capacity = capacity
        self.lower = lower
        self.blocks: OrderedDict[int, int] = OrderedDict()
        self.used = 0
        self.evicted = 0

    def __contains__(self, block: int) -> bool:
        return block in self.blocks

    def match_from(self, block_ids: list[int], start: int) -> int:
        """How many blocks from ``block_ids[start]`` on are here, consecutively."""
        blocks = self.blocks
        count = 0
        for i in range(start, len(block_ids)):
            if block_ids[i] not in blocks:
                break
            count += 1
        return count

    def touch(self, block_ids: list[int]) -> None:
        blocks = self.blocks
        for block in reversed(block_ids):
            blocks.move_to_end(block)

    def insert(self, block_ids: list[int], sizes: list[int]) -> None:
        """Add (or refresh) blocks, evicting the least recently used ones beyond capacity."""
        if self.capacity <= 0:
            return
        blocks = self.blocks
        if blocks.keys().isdisjoint(block_ids) and max(sizes, default=0) <= self.capacity:
            # all new and each fits (the common case): one update in C, last block first
            blocks.update(zip(reversed(block_ids), reversed(sizes), strict=True))
            self.used += sum(sizes)
        else:
            for i in range(len(block_ids) - 1, -1, -1):
                block = block_ids[i]
                if block in blocks:
                    blocks.move_to_end(block)
                    continue
                size = sizes[i]
                if size > self.capacity:
                    continue
                blocks[block] = size
                self.used += size
        if self.used > self.capacity and not math.isinf(self.capacity):
            used = self.used
            capacity = self.capacity
            popitem = blocks.popitem
            demoted: list[tuple[int, int]] = []
            while used > capacity:
                item = popitem(last=False)
                used -= item[1]
                demoted.append(item)
            self.used = used
            self.evicted += len(demoted)
            if self.lower is not None:
                demoted.reverse()
                self.lower.insert([block for block, _ in demoted], [size for _, size in demoted])
