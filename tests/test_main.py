"""`python -m kvroof` is the command line: same output, same exit statuses, in a fresh
interpreter (as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvroof import __version__


def kvroof(cwd: Path, *argv: str, module: str = "kvroof") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *argv], capture_output=True,
                          text=True, cwd=cwd, check=False)


@pytest.mark.parametrize("module", ["kvroof", "kvroof.cli"])
def test_python_dash_m(tmp_path: Path, module: str) -> None:
    done = kvroof(tmp_path, "--version", module=module)
    assert (done.returncode, done.stdout) == (0, f"kvroof {__version__}\n")
    done = kvroof(tmp_path, "show", "accelerator", "h100", "--json", module=module)
    assert done.returncode == 0 and json.loads(done.stdout)["name"] == "h100-sxm"
    done = kvroof(tmp_path, "show", "model", "nope", module=module)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert done.stderr.startswith("kvroof: error: unknown model 'nope'")


def test_python_dash_m_writes_like_kvroof(tmp_path: Path) -> None:
    done = kvroof(tmp_path, "workload", "synth", "sharegpt", "-n", "100", "-o", "w.csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote 100 SYNTHETIC requests")
    assert (tmp_path / "w.csv").read_text().startswith("new_tokens,cached_tokens")
