"""vLLM v1's preemption rules: no waiting request is admitted in a step that preempted
(vllm/v1/core/sched/scheduler.py, ``if not preempted_reqs:``, github.com/vllm-project/vllm at
commit b4622cf924bc72504aed99e486062d6633fde39e), and a prompt's full blocks join the HBM prefix
cache as they are scheduled (``cache_blocks`` in ``KVCacheManager.allocate_slots``,
vllm/v1/core/kv_cache_manager.py at commit 003df2961dd8830c317a61f9745ccd557da9fa06), so a
concurrent request with the same prefix and a preempted request resuming hit them."""

from __future__ import annotations

from kvroof.cost.deployment import deployment
from kvroof.simulate.engine import Engine
from kvroof.simulate.request import PREFILL, WAITING
from kvroof.simulate.settings import SimSettings

from .helpers import REG
from .replica_driver import blocks, drive, make_engine, request

DEP = deployment("llama-3.1-8b", accelerator="h100", registry=REG)


class AdmitAfterPreemption(Engine):
    """kvroof's old rule: the step that preempted still admits waiting requests."""

    def _schedule_running(self) -> tuple[int, int, bool]:
        decodes, budget, _ = super()._schedule_running()
        return decodes, budget, False


def _pair(engine_class: type[Engine]) -> tuple[Engine, list[tuple[int, int, int, int]]]:
    """Two 40-token requests with 60 output tokens each in 100 tokens of KV, a 16-token budget.

    Hand derivation of the steps (KV in use after each): step 1 A's chunk 16 (16), step 2 A 16
    (32), step 3 A's last 8 and B's first 8 (48), steps 4-5 A's decode and B's chunks of 15
    (64, 80), step 6 A's decode and B's last 2 (83), then two decodes a step: 85, ..., 99 after
    step 14. Step 15 needs 2 more tokens: B, the newest, is preempted (its 40 + 9 generated
    tokens freed: 52 in use with A's decode). Its recompute (49 tokens) would fit a 15-token
    chunk at once: the old rule re-admits it in step 15."""
    settings = SimSettings(kv_tokens=100, max_num_batched_tokens=16, max_num_seqs=4,
                           prefix_caching=False, cache_policy="recompute", fast_forward=False)
    engine, _ = make_engine(DEP, settings, engine_class)
    ids_a, ends_a = blocks(1, 3)
    ids_b, ends_b = blocks(10, 3)
    ends_a[-1] = ends_b[-1] = 40
    a = request(0, 0.0, ids_a, ends_a, 60)
    b = request(1, 0.0, ids_b, ends_b, 60)
    steps: list[tuple[int, int, int, int]] = []  # (KV in use, preemptions, B's state, steps)

    def after(e: Engine) -> None:
        steps.append((e.pool.used, e.preemptions, b.state, len(steps) + 1))

    drive(engine, [a, b], after)
    return engine, steps


def test_no_admission_in_a_step_that_preempted() -> None:
    engine, steps = _pair(Engine)
    first = next(s for s in steps if s[1] == 1)
    assert steps[13][0] == 99  # after step 14 (derivation in _pair)
    assert first[3] == 15  # the first preemption is in step 15
    assert first[2] == WAITING  # ... and B waits through it
    assert first[0] == 52  # only A's 40 + 11 tokens and this step's decode are held
    old_engine, old_steps = _pair(AdmitAfterPreemption)
    old_first = next(s for s in old_steps if s[1] == 1)
    assert old_first[3] == 15 and old_first[2] == PREFILL  # the old rule re-admits B at once
    assert old_first[0] == 52 + 15  # with its first 15-token chunk
    # the victim re-admitted at once is preempted again sooner: more preemptions in all
    assert old_engine.preemptions > engine.preemptions


