"""One request's state inside a simulated replica.

States: ``WAITING`` (queued), ``LOADING`` (async: blocks allocated, its cached KV on the way;
vLLM's WAITING_FOR_REMOTE_KVS), ``READY`` (loaded, waiting for a batch slot), ``PREFILL``
(running, prompt chunks left), ``DECODE`` (running, one token per iteration), ``DONE``.

Token bookkeeping of the last admission (a preempted request is admitted again and recomputes;
``preemptions`` counts how often): ``hbm_hit`` tokens found in HBM, ``host_hit`` and
``tier_hit`` loaded from the host tiers, ``split_recomputed`` cached tokens recomputed on
purpose (the ``split`` policy), ``computed`` the rest of the prompt, so that
``hbm_hit + host_hit + tier_hit + split_recomputed + computed == prompt`` where ``prompt`` is
the input plus any output tokens generated before a preemption.
"""

from __future__ import annotations

import operator

__all__ = ["DECODE", "DONE", "LOADING", "PREFILL", "READY", "WAITING", "Request", "block_sizes"]

WAITING = 0
LOADING = 1
READY = 2
PREFILL = 3
DECODE = 4
DONE = 5


def block_sizes(ends: list[int], start: int) -> list[int]:
    """Tokens in each block from ``start`` on, given every block's end position."""
    tail = ends[start:]
    if not tail:
        return []
    return list(map(operator.sub, tail, [ends[start - 1] if start else 0, *tail[:-1]]))


class Request:
    """Mutable per-request state (slots: millions of these must stay small)."""

    __slots__ = (
        "arrival", "block_ends", "block_ids", "cached", "computed", "context", "decode_base",
        "finish_step", "finish_time", "first_token_time", "generated", "hbm_blocks",
        "hbm_hit", "host_hit", "index", "input", "join_step", "load_done", "load_time",
        "loaded", "loading", "output", "passed", "pinned", "preemptions", "prefilled", "preload",
        "preload_sizes", "private",
        "prompt", "replica", "saved", "split_recomputed", "state", "stored", "tier_hit", "user",
        "window", "window_from",
    )

    def __init__(self, index: int, arrival: float, input_tokens: int, output_tokens: int,
                 block_ids: list[int], block_ends: list[int], user: int = -1,
                 preload: int = 0) -> None:
        self.index = index
        self.arrival = arrival
        self.input = input_tokens
        self.output = output_tokens
        self.block_ids = block_ids
        self.block_ends = block_ends
        self.user = user
        self.preload = preload  # leading blocks in host DRAM whenever the request looks
        self.preload_sizes = block_sizes(block_ends[:preload], 0)
        self.state = WAITING
        self.replica = -1
        self.prompt = input_tokens  # tokens to prefill at the next admission
        self.generated = 0
        self.hbm_hit = 0
        self.host_hit = 0
        self.tier_hit = 0
        self.split_recomputed = 0
        self.computed = 0
        self.loaded = 0  # tokens loaded at this admission (host + tier)
        self.context = 0  # tokens in KV before the next prefill chunk
        self.prefilled = 0  # prompt tokens in KV (cached or computed)
        self.private = 0  # HBM tokens held outside shared prefix blocks
        self.pinned: list[int] = []  # HBM prefix blocks this request holds
        self.cached = 0  # leading prompt blocks it holds in the HBM prefix cache (= len(pinned))
        self.loading: list[int] = []  # blocks its async load brings (in flight until it lands)
        self.stored = 0  # leading prompt blocks already offered to the host store
        self.hbm_blocks = 0
        self.load_done = 0.0
        self.load_time = 0.0
        self.join_step = 0
        self.decode_base = 0
        self.finish_step = 0
        self.passed = 0
        self.preemptions = 0
        self.window = 0  # window-layer tokens it holds privately (hybrid pools only)
        self.window_from = 0  # the first position of those (kvroof.simulate.kv_groups)
        self.saved = 0  # tokens it stored to host DRAM (all admissions)
        self.first_token_time = -1.0
        self.finish_time = -1.0
