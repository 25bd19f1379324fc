"""The offload store: with a host tier, every prompt block goes to host DRAM once computed, on
the device-to-host link, whatever the profile's ``write_back`` (vLLM's OffloadingConnector stores
each new full block as computed; SGLang HiCache's default ``write_through`` likewise), unless the
profile or the settings say ``offload_store: none``."""

from __future__ import annotations

import pytest

from kvroof.errors import KvroofError
from kvroof.simulate.engine import Engine
from kvroof.simulate.request import Request
from kvroof.simulate.settings import OffloadStore, SimSettings
from kvroof.specs.engine import Engine as EngineSpec

from .helpers import REG, paper_testbed
from .replica_driver import blocks, drive, make_engine, request

VLLM = paper_testbed("llama-3.1-8b", engine="vllm-0.11-offload")


def _evict_and_return(store: OffloadStore | None) -> tuple[Engine, Request, Request, Request]:
    """5,000 tokens of KV, a 2,048-token budget, 512-token blocks. A (blocks 1-8, 4,096 tokens)
    runs alone; B (eight blocks of its own) arrives at 5 s and evicts A's blocks from HBM; C
    (A's eight blocks and one more) arrives at 10 s.

    Hand derivation: A prefills in two chunks of 2,048 tokens, each storing four full blocks
    (two stores of 2,048 tokens). A finished unpins its blocks last to first, so block 8 is the
    oldest in the LRU. B's first chunk needs 2,048 tokens with 904 free: it evicts A's blocks 8,
    7, 6; its second chunk (392 free) evicts 5, 4, 3, 2. B stores its eight blocks in two stores
    of 2,048. C finds block 1 in HBM (512 tokens), blocks 2-8 in host DRAM (3,584 tokens), and
    computes its own last block, which it stores (512 tokens)."""
    settings = SimSettings(fast_forward=False, offload_store=store, kv_tokens=5000,
                           max_num_batched_tokens=2048)
    engine, _ = make_engine(VLLM, settings)
    ids, ends = blocks(1, 8, 512)
    a = request(0, 0.0, ids, ends, 2)
    ids_b, ends_b = blocks(100, 8, 512)
    b = request(1, 5.0, ids_b, ends_b, 2)
    c = request(2, 10.0, [*ids, 300], [*ends, 4608], 2)
    drive(engine, [a, b, c])
    return engine, a, b, c


def test_vllm_profile_stores_blocks_as_computed() -> None:
    assert not VLLM.write_back  # the profile's save does not delay the step ...
    engine, a, b, c = _evict_and_return(None)  # ... yet its blocks are stored
    save = engine.saver.save_time
    assert engine.d2h.copies == 5
    assert engine.d2h.busy == pytest.approx(4 * save(2048) + save(512), rel=1e-12)
    assert (a.saved, b.saved, c.saved) == (4096, 4096, 512)
    assert engine.pool.evicted == 7 + 8  # B evicts A's blocks 2-8; C's load evicts B's eight
    assert (c.hbm_hit, c.host_hit, c.computed) == (512, 3584, 512)
    # every stored block is in host DRAM but C's, still on the link when the replica went idle
    assert all(block in engine.host for block in [*range(1, 9), *range(100, 108)])
    assert 300 not in engine.host and 300 in engine.storing


def test_store_none_keeps_host_dram_empty() -> None:
    """The same requests with ``offload_store: none``: nothing is stored, C finds only block 1
    in HBM and computes the rest."""
    engine, _, _, c = _evict_and_return("none")
    assert engine.d2h.copies == 0 and engine.d2h.busy == 0.0
    assert not engine.host.blocks
    assert (c.hbm_hit, c.host_hit, c.computed) == (512, 0, 4096)


def test_a_store_is_skipped_for_blocks_host_dram_has() -> None:
    """A request whose prefix was preloaded in host DRAM stores only its own blocks: six of
    eight 512-token blocks are there, so one store of 1,024 tokens."""
    settings = SimSettings(fast_forward=False)
    engine, _ = make_engine(VLLM, settings)
    ids, ends = blocks(1, 8, 512)
    a = request(0, 0.0, ids, ends, 2, preload=6)
    drive(engine, [a])
    assert a.host_hit == 3072
    assert engine.d2h.copies == 1
    assert engine.d2h.busy == pytest.approx(engine.saver.save_time(1024), rel=1e-12)


def test_bad_offload_store_is_refused() -> None:
    with pytest.raises(KvroofError, match="offload_store"):
        SimSettings(offload_store="sometimes")  # type: ignore


def test_write_back_needs_a_store() -> None:
    data = REG.engine("lmcache-0.3").model_dump()
    assert data["write_back"] and data["offload_store"] == "as-computed"
    data["offload_store"] = "none"
    with pytest.raises(ValueError, match="offload_store"):
        EngineSpec.model_validate(data)