def test_fewer_preemptions_under_pressure() -> None:
    """The livelock's shape: 30 requests at once whose decodes outgrow 600 tokens of KV with a
    32-token budget. Re-admitting in the step that preempted refills the space the preemption
    freed, so the next decode step preempts again; vLLM's rule waits a step (measured here: the
    old rule preempts more than 1.5 times as often; the property checked is "more")."""
    counts = []
    for engine_class in (Engine, AdmitAfterPreemption):
        settings = SimSettings(kv_tokens=600, max_num_batched_tokens=32, max_num_seqs=16,
                               prefix_caching=False, cache_policy="recompute",
                               fast_forward=False)
        engine, done = make_engine(DEP, settings, engine_class)
        requests = []
        for i in range(30):
            ids, ends = blocks(1000 * i, 4)
            requests.append(request(i, 0.0, ids, ends, 400))
        drive(engine, requests, max_events=10**6)
        assert len(done) == 30
        counts.append(engine.preemptions)
    assert counts[1] > counts[0] > 0


def test_second_request_hits_blocks_of_a_prefill_in_progress() -> None:
    """A 96-token prompt (six 16-token blocks) prefills in chunks of 40: step 1 schedules tokens
    0-40 (blocks 1-2 full), step 2 tokens 40-80 (blocks 3-5), step 3 the last 16 (block 6) and
    leaves 24 of the budget. B, arriving during step 1 with A's first four blocks and two of
    its own, is admitted in step 3 (the first with budget left) and finds A's blocks 1-4 cached
    (the old rule cached them only once A's prefill had ended, after step 3): 64 tokens."""
    settings = SimSettings(max_num_batched_tokens=40, max_num_seqs=4, cache_policy="recompute",
                           fast_forward=False)
    engine, _ = make_engine(DEP, settings)
    ids_a, ends = blocks(1, 6)
    a = request(0, 0.0, ids_a, ends, 2)
    b = request(1, 1e-9, [*ids_a[:4], 50, 51], ends, 2)
    admitted: list[int] = []

    def after(e: Engine) -> None:
        if b.state != WAITING and not admitted:
            admitted.append(e.log.columns["start"].__len__())

    drive(engine, [a, b], after)
    assert admitted == [3]
    assert b.hbm_hit == 64 and b.computed == 32
    assert a.hbm_hit == 0


def test_preempted_prefill_resumes_from_its_cached_blocks() -> None:
    """A (16 tokens, 12 outputs) decodes while B (64 tokens, four 16-token blocks) prefills in
    15-token chunks beside it in 80 tokens of KV. Hand derivation (KV in use after each step):
    step 1 A's prompt (16), step 2 A's decode and B's tokens 0-15 (32), step 3 B's 15-30 (48),
    step 4 B's 30-45 (64), step 5 B's 45-60 (80, blocks 1-3 of B cached as scheduled). Step 6
    needs A's decode and B's last 4 tokens: 85 > 80, B is preempted mid-prefill and its three
    full blocks (48 tokens) stay cached. It waits until A finishes (re-admitting it needs 15
    tokens beside its pinned blocks, 10 are free), then resumes from them: an HBM hit of 48
    tokens (A's last decodes fit in the free space, so nothing is evicted meanwhile)."""
    settings = SimSettings(kv_tokens=80, max_num_batched_tokens=16, max_num_seqs=4,
                           cache_policy="recompute", fast_forward=False)
    engine, _ = make_engine(DEP, settings)
    ids_a, ends_a = blocks(1, 1)
    ids_b, ends_b = blocks(10, 4)
    a = request(0, 0.0, ids_a, ends_a, 12)
    b = request(1, 1e-9, ids_b, ends_b, 10)
    drive(engine, [a, b])
    assert b.preemptions == 1 and engine.preemptions == 1
    assert b.hbm_hit == 48
    assert b.computed == 64 + 0 - 48  # its prompt on resuming: the input, no output yet
    # nothing was evicted before B resumed; afterwards B's decodes (80 tokens in use after its
    # last chunk) evict the one evictable block, A's, and only it
    assert engine.pool.evicted == 1
    assert all(block in engine.pool.cached for block in ids_b) and 1 not in engine.pool.cached
