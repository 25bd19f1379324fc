"""No flag is taken twice (issue 24, item 4): ``--tp 1 --tp 2`` silently kept the last value
although the README says a value given twice is an error. Every store-type flag of every
command now refuses a second value with one line and exit status 2."""

from __future__ import annotations

import argparse

import pytest

from kvroof.cli import build_parser, main

_REPEATABLE = (argparse._AppendAction, argparse._CountAction, argparse._HelpAction,
               argparse._VersionAction, argparse._ExtendAction)


def _parsers(parser: argparse.ArgumentParser, name: str = "kvroof",
             ) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found += _parsers(sub, f"{name} {sub_name}")
    return found


def test_every_single_valued_flag_of_every_command_is_taken_once() -> None:
    """Each optional action is either one that refuses a second value (its class comes from
    kvroof.cli.main) or one meant to repeat (append, count, help, version)."""
    checked = 0
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if not action.option_strings or isinstance(action, _REPEATABLE):
                continue
            assert type(action).__module__ == "kvroof.cli.main", (name, action.option_strings)
            checked += 1
    assert checked > 100  # every command's flags were walked


@pytest.mark.parametrize(("argv", "flag"), [
    (["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100", "--tp", "1", "--tp", "2"],
     "--tp"),
    (["ttft", "--model", "llama-3.1-8b", "--accelerator", "h100", "--new-tokens", "64",
      "--new-tokens", "128", "--cached-tokens", "1024"], "--new-tokens"),
    (["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100", "--bandwidth", "64 GB/s",
      "--bandwidth", "32 GB/s"], "--bandwidth"),
    (["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100", "--mode", "paper",
      "--mode", "full"], "--mode"),
    (["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100", "--engine", "vllm-0.12",
      "--engine", "vllm-0.11-offload"], "--engine"),
    (["simulate", "--model", "llama-3.1-8b", "--accelerator", "h100", "--rps", "1",
      "--rps", "2"], "--rps"),
    (["kappa", "--model", "llama-3.1-8b", "--model", "llama-3.1-70b", "--accelerator",
      "h100"], "--model"),
])
def test_a_flag_given_twice_is_one_error_line(argv: list[str], flag: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"argument {flag}" in err and "given twice" in err


def test_a_flag_and_its_negation_conflict(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100", "--allreduce",
              "--no-allreduce"])
    assert done.value.code == 2
    assert "argument --allreduce/--no-allreduce: conflicts with --allreduce" in \
        capsys.readouterr().err


def test_a_flag_given_once_still_works_and_leaves_no_trace() -> None:
    parser = build_parser("kappa")
    args = parser.parse_args(["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100",
                              "--tp", "2"])
    assert args.tp == 2 and not any(key.startswith("_kvroof") for key in vars(args))
    again = parser.parse_args(["kappa", "--model", "llama-3.1-8b", "--accelerator", "h100",
                               "--tp", "4"])  # a parser parses twice without remembering
    assert again.tp == 4
