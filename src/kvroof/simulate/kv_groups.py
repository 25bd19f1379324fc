"""KV cache groups of a hybrid model (full-attention and sliding-window layers) as vLLM v1's
hybrid KV cache manager keeps them, in one block pool.

Sources (github.com/vllm-project/vllm):

- vllm/v1/core/kv_cache_utils.py (``_get_kv_cache_groups_uniform_page_size``,
  ``get_kv_cache_config_from_groups``, ``get_num_blocks``; commit
  001cabc1be16a59a70d720ed61a13b678c060a18): layers of one spec form groups of ``group_size``
  layers (the fewest layers of any spec, or the most when the most are under 1.5x the fewest;
  1.25x before vLLM PR 36684, as kvroof still has it), so a spec with ``L`` layers gets
  ``ceil(L / group_size)`` groups, in the order of each spec's first layer; every group shares
  one pool of ``memory // page_size // group_size`` blocks (``page_size`` one layer's), a block
  holding ``block_size`` tokens of ``group_size`` layers.
- vllm/v1/core/single_type_kv_cache_manager.py (commit 129ab7c60cbb8eb11e875373e67f7e521b74aa30):
  ``SlidingWindowManager.get_num_skipped_tokens(n) = max(0, n - W + 1)``;
  ``remove_skipped_blocks`` frees the skipped blocks (highest index first, still hashed) into
  the free queue when the request's next allocation starts (``KVCacheManager.allocate_slots``);
  ``find_longest_cache_hit`` scans from the right for ``cdiv(W - 1, block_size)`` contiguous
  cached blocks ending at the hit point (else the cached run from the first block on), with the
  full-attention group's hit as the longest allowed
  (``HybridKVCacheCoordinator.find_longest_cache_hit`` in vllm/v1/core/kv_cache_coordinator.py,
  commit 52b9a57da84e0b9e3ee807f1fcbe5f5a2aec853f). ``KVCacheCoordinator.free`` there frees a
  finished request's groups in group order; gpt-oss and Gemma 2/3 start with a window layer, so
  its window blocks queue ahead of its full ones.

kvroof's pool counts *units*: one token of one KV cache group (``group_size`` layers,
``unit_bytes`` bytes). A token of the full-attention layers takes ``full`` units (their
groups), a held token of the window layers ``window_units``. A request's window layers hold the
positions from ``max(0, a - need)`` on, ``a`` the tokens in KV when its next chunk is allocated
and ``need = cdiv(W - 1, 16) x 16`` (vLLM keeps the ``W - 1`` positions the next token attends
to, in whole 16-token blocks); a decoding request holds ``need + 1`` (its window and the token
being decoded). What falls behind is freed; the window part of a prompt block (its last ``need``
tokens, which a later hit at that block's end needs) joins the HBM cache unpinned, in the LRU
queue at the time it is freed, so it is evicted before the blocks its request frees later.
A prompt block's cache key in the window group is ``~block_id`` (block ids are non-negative).

Handled this way: one full-attention kind plus one sliding-window kind of equal per-layer KV
bytes (gpt-oss, Gemma 2/3, Mistral-style hybrids), with or without linear layers (their fixed
state per request). Other mixes (chunked-local layers, several window sizes, window layers only,
unequal page sizes) keep the old rule (every layer for every token) with a note saying so.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

from kvroof.cost.deployment import Deployment
from kvroof.cost.groups import layer_groups
from kvroof.cost.kv_terms import holding
from kvroof.simulate.memory import HbmPool
from kvroof.simulate.request import Request

__all__ = ["BLOCK_TOKENS", "KvGroups", "close_window", "kv_groups", "slide_window", "window_hit"]

BLOCK_TOKENS = 16
"""vLLM's default KV block size in tokens (``CacheConfig.block_size``, vllm/config/cache.py)."""


