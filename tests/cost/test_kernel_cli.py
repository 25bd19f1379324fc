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
    # the default is auto: the tables cover dgx-h100's H100
    assert default["compute_model"] == "kernels" and default["ttft_clock"] == "kernel"
    code, out, _ = run(capsys, "ttft", *BASE, "--new-tokens", "512", "--cached-tokens", "8192",
                       "--compute-model", "roofline", "--json")
    assert code == 0
    roofline = json.loads(out)
    assert roofline["compute_model"] == "roofline"
    code, out, _ = run(capsys, "ttft", *BASE, "--new-tokens", "512", "--cached-tokens", "8192",
                       "--compute-model", "kernels", "--json")
    assert code == 0
    kernels = json.loads(out)
    assert kernels["compute_model"] == "kernels"
    assert kernels["compute_s"] > roofline["compute_s"]
    assert kernels["transfer_s"] == roofline["transfer_s"]


def test_kappa_in_kernel_mode(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kappa", *BASE, "--new-tokens", "512", "--compute-model",
                       "kernels", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["method"].startswith("kernels")
    # the CLI prints the library's answer, and at that K the load time meets the kernel-mode
    # compute time (the crossing's definition; tests/cost/test_kernel_kappa.py checks the
    # solver against a scan)
    from kvroof.cost.compute import compute_time
    from kvroof.cost.deployment import deployment
    from kvroof.cost.kappa import kappa_crit
    from kvroof.cost.transfer import transfer_time

    dep = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, compute_model="kernels")
    k_star = float(kappa_crit(dep, 512).kappa_crit)
    assert data["kappa_crit"] == pytest.approx(k_star, rel=1e-6)
    assert float(transfer_time(dep, k_star * 512, 512)) == pytest.approx(
        float(compute_time(dep, 512, k_star * 512)), rel=1e-4)


def test_client_clock_and_routing_flags(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ttft", "--model", "qwen3-30b-a3b", "--accelerator", "h20", "--engine",
            "vllm-0.12-offload", "--new-tokens", "16", "--cached-tokens", "1008", "--json"]
    code, out, _ = run(capsys, *argv)
    kernel = json.loads(out)
    code, out, _ = run(capsys, *argv, "--ttft-clock", "client")
    client = json.loads(out)
    assert code == 0 and client["ttft_clock"] == "client"
    # vllm-0.12-offload: 31 ms + 1.045 us a prompt token (agentic-kvc's GPU-hit TTFT) and one
    # iteration's 0.45 ms iteration_overhead (engine_specs/vllm-0.12-offload.yaml)
    assert client["serving_overhead_s"] == pytest.approx(31e-3 + 1.045e-6 * 1024 + 0.45e-3)
    assert client["ttft_s"] == pytest.approx(kernel["ttft_s"] + client["serving_overhead_s"])
    routed = []
    for routing in ("balanced", "power_law_1.01"):
        code, out, _ = run(capsys, "ttft", *BASE, "--new-tokens", "4096", "--cached-tokens", "0",
                           "--compute-model", "kernels", "--moe-routing", routing, "--json")
        assert code == 0 and json.loads(out)["compute_model"] == "kernels"
        routed.append(json.loads(out)["compute_s"])
    assert routed[1] != routed[0]  # the routing reaches the MoE table


def test_bad_values_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "ttft", *BASE, "--new-tokens", "1", "--cached-tokens", "1",
                       "--compute-model", "fast")
    assert code == 2 and "--compute-model" in err
    code, out, _ = run(capsys, "ttft", "--help")
    assert "--compute-model" in out and "--ttft-clock" in out and "--moe-routing" in out


def test_auto_with_a_compute_override_says_roofline_and_why(
        capsys: pytest.CaptureFixture[str]) -> None:
    """--compute under auto: the roofline times the compute and the output says why; under
    --compute-model kernels it is a one-line error naming the flag."""
    code, out, _ = run(capsys, "ttft", *BASE, "--new-tokens", "512", "--cached-tokens", "8192",
                       "--compute-model", "auto", "--compute", "1000 TFLOPS")
    assert code == 0
    assert "roofline (a compute override/calibration was given" in out
    code, _, err = run(capsys, "ttft", *BASE, "--new-tokens", "512", "--cached-tokens", "8192",
                       "--compute-model", "kernels", "--compute-efficiency", "0.5")
    assert code == 2 and err.startswith("kvroof: error: --compute-efficiency: ")
    assert len(err.strip().splitlines()) == 1
