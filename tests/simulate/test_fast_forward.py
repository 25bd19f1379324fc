"""Fast-forwarding is exact: a run of decode iterations summed in closed form makes the same
routing decisions, admissions, preemptions and cache hits as stepping every iteration, and the
same times to float rounding (docs/simulate.md, "Speed").

:func:`assert_same` compares a fast-forwarded result with a stepped one: per request, per
iteration (a fast-forwarded run against the stepped iterations it stands for) and the summary.
Integer quantities, and every statistic computed from them alone, must be identical to the bit;
times, energies and FLOPs to a relative 1e-9 of the simulated time span (a run's times are
closed-form sums, a stepped run's are added one iteration at a time).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvroof.cost.deployment import Deployment, deployment
from kvroof.errors import KvroofError
from kvroof.simulate import SimResult, SimSettings, prepare_trace, simulate
from kvroof.workload.trace import RequestTrace, TraceBuilder

from .helpers import REG, paper_testbed, table_trace

RTOL = 1e-9

EXACT_REQUEST_COLUMNS = ("request", "replica", "input_tokens", "output_tokens", "prompt_tokens",
                         "hbm_hit", "host_hit", "tier_hit", "split_recomputed", "computed",
                         "preemptions")
TIME_REQUEST_COLUMNS = ("arrival", "first_token", "finish", "ttft", "tpot", "e2e")
EXACT_ITERATION_COLUMNS = ("prefill_tokens", "decode_tokens", "prefill_chunks")
SUMMED_ITERATION_COLUMNS = ("duration", "busy_seconds", "flops")
BOOKKEEPING = ("stepped_iterations", "fast_forward_runs", "fast_forwarded_iterations", "wall_s",
               "simulated_per_wall_second")
"""Summary entries that say how the simulation ran, not what it found."""
EXACT_SUMMARY = ("requests", "iterations", "tokens_per_iteration",
                 "prefill_tokens_per_iteration", "decode_tokens_per_iteration", "token_budget",
                 "budget_utilization", "prompt_tokens", "hit_rate_hbm", "hit_rate_host",
                 "hit_rate_tier", "split_recomputed_share", "computed_share", "batch_limit",
                 "preemptions", "output_cut", "skipped")
"""Summary entries computed from integers alone: identical to the bit."""


def _close(a: Any, b: Any, scale: float) -> bool:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return bool(np.allclose(a, b, rtol=RTOL, atol=RTOL * scale, equal_nan=True))


def assert_same(fast: SimResult, slow: SimResult) -> None:
    """``fast`` (fast-forwarded) and ``slow`` (every iteration stepped) found the same."""
    r, s = fast.requests, slow.requests
    for key in EXACT_REQUEST_COLUMNS:
        assert np.array_equal(r[key], s[key]), key
    span = float(np.nanmax(np.abs(s["finish"]))) if s["finish"].size else 1.0
    scale = max(span, 1.0)
    for key in TIME_REQUEST_COLUMNS:
        assert _close(r[key], s[key], scale), key
    _same_iterations(fast.iterations, slow.iterations, scale)
    assert set(fast.summary) == set(slow.summary)
    for key, value in fast.summary.items():
        if key in BOOKKEEPING:
            continue
        if key in EXACT_SUMMARY:
            assert value == slow.summary[key], key
        else:
            _same_summary(key, value, slow.summary[key])
    assert slow.summary["fast_forward_runs"] == 0


def _same_summary(key: str, a: Any, b: Any) -> None:
    if isinstance(a, Mapping):
        assert a.keys() == b.keys(), key
        for sub in a:
            _same_summary(f"{key}.{sub}", a[sub], b[sub])
    elif isinstance(a, list):  # per-replica (and per-stage) entries
        assert len(a) == len(b), key
        for index, (one, other) in enumerate(zip(a, b, strict=True)):
            _same_summary(f"{key}[{index}]", one, other)
    elif isinstance(a, int) and not isinstance(a, bool):
        assert a == b, key
    else:
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=RTOL,
                                                                 abs_tol=1e-300), key


def _same_iterations(fast: Mapping[str, np.ndarray[Any, Any]],
                     slow: Mapping[str, np.ndarray[Any, Any]], scale: float) -> None:
    """Each fast row (a stepped iteration, or a run of ``iterations`` identical decode steps)
    stands for the next ``iterations`` stepped rows of its replica."""
    assert np.all(slow["iterations"] == 1)
    assert fast["iterations"].sum() == slow["iterations"].size
    replicas = sorted(set(slow["replica"].tolist()) | set(fast["replica"].tolist()))
    for replica in replicas:
        f = np.flatnonzero(fast["replica"] == replica)
        w = np.flatnonzero(slow["replica"] == replica)
        assert np.all(np.diff(fast["start"][f]) > 0) and np.all(np.diff(slow["start"][w]) > 0)
        j = 0
        for row in f.tolist():
            n = int(fast["iterations"][row])
            rows = w[j:j + n]
            assert rows.size == n, (replica, row)
            for key in EXACT_ITERATION_COLUMNS:
                assert np.all(slow[key][rows] == fast[key][row]), (key, replica, row)
            assert _close(fast["start"][row], slow["start"][rows[0]], scale), (replica, row)
            assert _close(fast["load_seconds"][row], slow["load_seconds"][rows].sum(), scale)
            for key in SUMMED_ITERATION_COLUMNS:
                total = float(slow[key][rows].sum())
                assert _close(fast[key][row], total, abs(total)), (key, replica, row)
            energy = float((slow["power_w"][rows] * slow["duration"][rows]).sum())
            assert _close(fast["power_w"][row] * fast["duration"][row], energy, energy)
            j += n
        assert j == w.size, replica


def _both(trace: RequestTrace, deps: Sequence[Deployment], sim: SimSettings,
          **options: Any) -> tuple[SimResult, SimResult]:
    fast = simulate(trace, deps, sim, check=True, **options)
    slow = simulate(trace, deps, dataclasses.replace(sim, fast_forward=False), check=True,
                    **options)
    return fast, slow


def test_least_loaded_sees_a_finish_inside_a_run() -> None:
    """The reproducer of issue 24 (item 3): two replicas, least-loaded, a 16-token budget, one
    sequence each, a trace replayed twice as fast. Request 0 decodes alone on replica 0; its
    last iteration has started when request 1 arrives (0.4815 s). Stepping has applied that
    iteration (request 0 finishes in it: replica 0 holds nothing) and routes request 1 to
    replica 0. Fast-forwarding used to apply the run only at its end (0.4924 s), so replica 0
    still counted request 0 and request 1 went to replica 1, with another TTFT and finish; a
    run is now applied when its last iteration starts.

    Least-loaded ties go to the replica chosen least recently (issue 21), no longer to the
    lowest index, so a one-token request (X, at 0.25 s, done within milliseconds) goes first to
    replica 1 (replica 0 is busy with request 0): at request 1's arrival both replicas are idle
    and replica 0, chosen before X's replica 1, is the least recent, the choice the old test
    made by index. Request 2 (0.495 s) finds replica 0 busy with request 1: replica 1."""
    trace = prepare_trace(table_trace([27, 1, 45, 27], [0] * 4, [19, 1, 31, 14],
                                      [0.475, 0.5, 0.963, 0.99]), time_scale=2.0)
    sim = SimSettings(router="least-loaded", max_num_batched_tokens=16, max_num_seqs=1)
    fast, slow = _both(trace, [paper_testbed()] * 2, sim)
    assert fast.summary["fast_forward_runs"] > 0
    assert slow.requests["replica"].tolist() == [0, 1, 0, 1]
    assert fast.requests["replica"].tolist() == [0, 1, 0, 1]
    assert_same(fast, slow)


def _at_once(rows: Sequence[tuple[int, int, list[int], list[int], int]]) -> RequestTrace:
    """Requests arriving together: (prompt, output, block ids, block ends, preloaded blocks)."""
    builder = TraceBuilder()
    for i, (prompt, output, ids, ends, preload) in enumerate(rows):
        builder.add(prompt, output, ids, ends, preload, i + 1, "", 0.0)
    return builder.build(True, record_unit="row", name="at-once")


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (where the platform has SIGALRM)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"the simulation ran past {seconds} s (a livelock)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_request_loading_again_waits_for_its_new_load() -> None:
    """Async loads are tracked in a heap whose entries outlive them. A request preempted (or
    given back its space) and loading again left its first load's entry behind; the replica,
    idle, took that old entry for the new load landing and admitted the request early. A
    fast-forwarded run happened to drop old entries first, so the two modes differed (the third
    and fourth requests' first tokens); an entry now counts only for the load it was made for."""
    trace = _at_once([
        (193, 19, [0, 1000, 1001, 1002], [64, 128, 192, 193], 0),
        (338, 1, [0, 1, 2, 1003, 1004, 1005], [64, 128, 192, 256, 320, 338], 2),
        (64, 1, [0], [64], 0), (64, 1, [0], [64], 0), (65, 1, [0, 1006], [64, 65], 0),
        (64, 1, [0], [64], 0)])
    sim = SimSettings(load_mode="async", prefix_caching=False, kv_tokens=400)
    fast, slow = _both(trace, _fleet("dgx", 1), sim)
    assert slow.requests["preemptions"].tolist() == [0, 0, 1, 0, 0, 0]
    assert_same(fast, slow)


def test_loaded_requests_do_not_starve_the_last_running_one() -> None:
    """One sequence slot, a 16-token budget, 400 tokens of KV: three requests load their
    cached prefixes (190 tokens of KV held while they wait) and a 256-token prompt runs alone.
    It cannot finish beside them, so it used to be preempted and recomputed forever (the
    loaded requests, behind it in the queue, never got to run); now the newest loaded request
    gives its space back instead (it loads again later) and everything finishes."""
    trace = _at_once([(65, 1, [0, 1005], [64, 65], 1), (64, 1, [0], [64], 0),
                      (64, 1, [0], [64], 0), (256, 1, [100, 101, 102, 103],
                                              [64, 128, 192, 256], 0)])
    sim = SimSettings(max_num_batched_tokens=16, max_num_seqs=1, load_mode="async",
                      prefix_caching=False, kv_tokens=400)
    with _deadline(20):
        fast, slow = _both(trace, _fleet("dgx", 1), sim)
    assert slow.summary["requests"] == 4
    assert slow.requests["preemptions"].tolist() == [0, 0, 1, 0]
    assert_same(fast, slow)


# -- the property: random small traces and settings --------------------------------------------

BLOCK = 64
"""Tokens per prefix block of the random traces (small: prompts of a few blocks share some)."""

_FLEETS: dict[str, Deployment] = {}


def _fleet(kind: str, count: int) -> list[Deployment]:
    """``count`` replicas of Llama-3.1-70B at TP 8 (all-reduces: a decode step's power changes
    along a run): all DGX H100s (``dgx``, which have cache tiers below DRAM), or alternating
    paper testbeds (PCIe Gen4) and DGX H100s (Gen5: another critical kappa ratio)."""
    if not _FLEETS:
        for system in ("dgx-h100", "paper-testbed"):
            _FLEETS[system] = deployment("llama-3.1-70b", system=system, registry=REG, tp=8)
    if kind == "dgx":
        return [_FLEETS["dgx-h100"]] * count
    return [_FLEETS["paper-testbed" if i % 2 == 0 else "dgx-h100"] for i in range(count)]


@st.composite
def _traces(draw: st.DrawFn) -> RequestTrace:
    """2-12 requests whose prompts share prefixes (three families of block chains), some with
    leading blocks preloaded in host DRAM, some in conversations (for closed loops), arriving
    within about a second."""
    count = draw(st.integers(2, 12))
    builder = TraceBuilder()
    fresh = 1000
    time = 0.0
    for i in range(count):
        family = draw(st.integers(0, 2))
        shared = draw(st.integers(0, 4))
        own = draw(st.integers(0 if shared else 1, 3))
        last = draw(st.integers(1, BLOCK)) if own else BLOCK  # a shared block is always full
        ids = [family * 100 + j for j in range(shared)] + list(range(fresh, fresh + own))
        fresh += own
        ends = [BLOCK * (j + 1) for j in range(len(ids))]
        ends[-1] = ends[-1] - BLOCK + last
        preload = draw(st.integers(0, min(shared, 2)))
        time += draw(st.sampled_from([0.0, 0.005, 0.02, 0.05, 0.1, 0.3]))
        group = draw(st.sampled_from(["", "a", "b"]))
        builder.add(ends[-1], draw(st.integers(1, 60)), ids, ends, preload, i + 1, group, time)
    return builder.build(True, record_unit="row", name="random")


@st.composite
def _cases(draw: st.DrawFn) -> tuple[RequestTrace, list[Deployment], SimSettings,
                                     dict[str, Any]]:
    trace = draw(_traces())
    replicas = draw(st.integers(1, 4))
    tier = draw(st.sampled_from([None, None, "local-nvme", "remote-rdma"]))
    fleet = _fleet("dgx" if tier is not None else draw(st.sampled_from(["dgx", "mixed"])),
                   replicas)
    seqs = draw(st.sampled_from([None, 1, 2, 3, 8]))
    budget = draw(st.sampled_from([None, 16, 64, 256, 2048]))
    if budget is not None and budget < (seqs or 1024):
        seqs = draw(st.sampled_from([1, 2, min(budget, 8)]))
    host_token = 327_680.0  # bytes of host DRAM per token of Llama-3.1-70B's KV
    sim = SimSettings(
        max_num_batched_tokens=budget, max_num_seqs=seqs,
        scheduler=draw(st.sampled_from(["fifo", "utilization-aware"])),
        cache_policy=draw(st.sampled_from(["load", "recompute", "split"])),
        load_mode=draw(st.sampled_from(["sync", "async", "layerwise"])),
        router=draw(st.sampled_from(["round-robin", "least-loaded", "prefix-affinity",
                                     "kappa"])),
        prefix_caching=draw(st.booleans()),
        dram_cache=draw(st.sampled_from([None, 2 * BLOCK * host_token,
                                         6 * BLOCK * host_token])),
        tier=tier,
        tier_cache=None if tier is None else draw(st.sampled_from([None,
                                                                   4 * BLOCK * host_token])),
        kv_tokens=draw(st.sampled_from([None, 400, 700, 1500])),
        aging_limit=draw(st.sampled_from([1, 3, 16])),
        admission_backlog=draw(st.sampled_from([0.0, 0.001, 1.0])),
        power_cap=draw(st.sampled_from([None, 400.0])),
    )
    options: dict[str, Any] = {"skip_bad": True}
    arrivals = draw(st.sampled_from(["trace", "scaled", "rps", "users"]))
    if arrivals == "scaled":
        trace = prepare_trace(trace, time_scale=draw(st.sampled_from([0.5, 2.0, 10.0])))
    elif arrivals == "rps":
        trace = prepare_trace(trace, rps=draw(st.sampled_from([5.0, 50.0, 500.0])),
                              seed=draw(st.integers(0, 3)))
    elif arrivals == "users":
        options.update(users=draw(st.integers(1, 4)),
                       think_time=draw(st.sampled_from([0.0, 0.01])))
    return trace, fleet, sim, options


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_cases())
def test_fast_forward_is_exact(case: tuple[RequestTrace, list[Deployment], SimSettings,
                                           dict[str, Any]]) -> None:
    """Random small traces on 1-4 replicas under random routers, schedulers, cache policies,
    load modes, token budgets, sequence caps, KV sizes, DRAM and tier caches, power caps and
    arrivals (the trace's times, scaled, Poisson, a closed loop): fast-forwarding finds exactly
    what stepping finds."""
    trace, fleet, sim, options = case
    try:
        fast, slow = _both(trace, fleet, sim, **options)
    except KvroofError as error:  # every request too large for the KV space: nothing to do
        assert "no request can be served" in str(error)
        return
    assert_same(fast, slow)