@dataclass(frozen=True)
class KvGroups:
    """The pool's unit and what each kind of layer takes of it."""

    unit_bytes: float
    """Bytes (per TP rank) of one unit: one token of ``group_size`` layers."""
    group_size: int
    full: int
    """Units one token takes in the full-attention groups."""
    window: int
    """The window ``W`` of the sliding-window layers, in tokens."""
    window_units: int
    """Units one held token takes in the sliding-window groups."""

    @property
    def need(self) -> int:
        """Tokens of window blocks a hit needs before its hit point: ``cdiv(W - 1, 16) x 16``."""
        return -(-(self.window - 1) // BLOCK_TOKENS) * BLOCK_TOKENS


def kv_groups(dep: Deployment) -> tuple[KvGroups | None, str]:
    """The hybrid pool of ``dep`` (None where the old rule applies) and a note saying why."""
    hold = dep.terms.hold
    if not hold.windows and not hold.chunks:
        return None, ""
    if hold.chunks or len(hold.windows) != 1 or not hold.per_token:
        return None, ("window and chunk layers are allocated for every token (kvroof models "
                      "vLLM's hybrid groups for one full and one sliding-window kind only)")
    full_layers = window_layers = 0
    span = 0.0
    for group in layer_groups(dep.model, dep.mla_mode):
        if not group.kv_bytes_per_position(dep.kv_dtype):
            continue
        holds = holding(group, dep.local_kv)
        if holds == "all":
            full_layers += group.count
        elif holds == "window":
            window_layers += group.count
            span = group.span
    window_bytes = hold.windows[0][1]
    per_full, per_window = hold.per_token / full_layers, window_bytes / window_layers
    if not math.isclose(per_full, per_window, rel_tol=1e-9):
        return None, ("window layers are allocated for every token (their per-layer KV bytes "
                      "differ from the full layers'; vLLM unifies such pages, kvroof does not)")
    fewest, most = min(full_layers, window_layers), max(full_layers, window_layers)
    size = most if most < 1.5 * fewest else fewest  # _get_kv_cache_groups_uniform_page_size
    groups = KvGroups(unit_bytes=size * per_full, group_size=size,
                      full=-(-full_layers // size), window=int(span),
                      window_units=-(-window_layers // size))
    return groups, (f"hybrid KV groups as vLLM v1: {groups.full} full-attention and "
                    f"{groups.window_units} sliding-window (W {groups.window}) group(s) of "
                    f"{size} layers in one pool; window blocks freed behind the window")


def window_hit(pool: HbmPool, request: Request, blocks: int, need: int) -> tuple[int, list[int]]:
    """The longest hit of at most ``blocks`` leading blocks whose window part is cached (the
    blocks ending within ``need`` tokens before the hit point), and those window keys."""
    cached = pool.cached
    ids = request.block_ids
    ends = request.block_ends
    k = blocks
    while k > 0:
        low = ends[k - 1] - need
        j = k - 1
        while True:
            if ~ids[j] not in cached:
                break
            if j == 0 or ends[j - 1] <= low:
                return k, [~ids[i] for i in range(j, k)]
            j -= 1
        k = j  # a missing window block: no hit point at or after its end
    return 0, []


def _release(pool: HbmPool, request: Request, groups: KvGroups, old: int, new: int) -> None:
    """Free the request's window positions ``[old, new)``; the window part of each prompt
    block ending in ``(old, new]`` joins the cache unpinned (highest index first)."""
    tokens = new - old
    units = tokens * groups.window_units
    request.window -= tokens
    request.private -= units
    ends = request.block_ends
    first = bisect_right(ends, old)
    last = bisect_right(ends, new)
    kept = 0
    if pool.caching and last > first:
        need = groups.need
        ids = request.block_ids
        keys: list[int] = []
        sizes: list[int] = []
        for j in range(last - 1, first - 1, -1):
            end = ends[j]
            size = min(end - (ends[j - 1] if j else 0), need)
            if end - size >= old:  # its whole window part is this request's own
                keys.append(~ids[j])
                sizes.append(size * groups.window_units)
        kept = pool.insert_free(keys, sizes)
    pool.release(units - kept)


def slide_window(pool: HbmPool, request: Request, groups: KvGroups, computed: int) -> None:
    """Free what falls behind the window when ``computed`` tokens are in KV (vLLM's
    ``remove_skipped_blocks`` at the start of an allocation)."""
    start = computed - groups.need
    if start > request.window_from:
        _release(pool, request, groups, request.window_from, start)
        request.window_from = start


def close_window(pool: HbmPool, request: Request, groups: KvGroups) -> None:
    """The request leaves (finished or preempted): its window positions are freed, the window
    parts of its cached prompt blocks join the cache (before its full blocks, as vLLM frees
    groups in group order and gpt-oss and Gemma 2/3 start with a window layer)."""
    if request.window:
        upto = request.block_ends[request.cached - 1] if request.cached else 0
        start = request.window_from
        if upto > start:
            _release(pool, request, groups, start, upto)
            request.window_from = upto
        if request.window:
            pool.release(request.window * groups.window_units)
            request.private -= request.window * groups.window_units
            request.window = 0


def chunk_window(request: Request, groups: KvGroups, n: int, final: bool) -> int:
    """Window tokens to allocate with a chunk of ``n`` tokens (after :func:`slide_window`); the
    last chunk also takes the decode token's and tops the window up to ``need + 1``."""
    if not final:
        return n
    held = request.window + n + 1
    top = groups.need + 1 - held
    return n + 1 + (top if top > 0 else 0)
