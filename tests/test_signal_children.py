"""The interruption tests cannot pass vacuously (issue 24, item 14): a test run started in the
background of a script inherits SIGINT ignored (POSIX), and a child started from it would ignore
the Ctrl-C a test sends it. The children of the interruption tests start through
:mod:`tests.signal_children`, which resets SIGINT and SIGTERM; here the same helper runs a
command that is interrupted midway, from a test process that ignores or blocks the signal, and
the command still ends with ``kvroof: interrupted`` and 130 (``terminated``, 143, for SIGTERM).
Without the reset the same command runs to its end and exits 0: what a vacuous test would see."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.signal_children import sigint_raises
from tests.test_signals import run_patched


def stop_midway(sig: int) -> str:
    """Setup for :func:`run_patched`: ``kvroof list links`` sends ``sig`` to itself before it
    lists anything (a Ctrl-C while the command runs)."""
    return f"""
        import kvroof.cli.specs as specs
        real = specs.run_list
        def list_after_a_signal(args):
            kill({int(sig)})
            return real(args)
        specs.run_list = list_after_a_signal
        """


@contextmanager
def inherited(how: str, sig: int) -> Iterator[None]:
    """This (the parent) process with ``sig`` ignored or blocked, as a child would inherit it."""
    if how == "ignored":
        previous = signal.signal(sig, signal.SIG_IGN)
        try:
            yield
        finally:
            signal.signal(sig, previous)
    else:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


CASES = [
    ("ignored", signal.SIGINT, 130, "kvroof: interrupted\n"),  # a background job of a script
    ("blocked", signal.SIGINT, 130, "kvroof: interrupted\n"),
    ("ignored", signal.SIGTERM, 143, "kvroof: terminated\n"),  # nohup-like parents
    ("blocked", signal.SIGTERM, 143, "kvroof: terminated\n"),
]


@pytest.mark.parametrize(("how", "sig", "status", "line"), CASES)
def test_the_child_is_stopped_whatever_the_test_run_inherited(
        tmp_path: Path, how: str, sig: int, status: int, line: str) -> None:
    with inherited(how, sig):
        done = run_patched(stop_midway(sig), "list", "links", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (status, "", line)


@pytest.mark.parametrize(("how", "sig", "status", "line"), CASES)
def test_without_the_reset_the_signal_is_lost(
        tmp_path: Path, how: str, sig: int, status: int, line: str) -> None:
    """The situation the reset is for: the same child without it never sees the signal and
    finishes the command, so a test that expects the stop would not get it (and a test that
    only checks nothing was left behind would pass without anything having been tried)."""
    with inherited(how, sig):
        done = run_patched(stop_midway(sig), "list", "links", cwd=tmp_path, preexec_fn=None)
    assert done.returncode == 0 and done.stderr == "" and "pcie" in done.stdout


@pytest.mark.parametrize("how", ["ignored", "blocked"])
def test_in_process_ctrl_c_whatever_the_test_run_inherited(how: str) -> None:
    """:func:`sigint_raises`, for the tests that raise a real SIGINT in the test process."""
    before = signal.getsignal(signal.SIGINT)
    with inherited(how, signal.SIGINT):
        with pytest.raises(KeyboardInterrupt), sigint_raises():
            signal.raise_signal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) == (signal.SIG_IGN if how == "ignored"
                                                   else before)
        if how == "blocked":
            assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
