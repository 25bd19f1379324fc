"""``kvroof simulate`` says which engine semantics it ran with (issue 21): each line follows the
settings and resources of the run, not the defaults, and reaches the text output and JSON."""

from __future__ import annotations

import json

import pytest

from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.simulate.runner import prepare_trace, simulate
from kvroof.simulate.settings import SimSettings
from tests.simulate.helpers import mooncake, paper_testbed

TESTBED = ["--model", "llama-3.1-70b", "--system", "paper-testbed", "--tp", "8"]


def _rules(settings: SimSettings, dep: object | None = None) -> dict[str, str]:
    trace = prepare_trace(mooncake(20), time_scale=2.0)
    result = simulate(trace, [dep or paper_testbed()], settings)  # type: ignore[list-item]
    return dict(result.semantics)


def test_every_topic_is_named_in_order() -> None:
    rules = _rules(SimSettings())
    assert list(rules) == ["router", "batching", "preemption", "prefix cache", "host tier",
                           "step costs", "compute"]
    assert rules["router"].startswith("round-robin")
    assert rules["batching"].startswith("FIFO")
    assert "no waiting request is admitted in a step that preempted" in rules["preemption"]
    assert rules["prefix cache"].startswith("on:")
    assert rules["step costs"].startswith("none: no engine profile")
    assert "whole-model roofline" in rules["compute"]


def test_lines_follow_the_settings() -> None:
    """Each setting the run was given changes its own line and no other."""
    base = _rules(SimSettings())
    changed = {
        "router": SimSettings(router="scoring", router_weights="prefix=3"),
        "batching": SimSettings(scheduler="utilization-aware", aging_limit=4),
        "prefix cache": SimSettings(prefix_caching=False),
        "host tier": SimSettings(cache_policy="recompute"),
    }
    for topic, settings in changed.items():
        rules = _rules(settings)
        assert rules[topic] != base[topic], topic
        assert {k: v for k, v in rules.items() if k != topic} == \
            {k: v for k, v in base.items() if k != topic}, topic
    assert "prefix=3" in _rules(changed["router"])["router"]
    assert "aging limit 4" in _rules(changed["batching"])["batching"]
    assert _rules(changed["host tier"])["host tier"].startswith("none: only HBM hits")
    stored = _rules(SimSettings(offload_store="none"))["host tier"]
    assert stored.startswith("nothing stored to host DRAM")


def test_engine_profile_and_kernel_mode_lines() -> None:
    """The step costs are the engine profile's (vllm-0.12-offload: 450 us per iteration, 31 ms
    + 1.045 us a prompt token, engine_specs/vllm-0.12-offload.yaml) unless left out; kernel mode
    names the tables."""
    dep = deployment("llama-3.1-8b", accelerator="h100", engine="vllm-0.12-offload",
                     compute_model="kernels")
    rules = _rules(SimSettings(), dep)
    assert rules["step costs"] == ("vllm-0.12-offload: 450 us per iteration, 31 ms + 1.045 us a "
                                   "prompt token per request")
    assert "op by op from the measured kernel tables" in rules["compute"]
    off = _rules(SimSettings(engine_overhead=False), dep)
    assert off["step costs"].startswith("vllm-0.12-offload: left out")


def test_window_layers_only_for_models_that_have_them() -> None:
    assert "window layers" not in _rules(SimSettings())
    dep = deployment("gpt-oss-20b", accelerator="h100")
    assert "window layers" in _rules(SimSettings(), dep)


def test_text_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", *TESTBED, "--requests", "20", "--quiet",
                 "--compare", "router=least-loaded"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "engine semantics" in out
    assert "  [1] router" in out and "least-loaded: fewest outstanding" in out
    code = main(["simulate", *TESTBED, "--requests", "20", "--quiet", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    rows = data if isinstance(data, list) else [data]
    assert all("semantics" in row and row["semantics"]["router"].startswith("round-robin")
               for row in rows)
