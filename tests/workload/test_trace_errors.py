"""Trace errors say what is actually wrong, where (issue 24, item 12): a bad first JSON Lines
record, unknown output lengths, and a ``--skip-bad`` run that leaves no request to serve."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.errors import KvroofError
from kvroof.simulate import SimSettings, prepare_trace, simulate
from kvroof.specs.registry import Registry
from kvroof.workload import reading
from kvroof.workload.formats import guess_format, load_workload
from kvroof.workload.requests import load_requests
from kvroof.workload.sharegpt import load_sharegpt
from kvroof.workload.tokens import ApproximateTokensWarning

from .conftest import SAMPLES

REG = Registry(use_env=False)
TOO_LONG = "an integer too long to read (more than 4,300 digits)"


def cli_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one error line of a command that fails with exit status 2 (warnings left out)."""
    assert main(list(argv)) == 2
    lines = [line for line in capsys.readouterr().err.splitlines()
             if not line.startswith("kvroof: warning:")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("kvroof: error: ")
    return lines[0].removeprefix("kvroof: error: ")


# (a) the first line of a JSON Lines trace is reported as any other line


def test_first_line_key_written_twice_is_named(write_jsonl: Callable[..., Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(['{"new_tokens": 5, "cached_tokens": 3, "new_tokens": 6}',
                        {"new_tokens": 1, "cached_tokens": 2}])
    assert guess_format(path) == "table"  # told from the field names all the same
    expected = f"{path}: line 1: key 'new_tokens' written twice"
    with pytest.raises(KvroofError) as info:
        load_workload(path)
    assert str(info.value) == expected
    assert cli_error(capsys, "workload", "stats", str(path)) == expected
    with pytest.warns(reading.SkippedRecordsWarning, match="first: line 1: key 'new_tokens'"):
        assert load_workload(path, skip_bad=True).new_tokens.tolist() == [1]


def test_first_line_key_written_twice_mooncake(write_jsonl: Callable[..., Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The simulator's reader (load_requests) too, after blank lines (the line number counts
    them)."""
    path = write_jsonl(["", "",
                        '{"timestamp": 0, "input_length": 10, "output_length": 2, '
                        '"hash_ids": [1], "hash_ids": [2]}'])
    with pytest.raises(KvroofError) as info:
        load_requests(path)
    assert str(info.value) == f"{path}: line 3: key 'hash_ids' written twice"
    assert cli_error(capsys, "simulate", str(path), "--model", "llama-3.1-8b",
                     "--system", "dgx-h100") == f"{path}: line 3: key 'hash_ids' written twice"


@pytest.mark.parametrize("line", [1, 2])
def test_integer_too_long_to_read(write_jsonl: Callable[..., Path], line: int,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Python refuses to convert an integer of more than 4,300 digits: the same words on the
    first line as on any other (before: "the first line is not a JSON object", and "not valid
    JSON (Exceeds the limit (4300 digits) for integer string conversio)" later)."""
    huge = '{"new_tokens": ' + "9" * 4301 + ', "cached_tokens": 3}'
    good = {"new_tokens": 1, "cached_tokens": 2}
    path = write_jsonl([huge, good] if line == 1 else [good, huge])
    expected = f"{path}: line {line}: {TOO_LONG}"
    with pytest.raises(KvroofError) as info:
        load_workload(path)
    assert str(info.value) == expected
    assert cli_error(capsys, "workload", "stats", str(path)) == expected


def test_integer_too_long_in_a_sharegpt_list(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('[{"id": "a", "n": ' + "1" * 5000 + ', "conversations": []}]')
    with pytest.raises(KvroofError) as info:
        load_sharegpt(path)
    assert str(info.value) == (f"{path}: conversation 0: {TOO_LONG}; a broken array cannot be "
                               "skipped")


def test_first_line_not_json_names_line_and_problem(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl(["", '{"new_tokens": 5,, "cached_tokens": 3}'])
    with pytest.raises(KvroofError) as info:
        guess_format(path)
    assert str(info.value) == (
        f"{path}: line 2: not valid JSON (Expecting property name enclosed in double quotes, "
        "column 18), so the format cannot be told from it; give the format (sharegpt, docqa, "
        "mooncake, table)")


def test_first_line_nested_too_deeply(write_jsonl: Callable[..., Path]) -> None:
    path = write_jsonl(['{"a": ' * 100_000 + "1" + "}" * 100_000])
    with pytest.raises(KvroofError) as info:
        guess_format(path)
    assert str(info.value) == (
        f"{path}: line 1: nested too deeply to read, so the format cannot be told from it; give "
        "the format (sharegpt, docqa, mooncake, table)")


def test_first_record_longer_than_the_probe_is_read_whole(
        write_jsonl: Callable[..., Path]) -> None:
    """A document of 100,000 characters on the first line: the guess reads the whole record
    (before: the first 64 KiB, "not a JSON object")."""
    record = {"doc_id": "d", "document": "word " * 20_000, "question": "Why?"}
    path = write_jsonl([record, {"doc_id": "d", "question": "And?"}])
    assert guess_format(path) == "docqa"
    with pytest.warns(ApproximateTokensWarning):
        assert len(load_workload(path)) == 2


def test_first_record_longer_than_the_limit(write_jsonl: Callable[..., Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "MAX_RECORD_CHARS", 70_000)
    path = write_jsonl([json.dumps({"doc_id": "d", "document": "x" * 80_000})])
    with pytest.raises(KvroofError) as info:
        guess_format(path)
    assert str(info.value) == (f"{path}: line 1 is longer than 70,000 characters, the limit "
                               "for one record")


# (b) unknown output lengths name the flag (CLI) or the argument (Python)


def test_unknown_outputs_name_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    sample = SAMPLES / "sharegpt_sample.json"
    message = cli_error(capsys, "simulate", str(sample), "--model", "llama-3.1-8b",
                        "--system", "dgx-h100", "--rps", "2")
    assert message == (f"{sample}: request 3: output length unknown (2 of 8 requests); give "
                       "output lengths: --output-tokens takes N, exp:MEAN or uniform:LO:HI")


def test_unknown_outputs_name_the_argument() -> None:
    with pytest.warns(ApproximateTokensWarning):
        trace = load_requests(SAMPLES / "sharegpt_sample.json")
    dep = deployment("llama-3.1-8b", system="dgx-h100", registry=REG)
    with pytest.raises(KvroofError) as info:
        simulate(prepare_trace(trace, rps=2.0), [dep])
    assert str(info.value).endswith(
        "request 3: output length unknown (2 of 8 requests); give output lengths: "
        "prepare_trace(output_tokens=...) takes N, exp:MEAN or uniform:LO:HI")
    result = simulate(prepare_trace(trace, rps=2.0, output_tokens="exp:20"), [dep])
    assert result.summary["requests"] == 8


# (c) --skip-bad with nothing left says why


def _unservable(tmp_path: Path) -> Path:
    """One request longer than Llama-3.1's context, two whose KV fits no 1,000-token space."""
    path = tmp_path / "t.csv"
    path.write_text("new_tokens,cached_tokens,output_tokens,arrival_time\n"
                    "200000,0,10,0\n10,3000,5,1\n20,3000,5,2\n")
    return path


WHY = ("no request can be served: 1 skipped as longer than the context (first: row 1: input of "
       "200,000 tokens is longer than the model's context (131,072)); 2 skipped as larger than "
       "any replica's KV space (first: row 2: needs 3,015 tokens of KV but the largest "
       "replica's KV space holds 1,000 per GPU)")


def test_skip_bad_says_why_nothing_is_left(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _unservable(tmp_path)
    assert cli_error(capsys, "simulate", str(path), "--model", "llama-3.1-8b", "--system",
                     "dgx-h100", "--kv-tokens", "1000", "--skip-bad") == f"{path}: {WHY}"
    dep = deployment("llama-3.1-8b", system="dgx-h100", registry=REG)
    with pytest.raises(KvroofError) as info:
        simulate(load_requests(path), [dep], SimSettings(kv_tokens=1000), skip_bad=True)
    assert str(info.value) == f"{path}: {WHY}"


def test_skip_bad_counts_lines_skipped_on_loading(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("new_tokens,cached_tokens,output_tokens,arrival_time\n"
                    "200000,0,10,0\nx,1,1,1\n")
    with pytest.warns(reading.SkippedRecordsWarning):
        trace = load_requests(path, skip_bad=True)
    dep = deployment("llama-3.1-8b", system="dgx-h100", registry=REG)
    with pytest.raises(KvroofError) as info:
        simulate(trace, [dep], skip_bad=True)
    assert str(info.value) == (
        f"{path}: no request can be served: 1 skipped as longer than the context (first: row "
        "1: input of 200,000 tokens is longer than the model's context (131,072)); 1 bad "
        "record skipped on loading")
