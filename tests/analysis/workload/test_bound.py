"""Transfer-bound shares of a workload: hand-built workloads where each request's bound is
worked out from the library's own per-request numbers or the paper's constant."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kvroof.analysis.workload.bound import compare_deployments, transfer_bound_shares
from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.cost.kappa import kappa_paper_for
from kvroof.cost.timing import ttft
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry
from kvroof.workload.records import Workload

REG = Registry(use_env=False)
H100 = deployment("qwen3-235b-a22b", accelerator="h100", registry=REG)


def workload(t: list[int], k: list[int]) -> Workload:
    return Workload.from_columns(new_tokens=t, cached_tokens=k, name="hand", source="test")


def test_paper_mode_uses_the_constant() -> None:
    """kappa_crit paper = 2 x 22e9 / 192512 x 63e9 / 989.4e12 = 14.55. Requests with K/T of
    1, 10 (compute-bound), 20 and 1000 (transfer-bound): 2 of 4; cached tokens
    (20x10 + 1000x2) / (1x100 + 10x10 + 20x10 + 1000x2) = 2200 / 2400."""
    assert float(kappa_paper_for(H100).kappa_crit) == pytest.approx(14.553, rel=1e-3)
    shares = transfer_bound_shares(workload([100, 10, 10, 2], [100, 100, 200, 2000]), H100,
                                   "paper")
    assert shares.requests_transfer_bound == 0.5
    assert shares.cached_tokens_transfer_bound == pytest.approx(2200 / 2400)
    assert shares.ttft is None and shares.kappa_crit == pytest.approx(14.553, rel=1e-3)


def test_full_mode_per_request_and_ttft_shares() -> None:
    t = [16, 512, 2048, 64, 0]
    k = [4096, 1024, 100_000, 0, 500]
    shares = transfer_bound_shares(workload(t, k), H100, "full")
    expected = [ttft(H100, ti, ki).bound == "transfer" for ti, ki in zip(t, k, strict=True)]
    assert shares.requests_transfer_bound == pytest.approx(sum(expected) / 5)
    bound_k = sum(ki for ki, b in zip(k, expected, strict=True) if b)
    assert shares.cached_tokens_transfer_bound == pytest.approx(bound_k / sum(k))
    assert shares.ttft_transfer_share is not None and shares.ttft is not None
    for mode in ("serial", "layerwise", "ideal"):
        results = [ttft(H100, ti, ki, mode) for ti, ki in zip(t, k, strict=True)]  # type: ignore[arg-type]
        exposed = sum(float(r.exposed_transfer) for r in results)
        total = sum(float(r.ttft) for r in results)
        assert shares.ttft_transfer_share[mode] == pytest.approx(exposed / total)
        assert shares.ttft[mode].p50 == pytest.approx(float(np.median([r.ttft for r in results])))


def test_compare_several_deployments() -> None:
    gh200 = deployment("qwen3-235b-a22b", system="gh200", registry=REG)
    rows = compare_deployments(workload([16, 16], [160, 16_000]), [H100, gh200])
    assert [(r.deployment, r.mode) for r in rows] == [
        (H100.short_label, "paper"), (H100.short_label, "full"),
        (gh200.short_label, "paper"), (gh200.short_label, "full")]
    # a faster link (C2C) never makes more of a workload transfer-bound
    assert rows[3].requests_transfer_bound <= rows[1].requests_transfer_bound


def test_errors() -> None:
    with pytest.raises(KvroofError, match="mode"):
        transfer_bound_shares(workload([1], [1]), H100, "half")  # type: ignore[arg-type]


def test_cli_stats_with_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = tmp_path / "w.csv"
    table.write_text("new_tokens,cached_tokens\n16,4096\n512,1024\n64,0\n")
    code = main(["workload", "stats", str(table), "--model", "qwen3-235b-a22b",
                 "--accelerator", "h100", "--tp", "8", "--compare", "hgx-h200:8", "--compare",
                 "gh200:1", "--json"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert code == 0
    # gh200 holds 96 GB, Qwen3-235B-A22B's weights 470 GB: left out with a warning
    assert "--compare gh200:1: qwen3-235b-a22b does not fit" in captured.err
    assert [row["mode"] for row in data["transfer_bound"]] == ["paper", "full"] * 2
    full = data["transfer_bound"][1]
    tp8 = deployment("qwen3-235b-a22b", accelerator="h100", registry=REG, tp=8)
    expected = [ttft(tp8, t, k).bound == "transfer" for t, k in ((16, 4096), (512, 1024),
                                                                 (64, 0))]
    assert full["requests_transfer_bound"] == pytest.approx(sum(expected) / 3)
    code = main(["workload", "stats", str(table), "--model", "qwen3-235b-a22b",
                 "--accelerator", "h100", "--tp", "8", "--mode", "full"])
    out = capsys.readouterr().out
    assert code == 0 and "transfer-bound share" in out and "TTFT layerwise" in out
    # the main deployment must fit: one H100 cannot hold it
    code = main(["workload", "stats", str(table), "--model", "qwen3-235b-a22b",
                 "--accelerator", "h100"])
    assert code == 2 and "does not fit" in capsys.readouterr().err


def test_cli_stats_model_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = tmp_path / "w.csv"
    table.write_text("new_tokens,cached_tokens\n16,4096\n")
    assert main(["workload", "stats", str(table), "--system", "dgx-h100"]) == 2
    assert "--system: applies to the transfer-bound shares, which need --model" in \
        capsys.readouterr().err
    assert main(["workload", "stats", str(table), "--model", "qwen3-235b-a22b", "--system",
                 "dgx-h100", "--tp", "8", "--compare", "gh200"]) == 2
    assert "--compare gh200: --tp: 8 exceeds" in capsys.readouterr().err
    assert main(["workload", "stats", str(table), "--model", "qwen3-235b-a22b", "--system",
                 "dgx-h100", "--tp", "8", "--compare", "hgx-h200:4", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["transfer_bound"]
    assert rows[-1]["deployment"] == "qwen3-235b-a22b, hgx-h200, TP 4"
