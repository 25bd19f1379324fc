"""`kvroof validate --compute-model kernels` (and --ttft-clock client): the compute model is a
choice of the validation, every op's model and source is in --case, each case says whether it
shares its GPU and engine with the kernel tables."""

from __future__ import annotations

import json

import pytest

from kvroof.cli import main
from kvroof.validation.run import validate


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _stats(result: object, quantity: str) -> object:
    return next(s for s in result.stats  # type: ignore[attr-defined]
                if s.quantity == quantity and s.mode == "after")


def test_kernel_mode_predicts_every_model_case() -> None:
    roofline = validate(compute_model="roofline")
    kernels = validate(compute_model="kernels")
    assert kernels.compute_model == "kernels" and not roofline.default_settings
    assert validate().compute_model == "auto" and validate().default_settings
    for before, after in zip(roofline.results, kernels.results, strict=True):
        assert before.case.id == after.case.id
        if before.case.quantity in ("link_bandwidth", "copy_time", "layer_load_time"):
            assert before.after.value == after.after.value  # the link side is untouched
        else:
            assert after.after.value is not None and after.after.value > 0
    compute = _stats(kernels, "prefill_compute_time")
    # 12 before validation/aiconfigurator-silicon.yaml, which adds its 2 aggregated TTFT cases
    # (its 5 disaggregated TTFT cases are rated C, outside the statistics)
    assert compute.cases == 14  # type: ignore[attr-defined]
    assert abs(compute.median_ratio - 1) < abs(  # type: ignore[attr-defined]
        _stats(roofline, "prefill_compute_time").median_ratio - 1)  # type: ignore[attr-defined]


def test_cases_say_whether_they_share_gpu_and_engine_with_the_tables() -> None:
    result = validate(compute_model="kernels")
    overlap = result.kernel_tables
    assert overlap["trtllm-v05-h100-llama2-7b-t128"].startswith("same GPU (h100-sxm) only")
    assert overlap["agentic-kvc-h20-miss-1k"] == "independent: no kernel tables for h20"
    assert "nvbw-i24-h100-h2d-sm" not in overlap  # link cases use no kernel table
    data = result.as_dict()
    assert data["compute_model"] == "kernels" and data["ttft_clock"] == "kernel"
    assert all("kernel_tables" in case for case in data["cases"])
    assert "compute_model" not in validate().as_dict()  # the default JSON is unchanged


def test_client_clock_adds_serving_overhead_only_where_an_engine_publishes_it() -> None:
    kernel = validate(compute_model="kernels")
    client = validate(compute_model="kernels", ttft_clock="client")
    for a, b in zip(kernel.results, client.results, strict=True):
        if a.case.ttft_clock is not None:  # measured by a client: on its own clock either way
            assert b.after.value == a.after.value
        elif a.case.engine == "vllm-0.12-offload" and a.case.quantity != "copy_time":
            assert b.after.value > a.after.value  # type: ignore[operator]
        elif a.case.engine == "tensorrt-llm":
            assert b.after.value == a.after.value


def test_cli_flags_and_per_op_explanation(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--compute-model", "kernels")
    assert code == 0 and "compute model kernels, kernel TTFT" in out.splitlines()[0]
    code, out, _ = run(capsys, "validate", "--compute-model", "kernels", "--case",
                       "trtllm-v05-h100-llama2-70b-t2048")
    assert code == 0
    assert "op full: attention" in out and "vllm_flash_attn_fa3" in out
    assert "op layers: allreduce" in out and "kernels, op by op" in out
    code, out, _ = run(capsys, "validate", "--compute-model", "kernels", "--ttft-clock",
                       "client", "--json")
    assert code == 0 and json.loads(out)["ttft_clock"] == "client"
