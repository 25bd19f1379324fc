"""Blocks loaded from host DRAM join the HBM prefix cache when they land, and a request needing
blocks that another request's load is bringing waits for that load instead of loading them
again (vLLM's OffloadingConnector: ``get_num_new_matched_tokens`` returns ``None`` while a hit
block is in ``_blocks_being_loaded``, PR github.com/vllm-project/vllm/pull/29087; the scheduler
caches the loaded blocks once the load finishes, ``_update_waiting_for_remote_kv``)."""

from __future__ import annotations

import pytest

from kvroof.simulate.engine import Engine
from kvroof.simulate.request import Request
from kvroof.simulate.settings import LoadMode, SimSettings

from .helpers import paper_testbed
from .replica_driver import blocks, drive, make_engine, request

DEP = paper_testbed("llama-3.1-8b")


def _two_sharing(mode: LoadMode, caching: bool = True) -> tuple[Engine, Request, Request]:
    """A and B arrive together; both prompts are eight 512-token blocks whose first six (3,072
    tokens) are in host DRAM (the trace's preloaded prefix)."""
    settings = SimSettings(load_mode=mode, fast_forward=False, offload_store="none",
                           prefix_caching=caching)
    engine, _ = make_engine(DEP, settings)
    ids, ends = blocks(1, 8, 512)
    a = request(0, 0.0, ids, ends, 2, preload=6)
    b = request(1, 0.0, [*ids[:6], 100, 101], ends, 2, preload=6)
    drive(engine, [a, b])
    return engine, a, b


@pytest.mark.parametrize("mode", ["async", "sync", "layerwise"])
def test_one_load_for_two_requests(mode: LoadMode) -> None:
    """Hand derivation: A loads the 3,072 shared tokens (one copy on the host-to-device link,
    busy for the cost model's load time of 3,072 tokens); B finds them in HBM. ``sync`` and
    ``layerwise``: A's loaded blocks are cached when A is scheduled, so B, scheduled next in the
    same step, hits them (the step waits for the load either way). ``async``: B waits for A's
    load (it does not start a second one) and both join the first step after it lands."""
    engine, a, b = _two_sharing(mode)
    assert engine.h2d.copies == 1
    assert engine.h2d.busy == pytest.approx(engine.m.load_time(3072), rel=1e-12)
    assert (a.host_hit, a.hbm_hit) == (3072, 0)
    assert (b.host_hit, b.hbm_hit) == (0, 3072)
    assert b.first_token_time == a.first_token_time
    assert b.computed == 1024 and a.computed == 1024


def test_without_prefix_caching_each_request_loads() -> None:
    """With prefix caching off there is no HBM cache for loaded blocks to join (vLLM keeps no
    ``_blocks_being_loaded`` then either): two loads of 3,072 tokens, back to back on the
    link."""
    engine, a, b = _two_sharing("async", caching=False)
    assert engine.h2d.copies == 2
    assert engine.h2d.busy == pytest.approx(2 * engine.m.load_time(3072), rel=1e-12)
    assert a.host_hit == b.host_hit == 3072


def test_a_later_request_hits_loaded_blocks_in_hbm() -> None:
    """C arrives after A's (async) load landed and A finished: A's loaded blocks stayed in the
    HBM cache (unpinned, nothing evicted them), so C takes all six as an HBM hit and the link
    carries one load in all."""
    settings = SimSettings(load_mode="async", fast_forward=False, offload_store="none")
    engine, _done = make_engine(DEP, settings)
    ids, ends = blocks(1, 8, 512)
    a = request(0, 0.0, ids, ends, 2, preload=6)
    c = request(1, 10.0, [*ids[:6], 200, 201], ends, 2, preload=6)
    drive(engine, [a, c])
    assert a.finish_time < 10.0
    assert (c.hbm_hit, c.host_hit) == (3072, 0)
    assert engine.h2d.copies == 1
