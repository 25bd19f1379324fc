"""--compute-model, --moe-routing and --ttft-clock on the command line."""

from __future__ import annotations

import json

import pytest

from kvroof.cli import main

BASE = ["--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--tp", "8"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_ttft_json_says_which_compute_model_and_clock(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ttft", *BASE, "--new-tokens", "512", "--cached-tokens", "8192",
                       "--json")
    assert code == 0
    default = json.loads(out)
    assert default["compute_model"] == "roofline" and default["ttft_clock"] == "kernel"
    code, out, _ = run(capsys, "ttft", *BASE, "--new-tokens", "512", "--cached-tokens", "8192",
                       "--compute-model", "kernels", "--json")
    assert code == 0
    kernels = json.loads(out)
    assert kernels["compute_model"] == "kernels"
    assert kernels["compute_s"] > default["compute_s"]
    assert kernels["transfer_s"] == default["transfer_s"]


def test_kappa_in_kernel_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kappa", *BASE, "--new-tokens", "512", "--compute-model",
                       "kernels", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["method"].startswith("kernels")
    assert data["kappa_crit"] == pytest.approx(56.7, rel=0.01)


def test_client_clock_and_routing_flags(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ttft", "--model", "qwen3-30b-a3b", "--accelerator", "h20", "--engine",
            "vllm-0.12-offload", "--new-tokens", "16", "--cached-tokens", "1008", "--json"]
    code, out, _ = run(capsys, *argv)
    kernel = json.loads(out)
    code, out, _ = run(capsys, *argv, "--ttft-clock", "client")
    client = json.loads(out)
    assert code == 0 and client["ttft_clock"] == "client"
    assert client["serving_overhead_s"] == pytest.approx(31e-3 + 1.045e-6 * 1024)
    assert client["ttft_s"] == pytest.approx(kernel["ttft_s"] + client["serving_overhead_s"])
    code, out, _ = run(capsys, "ttft", *BASE, "--new-tokens", "4096", "--cached-tokens", "0",
                       "--compute-model", "kernels", "--moe-routing", "power_law_1.01", "--json")
    assert code == 0 and json.loads(out)["compute_model"] == "kernels"


def test_bad_values_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "ttft", *BASE, "--new-tokens", "1", "--cached-tokens", "1",
                       "--compute-model", "fast")
    assert code == 2 and "--compute-model" in err
    code, out, _ = run(capsys, "ttft", "--help")
    assert "--compute-model" in out and "--ttft-clock" in out and "--moe-routing" in out
