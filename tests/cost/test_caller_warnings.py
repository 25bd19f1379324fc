"""The library says what the command line says (issue 23, item 12): kappa_crit and ttft on a
deployment that does not fit warn once per call (DoesNotFitWarning) and compute regardless; a
bandwidth override capped by the host DRAM warns with both figures (BandwidthCappedWarning);
kvroof's own callers, which check first, stay silent, so the command line prints each thing
once; ``kvroof kappa`` shows the bandwidth given beside the one used."""

from __future__ import annotations

import json
import math
import re
import warnings

import pytest

from kvroof.analysis.regimes import regime_curves
from kvroof.cli import main
from kvroof.cost.caller_warnings import BandwidthCappedWarning, bandwidth_cap
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.kappa import kappa_crit, kappa_forms
from kvroof.cost.memory_fit import DoesNotFitWarning, check_fit
from kvroof.cost.timing import ttft, ttft_batch
from kvroof.errors import KvroofError
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
QWEN = ["--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--tp", "8"]


def dep(model: str = "qwen3-235b-a22b", **settings: object) -> Deployment:
    return deployment(model, system="dgx-h100", tp=8, registry=REG, **settings)


def caught(call: object) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()  # type: ignore[operator]
    return [w for w in seen if issubclass(w.category, (DoesNotFitWarning,
                                                       BandwidthCappedWarning))]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_kappa_crit_warns_once_per_call_on_a_deployment_that_does_not_fit() -> None:
    bad = dep("deepseek-v3")  # 85 GB of FP8 weights per GPU, 72 GB usable
    seen = caught(lambda: kappa_crit(bad, [64, 128, 256, 8192]))
    assert len(seen) == 1 and seen[0].category is DoesNotFitWarning
    message = str(seen[0].message)
    with pytest.raises(KvroofError) as refused:
        check_fit(bad)
    assert message == f"{refused.value} (kappa_crit computes it regardless)"
    assert seen[0].filename == __file__  # it points at the caller's line
    with pytest.warns(DoesNotFitWarning):  # computed regardless
        assert math.isfinite(float(kappa_crit(bad, 128).kappa_crit))


def test_ttft_warns_once_per_call_with_the_requests_kv() -> None:
    bad = dep("deepseek-v3")
    seen = caught(lambda: ttft(bad, [[64], [128]], [[0, 1000, 65536]]))
    assert len(seen) == 1 and "ttft computes it regardless" in str(seen[0].message)
    good = dep()
    assert caught(lambda: ttft(good, 128, 16384)) == []
    # the weights fit, the KV of a 100M-token request does not
    huge = caught(lambda: ttft(good, 128, 100_000_000))
    assert len(huge) == 1 and "TB of KV" in str(huge[0].message)
    assert len(caught(lambda: ttft_batch(bad, [64, 64], [1000, 2000]))) == 1
    assert len(caught(lambda: kappa_forms(bad, 128))) == 1


def test_a_fitting_deployment_is_silent() -> None:
    good = dep()
    assert caught(lambda: kappa_crit(good, [64, 128])) == []
    assert caught(lambda: ttft(good, 128, 16384)) == []


def test_bandwidth_capped_by_host_dram_names_both_figures() -> None:
    fast = dep(bandwidth=900e9)
    seen = caught(lambda: kappa_crit(fast, 128))
    assert len(seen) == 1 and seen[0].category is BandwidthCappedWarning
    message = str(seen[0].message)
    assert "900 GB/s" in message and "56.32 GB/s" in message
    assert float(fast.effective_bandwidth) == pytest.approx(56.32e9)
    assert caught(lambda: ttft(dep(bandwidth=40e9), 128, 1000)) == []  # below the DRAM share
    assert caught(lambda: ttft(dep(), 128, 1000)) == []  # no override
    swept = dep(bandwidth=[10e9, 900e9])
    assert "1 of 2 values" in bandwidth_cap(swept)
    assert len(caught(lambda: ttft(swept, 128, 1000))) == 1


def test_kvroofs_own_callers_check_first_and_stay_silent() -> None:
    """An analysis of kvroof calls kappa_crit on what it was given; it is the caller's job to
    check (the report, the figures and the command line do), not a warning per inner call."""
    bad = dep("deepseek-v3")
    assert caught(lambda: regime_curves(bad, 8192)) == []


def test_cli_kappa_paper_mode_warns_once(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "kappa", "--model", "deepseek-v3", "--system", "dgx-h100",
                         "--tp", "8", "--mode", "paper")
    assert code == 0 and "kappa_crit" in out
    assert err.count("does not fit") == 1 and err.count("\n") == 1
    code, _, err = run(capsys, "kappa", "--model", "deepseek-v3", "--system", "dgx-h100",
                       "--tp", "8")
    assert code == 2 and err.count("\n") == 1 and "does not fit" in err


def test_cli_kappa_shows_the_bandwidth_used_beside_the_one_given(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "kappa", *QWEN, "--bandwidth", "900 GB/s")
    assert code == 0 and err.count("\n") == 1
    assert "kvroof: warning: bandwidth 900 GB/s per GPU is capped" in err and "56.32" in err
    # key and value are separated by the table's padding (two spaces at least)
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines() if line)
    assert rows["bandwidth (per GPU)"].startswith("56.32 GB/s")
    assert "900 GB/s" in rows["bandwidth (per GPU)"]
    capped = dep(bandwidth=900e9)
    hw_used = float(capped.effective_bandwidth) / float(capped.paper_compute)
    assert rows["kappa_HW (BW / C)"].startswith(f"{hw_used:.4g} B/FLOP at the 56.32 GB/s used")
    code, out, _ = run(capsys, "kappa", *QWEN, "--bandwidth", "900 GB/s", "--json")
    data = json.loads(out)
    assert data["bandwidth"] == data["bandwidth_used"] == pytest.approx(56.32e9)
    assert data["bandwidth_given"] == 900e9 and data["host_dram_share"] == pytest.approx(56.32e9)
    assert data["kappa_hw_used"] == pytest.approx(hw_used)
    code, out, _ = run(capsys, "kappa", *QWEN, "--bandwidth", "900 GB/s", "--mode", "paper")
    assert "kappa_crit, at the BW used" in out
    code, _, err = run(capsys, "ttft", *QWEN, "--bandwidth", "900 GB/s", "--new-tokens", "128",
                       "--cached-tokens", "1000")
    assert code == 0 and err.count("\n") == 1 and "capped" in err


def test_cli_without_a_cap_prints_one_bandwidth(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "kappa", *QWEN)
    assert code == 0 and err == ""
    line = next(x for x in out.splitlines() if x.startswith("bandwidth (per GPU)"))
    assert line.split()[-2:] == ["56.32", "GB/s"]
    data = json.loads(run(capsys, "kappa", *QWEN, "--json")[1])
    assert data["bandwidth_given"] is None and data["bandwidth_used"] == data["bandwidth"]
