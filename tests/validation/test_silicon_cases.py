"""AIConfigurator's silicon_sample.csv rows as validation cases (validation/
aiconfigurator-silicon.yaml): the decode_step_time quantity, a case's own TTFT clock, and the
marker saying which cases share their source, GPU and engine with the kernel tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvroof.errors import SpecError
from kvroof.specs.registry import default_registry
from kvroof.validation.cases import builtin_validation_dir, load_case_file
from kvroof.validation.predict import kernel_tables_overlap, predict_case
from kvroof.validation.run import validate

SILICON = builtin_validation_dir() / "aiconfigurator-silicon.yaml"

_DECODE = """
source: {title: t, url: "https://example.org/x"}
defaults: {engine: vllm-0.12-offload, rating: A, where: w, timed: t}
cases:
  - id: one
    quantity: decode_step_time
    model: qwen3-32b
    accelerator: gb200
    tp: 2
    new_tokens: %s
    cached_tokens: 2250
    measured: 8 ms
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_decode_step_computes_one_token(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"cases\[0\]\.new_tokens: a decode_step_time case"):
        load_case_file(_write(tmp_path, _DECODE % 16))
    assert load_case_file(_write(tmp_path, _DECODE % 1)).cases[0].quantity == "decode_step_time"


def test_decode_step_reads_at_least_each_ranks_weights(tmp_path: Path) -> None:
    # Hand derivation (lower bound): a batch-1 decode step of Qwen3-32B at TP 2 reads each rank's
    # half of the bf16 weights at least once. The model card gives 32.8e9 parameters, so a rank
    # reads >= 32.8e9 x 2 B / 2 = 32.8 GB; at GB200's achievable 6.4 TB/s (0.8 x 8 TB/s, as
    # hardware_specs/accelerators/gb200.yaml sources it) that is >= 5.125 ms. The roofline adds
    # the KV read (2250 positions) and two all-reduces a layer, so it stays under 1.5x of it.
    # Kernel mode divides each op's roofline at the 8 TB/s peak by a measured efficiency <= 1,
    # so it reads no faster than 32.8 GB / 8 TB/s = 4.1 ms.
    case = load_case_file(_write(tmp_path, _DECODE % 1)).cases[0]
    registry = default_registry()
    bound = 32.8e9 * 2 / 2 / 6.4e12
    roofline = predict_case(case, registry).value
    assert roofline is not None and bound * 0.98 < roofline < bound * 1.5
    kernels = predict_case(case, registry, compute_model="kernels").value
    assert kernels is not None and kernels > 0.98 * 32.8e9 * 2 / 2 / 8e12


def test_a_case_measured_on_the_client_clock_is_predicted_on_it(tmp_path: Path) -> None:
    # The client clock adds serving_overhead + serving_overhead_per_token x (T + K) +
    # iteration_overhead x 1 (a lone prefill is one engine iteration; kvroof.cost.serving).
    # vllm-0.12-offload publishes 31 ms and 1.045 us a prompt token (from gahow/agentic-kvc)
    # and a per-iteration time (0.45 ms when this test was written), all read from the profile
    # here: a prefill of T = 2000 on no prefix reads 31 ms + 2000 x 1.045 us + 0.45 ms =
    # 33.54 ms later on the client clock.
    text = (_DECODE % 2000).replace("decode_step_time", "prefill_compute_time").replace(
        "cached_tokens: 2250", "cached_tokens: 0")
    kernel = load_case_file(_write(tmp_path, text)).cases[0]
    client = load_case_file(_write(tmp_path, text.replace(
        "measured: 8 ms", "measured: 8 ms\n    ttft_clock: client"))).cases[0]
    registry = default_registry()
    on_kernel = predict_case(kernel, registry).value
    on_client = predict_case(client, registry).value
    assert on_kernel is not None and on_client is not None
    engine = registry.engine("vllm-0.12-offload")
    assert (engine.serving_overhead, engine.serving_overhead_per_token) == (31e-3, 1.045e-6)
    expected = 31e-3 + 2000 * 1.045e-6 + float(engine.iteration_overhead or 0.0)
    assert on_client - on_kernel == pytest.approx(expected, rel=1e-9)
    # the case's own clock wins over the run's
    assert predict_case(client, registry, ttft_clock="kernel").value == on_client


def test_every_silicon_case_is_marked_not_independent_of_the_kernel_tables() -> None:
    loaded = load_case_file(SILICON)
    registry = default_registry()
    assert loaded.cases and all(c.same_source_as_kernel_tables for c in loaded.cases)
    assert all(c.ttft_clock == "client" for c in loaded.cases)
    assert all(c.where.startswith("line ") for c in loaded.cases)
    for case in loaded.cases:
        # GB200, B200 and H200 all have tables from ai-dynamo/aiconfigurator (kernels/data)
        line = kernel_tables_overlap(case, registry)
        assert line.startswith("NOT independent: same source as the kernel tables "
                               "(ai-dynamo/aiconfigurator), same GPU"), line
        # the tables' GEMMs are vLLM's; these runs are TensorRT-LLM and SGLang
        assert " only: tables from vllm" in line
    # the same marker on a GPU without tables is independent of them
    other = loaded.cases[0].model_copy(update={"accelerator": "h20"})
    assert kernel_tables_overlap(other, registry) == (
        "independent: no kernel tables for h20 (same source as the tables, other GPU)")


def test_silicon_cases_are_scored_in_both_compute_models() -> None:
    for model in ("roofline", "kernels"):
        result = validate([SILICON.parent], compute_model=model)
        mine = [r for r in result.results if r.file.path == SILICON]
        counted = [r for r in mine if r.in_statistics]
        # 2 aggregated TTFTs and 7 decode steps; the 5 disaggregated TTFTs are rated C
        assert len(mine) == 14 and len(counted) == 9
        assert all(r.after.value is not None for r in mine)
        assert all(r.case.rating == "C" for r in mine if not r.in_statistics)
