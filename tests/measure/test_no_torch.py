"""Without torch: kvroof and kvroof.measure import, and a benchmark says how to install torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.errors import KvroofError
from kvroof.measure import TORCH_MISSING, LinkSettings, run_link
from kvroof.specs.registry import Registry


def test_benchmark_without_torch_raises(
    monkeypatch: pytest.MonkeyPatch, registry: Registry
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(KvroofError) as caught:
        run_link(registry.model("llama-3.1-8b"), "cpu", LinkSettings.default("cpu", quick=True))
    assert str(caught.value) == "kvroof measure needs torch: pip install 'kvroof[measure]'"
    assert str(caught.value) == TORCH_MISSING


def test_cli_without_torch_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    code = main(["measure", "link", "--quick", "--device", "cpu", "-o", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert code == 2
    assert err == f"kvroof: error: {TORCH_MISSING}\n"
    assert not (tmp_path / "out").exists()


def test_imports_do_not_need_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import kvroof, kvroof.measure, kvroof.cli\n"
        "print(kvroof.measure.fit_latency_bandwidth([1e3, 1e6], [1e-6, 1e-4]).points)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
