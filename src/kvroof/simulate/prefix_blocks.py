"""When a request's prompt blocks join the HBM prefix cache: as they are scheduled, as vLLM v1
does.

vLLM caches every full block of a request when it allocates the slots of the tokens that fill it,
in the step that schedules them (``KVCacheManager.allocate_slots`` ends with
``self.coordinator.cache_blocks(request, num_tokens_to_cache)``, ``num_tokens_to_cache =
min(total_computed_tokens + num_new_tokens, request.num_tokens)``: vllm/v1/core/kv_cache_manager.py
in github.com/vllm-project/vllm at commit 003df2961dd8830c317a61f9745ccd557da9fa06). So:

- a prompt's leading blocks are shareable while its prefill is still running: a request with the
  same prefix admitted in the same step or later hits every full block scheduled so far;
- a preempted request's scheduled full blocks stay in the cache (unpinned, evictable), so it
  resumes from them as an HBM hit;
- blocks loaded from a host tier are cached with the tokens scheduled with them (``sync``,
  ``layerwise``: the step that loads them is the step that schedules the request) or, for an
  ``async`` load, when it lands (vLLM allocates them with ``delay_cache_blocks`` and caches them
  in ``_update_waiting_for_remote_kv`` once the connector reports the load finished).

kvroof's blocks are the trace's (``block_ids``, ``block_ends``: Mooncake's 512-token hash
blocks); a block is *full* once every token up to its end is scheduled. The last block of a
prompt, usually partial, is cached when the prompt's last token is scheduled (vLLM caches its
16-token blocks inside it and recomputes the tail; kvroof's coarser blocks would otherwise lose
up to 511 tokens a prompt). In a hybrid pool a block's size is in the pool's units (its tokens x
the full-attention groups); the window layers' part is cached as it falls behind the window
(:mod:`kvroof.simulate.kv_groups`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from kvroof.simulate.memory import HbmPool
from kvroof.simulate.request import Request, block_sizes

__all__ = ["cache_upto", "full_blocks", "touched_blocks"]


def full_blocks(request: Request, upto: int) -> int:
    """How many leading prompt blocks end at or before token ``upto``."""
    return bisect_right(request.block_ends, upto)


def touched_blocks(request: Request, start: int, upto: int) -> list[int]:
    """The prompt blocks from index ``start`` that hold any token before ``upto``."""
    ends = request.block_ends
    stop = min(bisect_left(ends, upto, start) + 1, len(ends)) if upto > 0 else start
    return request.block_ids[start:stop]


def cache_upto(pool: HbmPool, request: Request, upto: int) -> None:
    """Cache (and pin for ``request``) its prompt blocks that end at or before token ``upto``
    and that it does not hold yet; their tokens leave its private tokens (a block another request
    cached meanwhile is shared and the private copy freed: :meth:`HbmPool.insert`)."""
    ends = request.block_ends
    start = request.cached
    if start >= len(ends) or ends[start] > upto:
        return
    stop = bisect_right(ends, upto, start)
    sizes = block_sizes(ends[:stop], start)
    if pool.full_units != 1:  # a hybrid pool's units (kvroof.simulate.kv_groups)
        sizes = [size * pool.full_units for size in sizes]
    pinned, moved = pool.insert(request.block_ids[start:stop], sizes)
    request.pinned.extend(pinned)
    request.private -= moved
    request.cached = stop
