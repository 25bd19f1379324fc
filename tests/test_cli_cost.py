"""`kvroof kappa` and `kvroof ttft`: the numbers equal the library's, JSON keys, bad flags."""

from __future__ import annotations

import json

import pytest

from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.timing import ttft


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_kappa_full_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kappa", "--model", "qwen3-235b-a22b", "--system", "dgx-h100",
                       "--tp", "8", "--new-tokens", "256", "--json")
    assert code == 0
    data = json.loads(out)
    expected = kappa_crit(deployment("qwen3-235b-a22b", system="dgx-h100", tp=8), 256)
    assert data["kappa_crit"] == pytest.approx(expected.kappa_crit)
    for key in ("kappa_crit", "kappa_model", "kappa_hw", "kv_bytes_per_token",
                "flops_per_token", "bandwidth", "compute", "mode"):
        assert key in data
    assert data["mode"] == "full"


def test_kappa_paper_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The paper's Qwen3-235B inputs: 2 x 22e9 / 192512 x 64e9 / 2000e12 = 7.31."""
    code, out, _ = run(capsys, "kappa", "--model", "Qwen/Qwen3-235B-A22B", "--accelerator",
                       "h100", "--mode", "paper", "--bandwidth", "64 GB/s", "--compute",
                       "2000 TFLOPS", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kappa_crit"] == pytest.approx(2 * 22e9 / 192512 * 64e9 / 2000e12)
    assert data["bandwidth"] == 64e9 and data["compute"] == 2000e12


def test_kappa_never_transfer_bound(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kappa", "--model", "deepseek-v3", "--accelerator", "h100",
                       "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kappa_crit"] is None
    assert data["never_transfer_bound"] is True
    assert "never transfer-bound" in data["reason"]


def test_kappa_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kappa", "--model", "llama-3.1-70b", "--accelerator", "h100",
                       "--kv-dtype", "fp8", "--mla", "absorbed")
    assert code == 0
    assert "kappa_crit" in out and "163.8 kB" in out  # fp8 halves 327,680 B


def test_ttft_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ttft", "--model", "qwen3-235b-a22b", "--system", "dgx-h100",
                       "--tp", "8", "--new-tokens", "64", "--cached-tokens", "65536",
                       "--overlap", "layerwise", "--json")
    assert code == 0
    data = json.loads(out)
    expected = ttft(deployment("qwen3-235b-a22b", system="dgx-h100", tp=8), 64, 65536,
                    "layerwise")
    assert data["ttft_s"] == pytest.approx(expected.ttft)
    for key in ("ttft_s", "compute_s", "transfer_s", "exposed_transfer_s", "p_oh",
                "transfer_share", "bound"):
        assert key in data
    assert data["bound"] == "transfer"


def test_ttft_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ttft", "--model", "llama-3.1-8b", "--accelerator", "b200",
                       "--new-tokens", "512", "--cached-tokens", "4096")
    assert code == 0
    assert "TTFT" in out and "bound" in out and " ms" in out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["kappa", "--model", "qwen9", "--accelerator", "h100"], "unknown model 'qwen9'"),
        (["kappa", "--model", "qwen3-32b", "--system", "nope"], "unknown system 'nope'"),
        (["kappa", "--model", "qwen3-32b"], "give --system or --accelerator"),
        (["kappa", "--model", "qwen3-32b", "--system", "dgx-h100", "--accelerator", "h100"],
         "not both"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--bandwidth", "fast"],
         "--bandwidth: 'fast' is not a number"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--tp", "0"], "--tp:"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--compute-efficiency",
          "1.5"], "--compute-efficiency: must be in (0, 1]"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--new-tokens", "0"],
         "--new-tokens: must be positive"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--mode", "both"],
         "invalid choice"),
        (["ttft", "--model", "qwen3-32b", "--accelerator", "h100", "--new-tokens", "1",
          "--cached-tokens", "3", "--tier", "x"], "--tier"),
        (["ttft", "--model", "qwen3-32b", "--accelerator", "h100", "--new-tokens", "1",
          "--cached-tokens", "-3"], "--cached-tokens: must not be negative"),
        (["ttft", "--model", "qwen3-32b", "--system", "dgx-h100", "--new-tokens", "1",
          "--cached-tokens", "3", "--tier", "tape=0.5"], "--tier: dgx-h100 has no tier 'tape'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert fragment in err, err
