"""Inputs, workloads and the host-memory curve, each small enough to check by hand."""

from __future__ import annotations

import math

import pytest

from kvroof.errors import KvroofError
from kvroof.plan.candidates import resolve_candidate
from kvroof.plan.inputs import Candidate, Objectives, Prices, SearchSettings
from kvroof.plan.memory_curve import curve_sizes, gain_of, read_curve
from kvroof.plan.workloads import (
    PRESETS,
    WorkloadSummary,
    load_plan_workload,
    reuse_stats,
)
from kvroof.workload.trace import TraceBuilder


@pytest.mark.parametrize(("text", "parsed"), [
    ("dgx-h100:8", Candidate("dgx-h100", 8, None)),
    ("gh200x4", Candidate("gh200", None, 4)),
    ("hgx-h200:4x2", Candidate("hgx-h200", 4, 2)),
    ("h100", Candidate("h100", None, None)),
])
def test_candidate_parse(text: str, parsed: Candidate) -> None:
    assert Candidate.parse(text) == parsed
    assert Candidate.parse(parsed.text) == parsed


@pytest.mark.parametrize("text", ["", ":8", "dgx-h100:0", "dgx-h100:x", "a b"])
def test_bad_candidates(text: str) -> None:
    with pytest.raises(KvroofError, match="candidate"):
        Candidate.parse(text)


def test_candidate_choices() -> None:
    chosen = resolve_candidate("llama-3.1-8b", Candidate("dgx-h100"), {})
    assert (chosen.tp, chosen.replicas, chosen.label) == (1, 8, "dgx-h100:1x8")
    big = resolve_candidate("llama-3.1-70b", Candidate("dgx-h100"), {}, kv_need=100_000)
    assert big.tp == 4  # TP 2 fits the weights but holds only 8,819 tokens of KV
    with pytest.raises(KvroofError, match="candidate dgx-h100:2: a replica's KV space"):
        resolve_candidate("llama-3.1-70b", Candidate("dgx-h100", 2), {}, kv_need=100_000)
    with pytest.raises(KvroofError, match="candidate nope: unknown system or accelerator"):
        resolve_candidate("llama-3.1-8b", Candidate("nope"), {})


def test_objectives_prices_search() -> None:
    default = Objectives.given(None, None, 99)
    assert (default.ttft, default.tpot, default.defaulted) == (2.0, 0.2, True)
    assert Objectives.given(1.5, None).text == "TTFT p90 <= 1.5 s"
    with pytest.raises(KvroofError, match="slo_percentile"):
        Objectives(1.0, None, 101)
    with pytest.raises(KvroofError, match="dram_gb_price: give the GPU-hour price"):
        Prices(None, 0.01)
    with pytest.raises(KvroofError, match="tolerance"):
        SearchSettings(tolerance=1.5)


def test_reuse_stats_by_hand() -> None:
    """Request 1: blocks a (512 tokens) and b (488); request 2: a and c (188): request 2 finds
    512 cached tokens (T = 188, K/T = 2.72); a is used twice; between its two uses only b
    (488 tokens) was touched, so an LRU cache of 488 + 512 = 1,000 tokens keeps it."""
    builder = TraceBuilder()
    builder.add(1000, 10, [0, 1], [512, 1000], 0, 1)
    builder.add(700, 10, [0, 2], [512, 700], 0, 2)
    stats = reuse_stats(builder.build(False))
    assert (stats.reused_tokens, stats.distinct_tokens) == (512, 512 + 488 + 188)
    assert stats.share_with_prefix == 0.5 and stats.cached_share == 512 / 1700
    assert (stats.median_new, stats.median_cached) == (188, 512)
    assert stats.median_kappa == pytest.approx(512 / 188)
    assert stats.lru_tokens == (1000, 1000, 1000)


def test_presets_and_summaries() -> None:
    assert set(PRESETS) == {"chat", "docqa", "agentic"}
    chat = load_plan_workload("chat")
    assert len(chat.trace) == 918 and not chat.synthetic and chat.kind == "preset"
    for name in ("docqa", "agentic"):
        work = load_plan_workload(name, context=32_768)
        assert work.synthetic and work.assumptions[0].startswith("SYNTHETIC")
        assert int(work.trace.input_tokens.max()) < 32_768
        assert work.reuse.cached_share > 0.5  # both are built around shared prefixes
    summary = WorkloadSummary.parse("prompt=3000,reused=0.5,distance=20,requests=100,rps=2")
    work = load_plan_workload(summary)
    assert work.target_rps == 2 and len(work.trace) == 100 and work.kind == "summary"
    assert 0.3 < work.reuse.cached_share < 0.5  # half of each prompt, less the first uses
    for bad, match in (("prompt=10", "give reused"), ("prompt=10,reused=1", "reused"),
                       ("prompt=x,reused=0", "prompt: expected a number"),
                       ("prompt=10,reused=0,color=1", "KEY=VALUE")):
        with pytest.raises(KvroofError, match=match):
            WorkloadSummary.parse(bad)
    with pytest.raises(KvroofError, match=r"no file 'nothing\.jsonl' and no preset"):
        load_plan_workload("nothing.jsonl")


def test_curve_sizes_and_reading() -> None:
    # an HBM pool of 1,000 tokens of 1 kB, every reuse kept by 3,000 tokens: ratios 1/4 .. 4
    sizes = curve_sizes(1000, 1e3, 3000, 16)
    assert sizes == [r * 1e6 for r in (0.25, 0.5, 1, 2, 4)]
    assert curve_sizes(1000, 1e3, 0, 16) == []
    assert len(curve_sizes(1000, 1e3, 100_000, 16)) == 6  # beyond 8x: six sizes on a log scale
    assert curve_sizes(1000, 1e3, 10, 512)[0] == 512e3  # at least one block
    reading = read_curve([1.0, 1.02, 1.3, 1.5, 1.52], [0.25, 0.5, 1, 2, 4], 1.0, 1.05)
    assert reading.pays == (False, False, True, True, True)
    assert reading.pays_from_ratio == 1 and reading.recommended == 3  # 1.5 >= 1 + 0.9 x 0.52
    assert gain_of(2, 0) == math.inf and math.isnan(gain_of(0, 0))
    none = read_curve([1.0, 1.01], [1, 2], 1.0, 1.05)
    assert none.recommended is None and none.pays_from_ratio is None
