"""vLLM's hybrid KV cache groups for a sliding-window model (issue 21, cause 3), on gpt-oss-120b
(18 full-attention layers and 18 sliding-window layers of W = 128, 2,048 bytes a token per layer
in bf16 on one H100: kvroof.cost's layer groups). The rules are vLLM's
(vllm/v1/core/single_type_kv_cache_manager.py at commit
129ab7c60cbb8eb11e875373e67f7e521b74aa30, kv_cache_utils.py at
001cabc1be16a59a70d720ed61a13b678c060a18; docs/simulate.md, "Hybrid and sliding-window models")."""

from __future__ import annotations

from kvroof.cost.deployment import deployment
from kvroof.simulate import SimSettings
from kvroof.simulate.request import DECODE
from kvroof.simulate.resources import replica_resources

from .helpers import REG, mooncake
from .replica_driver import drive, make_engine, request
from .test_fast_forward import _both, assert_same

GPT_OSS = deployment("gpt-oss-120b", accelerator="h100", registry=REG)
LAYER_BYTES = 2048  # 2 (K, V) x 8 KV heads x 64 head dim x 2 bytes (bf16), gpt-oss config.json
PREFIX_BLOCKS = 32  # 32 blocks of 500 tokens: the 16,000-token shared prefix


def test_capacity_counts_one_group_per_layer_kind() -> None:
    """vLLM groups 18 full and 18 window layers into two groups of 18 layers sharing one pool
    (group size 18, as 18 < 1.5 x 18): a block of 16 tokens takes 16 x 18 x 2,048 bytes, and a
    long prompt takes one block per 16 tokens in the full group plus about 9 in the window
    group. So the pool holds space / (18 x 2,048) tokens of context where the old rule (every
    layer for every token) held space / (36 x 2,048): twice as many."""
    settings = SimSettings()
    res = replica_resources(GPT_OSS, settings, REG)
    dep = GPT_OSS
    space = (dep.accelerator.hbm_capacity * dep.memory_utilization - dep.weight_bytes.total
             - settings.activation_reserve)
    assert res.kv_groups is not None
    assert (res.kv_groups.full, res.kv_groups.window_units, res.kv_groups.group_size) == (1, 1, 18)
    assert res.kv_groups.need == 128  # cdiv(128 - 1, 16) x 16
    assert res.hbm_tokens == int(space // (18 * LAYER_BYTES))
    old = int(space // (36 * LAYER_BYTES))
    assert res.hbm_tokens in (2 * old, 2 * old + 1)


def _shared_prefix_requests(output: int) -> list:
    ids = list(range(PREFIX_BLOCKS))
    ends = [500 * (i + 1) for i in range(PREFIX_BLOCKS)]
    first = request(0, 0.0, [*ids, 1000], [*ends, 16_256], output)
    second = request(1, 100.0, [*ids, 1001], [*ends, 16_256], output)
    return [first, second]


def test_window_blocks_are_freed_behind_the_window_during_decode() -> None:
    """A decoding request holds its window's need + 1 = 129 positions (16,128 .. 16,256) and
    nothing else privately (its prompt blocks are cached, its decode tokens are counted at its
    finish); every prompt block's window part (its last 128 tokens) joined the cache."""
    engine, done = make_engine(GPT_OSS, SimSettings(kv_tokens=60_000))
    seen: list[tuple[int, int, int]] = []

    def look(e: object) -> None:
        first = engine.running.get(0)
        if first is not None and first.state == DECODE:
            seen.append((first.window, first.window_from, first.private))

    drive(engine, _shared_prefix_requests(output=5)[:1], after_step=look)
    assert seen and all(s == (129, 16_256 - 128, 129) for s in seen)
    assert len(done) == 1
    window_keys = [key for key in engine.pool.cached if key < 0]
    assert len(window_keys) == PREFIX_BLOCKS + 1  # every prompt block, the question's too
    # after it finished: its 16,256 full-layer tokens and 33 window parts of 128 are cached
    assert engine.pool.used == 16_256 + 33 * 128


def test_a_shared_prefix_without_its_window_blocks_is_no_hbm_hit() -> None:
    """The second request shares the 16,000-token prefix. With the window parts cached the hit
    is the whole prefix. Evicting the window parts (the first evicted: freed before the full
    blocks) leaves the full blocks cached, but vLLM's window rule needs the window blocks ending
    at the hit point (the last 128 tokens of block 31); with none cached anywhere the scan finds
    no hit point, so the hit is 0 (find_longest_cache_hit returns no block)."""
    engine, _ = make_engine(GPT_OSS, SimSettings(kv_tokens=60_000))
    first, second = _shared_prefix_requests(output=5)
    drive(engine, [first])
    pool = engine.pool
    assert engine.lookup(second)[:2] == (PREFIX_BLOCKS, 16_000)
    windows = sum(entry[0] for key, entry in pool.cached.items() if key < 0)
    assert pool.allocate(pool.capacity - pool.used + windows)
    assert all(key >= 0 for key in pool.cached)  # only the window parts went
    assert pool.match(second.block_ids) == PREFIX_BLOCKS
    assert engine.lookup(second)[:2] == (0, 0)


def test_a_hit_needs_only_the_window_part_at_its_end() -> None:
    """Evicting every window part but block 31's keeps the 16,000-token hit: the window needs
    128 tokens before the hit point, all inside block 31 (500 tokens)."""
    engine, _ = make_engine(GPT_OSS, SimSettings(kv_tokens=60_000))
    first, second = _shared_prefix_requests(output=5)
    drive(engine, [first])
    pool = engine.pool
    for block in range(PREFIX_BLOCKS - 1):
        size = pool.cached.pop(~block)[0]
        del pool.lru[~block]
        pool.evictable -= size
        pool.used -= size
    assert engine.lookup(second)[:2] == (PREFIX_BLOCKS, 16_000)
    pool.cached.pop(~(PREFIX_BLOCKS - 1))
    assert engine.lookup(second)[:2] == (0, 0)


def test_fast_forward_equals_stepping_for_a_hybrid_model() -> None:
    """Mooncake's first 60 requests on two gpt-oss replicas with small KV spaces (evictions and
    preemptions): fast-forwarded decode runs find exactly what stepping finds."""
    for kv in (20_000, 60_000):
        sim = SimSettings(kv_tokens=kv, cache_policy="load", dram_cache=2e10)
        fast, slow = _both(mooncake(60), [GPT_OSS, GPT_OSS], sim, skip_bad=True)
        assert_same(fast, slow)
