"""`python -m kvroof` is the command line: same output, same exit statuses, in a fresh
interpreter (as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvroof import __version__
from kvroof.__main__ import entry


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


def test_ctrl_c_while_importing_the_cli(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The `kvroof` script runs kvroof.__main__.entry, which imports the command line (numpy,
    the cost model) inside the same one-line, 130 handling as the commands."""

    class Interrupting:
        def find_spec(self, name: str, path: object, target: object = None) -> None:
            if name == "kvroof.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, "kvroof.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    assert entry() == 130
    assert capsys.readouterr().err == "kvroof: interrupted\n"


def test_the_script_entry_point() -> None:
    """pyproject's [project.scripts] names entry (what the test above covers)."""
    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    assert 'kvroof = "kvroof.__main__:entry"' in text


def test_interrupted_clears_a_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the measure progress bar is drawn in place (kvroof.measure.progress); the
    interrupt line clears it first, so stderr still ends with one clean line."""
    import io

    from kvroof.cli import interrupted

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    terminal.write("\r\x1b[Kprefill [####----] 40%")
    monkeypatch.setattr(sys, "stderr", terminal)
    interrupted()
    assert terminal.getvalue().endswith("40%\r\x1b[Kkvroof: interrupted\n")


def _modules_after(tmp_path: Path, argv: list[str]) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``kvroof argv``."""
    code = ("import contextlib, io, sys\nfrom kvroof.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        main(sys.argv[1:])\n    except SystemExit:\n        pass\n"
            "print('\\n'.join(sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          cwd=tmp_path, check=True)
    return set(done.stdout.split())


def test_commands_load_only_their_own_modules(tmp_path: Path) -> None:
    """Start-up time: ``kvroof --help`` lists the commands without numpy, pydantic or any
    command module; a cost command loads no plotting, workload or measurement code."""
    helped = _modules_after(tmp_path, ["--help"])
    assert not {"numpy", "pydantic", "yaml", "kvroof.cli.cost"} & helped
    kappa = _modules_after(tmp_path, ["kappa", "--model", "qwen3-8b", "--system", "dgx-h100"])
    assert "kvroof.cost.kappa" in kappa
    assert not {"matplotlib", "kvroof.cli.plot", "kvroof.cli.workload", "kvroof.cli.measure",
                "kvroof.specs.hf", "kvroof.report"} & kappa
    # the built-in specs come from their JSON copy (kvroof.specs.builtin_cache): no PyYAML
    assert not {"yaml", "kvroof.yamlfiles"} & kappa
