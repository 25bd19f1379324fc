"""The human output says which compute model timed a result, and the flags of kernel mode that
would do nothing are refused (a review found kernel mode and its fallback invisible in text
output, and --moe-routing accepted on dense models and outside kernel mode)."""

from __future__ import annotations

import pytest

from kvroof.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_output_names_its_compute_model(capsys: pytest.CaptureFixture[str]) -> None:
    """The default (auto) picks the H100's kernel tables and says so; the roofline says so
    too."""
    code, out, _ = run(capsys, "kappa", "--model", "llama-3.1-8b", "--accelerator", "h100")
    (row,) = [line for line in out.splitlines() if line.startswith("compute model")]
    assert code == 0 and "kernels (measured per-op tables for h100-sxm" in row
    code, out, _ = run(capsys, "kappa", "--model", "llama-3.1-8b", "--accelerator", "h100",
                       "--compute-model", "roofline")
    (row,) = [line for line in out.splitlines() if line.startswith("compute model")]
    assert code == 0 and "roofline (one whole-model roofline" in row


@pytest.mark.parametrize(("argv", "expected"), [
    (["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100", "--compute-model",
      "kernels"], "kernels (measured per-op tables for h100-sxm: allreduce, attention, gemm"),
    (["kappa", "--model", "llama-3.1-8b", "--accelerator", "h20", "--compute-model",
      "kernels"], "kernels, but no kernel table covers h20: every op is timed at its roofline"),
    (["kappa", "--model", "llama-3.1-8b", "--accelerator", "h20", "--compute-model", "auto"],
     "roofline (auto: no kernel table covers h20)"),
    (["ttft", "--model", "llama-3.1-8b", "--accelerator", "h100", "--new-tokens", "64",
      "--cached-tokens", "4096", "--compute-model", "kernels"],
     "kernels (measured per-op tables for h100-sxm"),
])
def test_the_compute_model_is_named(argv: list[str], expected: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 0
    (row,) = [line for line in out.splitlines() if line.startswith("compute model")]
    assert expected in row


@pytest.mark.parametrize(("argv", "message"), [
    (["--model", "llama-3.1-8b", "--compute-model", "kernels"],
     "--moe-routing: llama-3.1-8b has no MoE layers"),
    (["--model", "qwen3-30b-a3b", "--compute-model", "roofline"],
     "--moe-routing: applies to kernel mode"),
])
def test_a_routing_that_would_do_nothing_is_refused(argv: list[str], message: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "kappa", *argv, "--accelerator", "h100", "--moe-routing",
                       "power_law_1.2")
    assert code == 2 and message in err and err.count("\n") == 1
