"""Signals end a command cleanly (issue 24, items 9 and 10): SIGTERM cleans up like Ctrl-C
(no temporary file or folder left, the previous output intact, one line, status 143), a signal
at any moment after start-up (even after the command finished, while the process exits, or
one that surfaces as an ``ImportError: initialization failed``) is one line and 130, and a
run removes the temporaries that a killed run left behind.

The commands run in a child Python that patches one function to send the signal to itself at
a chosen moment, so each moment is hit every time; the child starts with SIGINT and SIGTERM at
their defaults and unblocked (:mod:`tests.signal_children`), so that an ignored SIGINT inherited
from a background shell cannot make these tests pass vacuously."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from kvroof.outputs import remove_stale_temporaries, write_text
from tests.signal_children import default_stop_signals

ROOT = Path(__file__).resolve().parent.parent


def run_patched(setup: str, *argv: str, cwd: Path,
                preexec_fn: Callable[[], None] | None = default_stop_signals,
                ) -> subprocess.CompletedProcess[str]:
    """``kvroof ARGV`` in a child that first runs ``setup`` (Python, with ``os``, ``signal``
    and ``kill(sig)`` = send ``sig`` to itself); ``preexec_fn``: how the child's signals are
    set up (the default: SIGINT and SIGTERM at their defaults, whatever this process has)."""
    script = textwrap.dedent("""\
        import os, signal, sys
        def kill(sig):
            os.kill(os.getpid(), sig)
        """) + textwrap.dedent(setup) + textwrap.dedent(f"""\
        import kvroof.__main__
        sys.argv = ["kvroof", *{list(argv)!r}]
        sys.exit(kvroof.__main__.entry())
        """)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120, preexec_fn=preexec_fn)


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if "kvroof-tmp" in p.name]


PLOT = ("plot", "breakdown", "--model", "qwen3-32b", "--system", "dgx-h100", "-o")


@pytest.mark.parametrize(("sig", "line", "status"), [
    (signal.SIGTERM, "kvroof: terminated\n", 143),
    (signal.SIGINT, "kvroof: interrupted\n", 130),
])
def test_a_signal_mid_write_keeps_the_previous_file(tmp_path: Path, sig: int, line: str,
                                                    status: int) -> None:
    target = tmp_path / "b.png"
    target.write_bytes(b"previous figure")
    setup = f"""
        from matplotlib.figure import Figure
        def half_then_signal(self, fname, **kwargs):
            fname.write(b"half a figure")  # kvroof hands savefig the temporary file, open
            kill({int(sig)})
        Figure.savefig = half_then_signal
        """
    done = run_patched(setup, *PLOT, str(target), cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (status, "", line)
    assert target.read_bytes() == b"previous figure" and leftovers(tmp_path) == []


def test_sigterm_while_the_report_is_built_leaves_no_folder(tmp_path: Path) -> None:
    setup = """
        import kvroof.report.run as run_module
        def render(*args, **kwargs):
            kill(signal.SIGTERM)
        run_module.render_html = render
        """
    done = run_patched(setup, "report", "-o", str(tmp_path / "out"), "--no-simulation",
                       "--quiet", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (143, "kvroof: terminated\n")
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


def test_a_signal_after_the_command_finished_is_one_line_and_130(tmp_path: Path) -> None:
    """Ctrl-C just after the command returned, before the process is done."""
    setup = """
        import kvroof.cli.signals as signals
        real_quiet = signals.quiet
        def quiet_then_signal():
            real_quiet()
            kill(signal.SIGINT)
        signals.quiet = quiet_then_signal
        """
    done = run_patched(setup, "list", "links", cwd=tmp_path)
    assert done.returncode == 130 and done.stderr == "kvroof: interrupted\n"
    assert "pcie" in done.stdout  # the command itself had finished


def test_a_signal_while_the_process_exits_is_one_line_and_130(tmp_path: Path) -> None:
    """Ctrl-C in an exit handler, after entry() returned: no traceback, no death by signal."""
    setup = """
        import atexit
        import kvroof.cli.signals as signals
        real_install = signals.install
        def install_then_register():
            real_install()
            atexit.register(kill, signal.SIGINT)  # runs before kvroof's own exit handler
        signals.install = install_then_register
        """
    done = run_patched(setup, "list", "links", cwd=tmp_path)
    assert done.returncode == 130 and done.stderr == "kvroof: interrupted\n"


def test_a_signal_that_surfaces_as_another_error_is_one_line(tmp_path: Path) -> None:
    """An extension module interrupted in its import fails with ImportError("initialization
    failed"), as a PNG write once did: still one line and 130, not a traceback."""
    setup = """
        import kvroof.cli.specs as specs
        def interrupted_import(args):
            try:
                kill(signal.SIGINT)
            except KeyboardInterrupt:
                raise ImportError("initialization failed") from None
        specs.run_list = interrupted_import
        """
    done = run_patched(setup, "list", "models", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (130, "kvroof: interrupted\n")


def test_an_inherited_ignored_sigint_stays_ignored(tmp_path: Path) -> None:
    """A background job of a script inherits SIGINT ignored; kvroof leaves it so (as Python
    does), and still cleans up on SIGTERM."""
    setup = """
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        import kvroof.cli.specs as specs
        real = specs.run_list
        def list_after_ctrl_c(args):
            kill(signal.SIGINT)  # ignored
            return real(args)
        specs.run_list = list_after_ctrl_c
        """
    done = run_patched(setup, "list", "links", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "" and "pcie" in done.stdout


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_temporaries_of_dead_runs_are_removed(tmp_path: Path) -> None:
    """A run killed with SIGKILL leaves its temporary behind; the next write to the same
    target removes it, but never a live run's, nor anything that is not kvroof's."""
    dead, alive = _dead_pid(), os.getppid()
    stale_file = tmp_path / f".t.csv.{dead}-0123abcd.kvroof-tmp"
    stale_folder = tmp_path / f".out.{dead}-0123abcd-new.kvroof-tmp"
    live_file = tmp_path / f".t.csv.{alive}-0123abcd.kvroof-tmp"
    other = tmp_path / ".t.csv.notes"
    stale_file.write_text("half")
    stale_folder.mkdir()
    (stale_folder / "report.html").write_text("half")
    for path in (live_file, other):
        path.write_text("keep")
    write_text(tmp_path / "t.csv", "new\n")
    assert not stale_file.exists() and live_file.exists() and other.exists()
    assert remove_stale_temporaries(tmp_path, ".out.") == [stale_folder]
    assert (tmp_path / "t.csv").read_text() == "new\n"
