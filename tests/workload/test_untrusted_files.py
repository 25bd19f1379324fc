"""Workload files as they come: gzip-compressed (known by content), ShareGPT as JSON Lines,
and hostile input (gzip bombs, endless lines, deep nesting, huge numbers) that gives one line
naming the file instead of a traceback or unbounded memory."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kvroof.cli import main
from kvroof.errors import KvroofError
from kvroof.workload import guess_format, load_workload, reading
from kvroof.workload.sharegpt import load_sharegpt
from kvroof.workload.table import load_table, write_table
from kvroof.workload.tokens import ApproximateTokensWarning

SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def quiet_load(path: Path, **options: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximateTokensWarning)
        return load_workload(path, **options)


def same(a: Any, b: Any) -> None:
    for column in ("new_tokens", "cached_tokens", "output_tokens", "group_id"):
        assert np.array_equal(getattr(a, column), getattr(b, column)), column
    assert a.name == b.name


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.iterdir()))
def test_gzip_is_read_transparently(tmp_path: Path, sample: str) -> None:
    """Every sample gzipped loads exactly like the plain file (the plain load is the expected
    value), named `.gz` or not: compression is known from the first bytes."""
    plain = SAMPLES / sample
    data = gzip.compress(plain.read_bytes())
    with_suffix = tmp_path / (sample + ".gz")
    with_suffix.write_bytes(data)
    hidden = tmp_path / "hidden" / sample
    hidden.parent.mkdir()
    hidden.write_bytes(data)
    expected = quiet_load(plain)
    assert guess_format(with_suffix) == guess_format(hidden) == guess_format(plain)
    same(quiet_load(with_suffix), expected)  # named after the file without .gz
    same(quiet_load(hidden), expected)


def test_cli_reads_gzip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress((SAMPLES / "table_sample.csv").read_bytes()))
    assert main(["workload", "stats", str(path)]) == 0
    plain_out = capsys.readouterr().out
    assert main(["workload", "stats", str(SAMPLES / "table_sample.csv")]) == 0
    expected = capsys.readouterr().out
    # the same statistics; only the source line (the file name) differs
    assert plain_out.splitlines()[3:] == expected.splitlines()[3:]
    assert "workload: t\n" in plain_out


def test_gzip_bomb_stops_at_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """10 MB of blank lines compress to about 10 kB; with the cap set to 1 MiB the read stops
    there with one line (the real cap, 16 GiB, is the same code with a larger number)."""
    monkeypatch.setattr(reading, "MAX_DECOMPRESSED_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.jsonl"
    bomb.write_bytes(gzip.compress(b'{"T": 1, "K": 2}\n' + b"\n" * 10_000_000))
    assert bomb.stat().st_size < 100_000
    with pytest.raises(KvroofError) as info:
        load_table(bomb)
    assert str(info.value) == (f"{bomb}: decompresses to more than 1 MiB, the limit for a "
                               "compressed workload (a gzip bomb?)")


def test_broken_and_other_compression(tmp_path: Path) -> None:
    data = gzip.compress((SAMPLES / "table_sample.csv").read_bytes())
    cut = tmp_path / "cut.csv"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(KvroofError, match=r"cut.csv: broken gzip data \(Compressed file ended"):
        load_table(cut)
    for name, compress in (("bzip2", bz2.compress), ("xz", lzma.compress)):
        path = tmp_path / f"{name}.csv"
        path.write_bytes(compress(b"T,K\n1,2\n"))
        with pytest.raises(KvroofError, match=f"{name}.csv: {name}-compressed; kvroof reads "
                                              "plain or gzip-compressed files"):
            load_table(path)


def test_endless_line_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "MAX_RECORD_CHARS", 1000)
    long_line = tmp_path / "t.jsonl"
    long_line.write_text('{"T": 1, "K": 2}\n{"T": 1, "K": 2, "pad": "' + "x" * 2000 + '"}\n')
    with pytest.raises(KvroofError, match=r"t.jsonl: line 2 is longer than 1,000 characters"):
        load_table(long_line)
    csv_file = tmp_path / "t.csv"
    csv_file.write_text("T,K\n" + "1" * 2000 + ",2\n")
    with pytest.raises(KvroofError, match=r"t.csv: line 2 is longer than 1,000 characters"):
        load_table(csv_file)
    array = tmp_path / "s.json"
    array.write_text('[{"conversations": [{"from": "human", "value": "' + "x" * 5000 + '"}]}]')
    with pytest.raises(KvroofError, match=r"s.json: conversation 0 is longer than 1,000 "):
        load_sharegpt(array)
    ok = tmp_path / "ok.jsonl"  # exactly at the limit, newline not counted
    record = '{"T": 1, "K": 2, "pad": "'
    ok.write_text(record + "x" * (1000 - len(record) - 2) + '"}\n')
    assert len(load_table(ok)) == 1


def test_deep_nesting_and_huge_numbers_are_bad_records(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"T": 1, "K": 2}\n{"T": ' + "[" * 100_000 + "]" * 100_000 + ', "K": 1}\n'
                    '{"T": ' + "1" * 5000 + ', "K": 1}\n{"T": 3, "K": 4}\n')
    with pytest.raises(KvroofError, match=r"t.jsonl: line 2: nested too deeply to read"):
        load_table(path)
    with pytest.warns(UserWarning, match=r"skipped 2 bad rows"):
        table = load_table(path, skip_bad=True)
    assert table.new_tokens.tolist() == [1, 3]
    array = tmp_path / "s.json"
    array.write_text("[" + "[" * 100_000 + "]" * 100_000 + "]")
    with pytest.raises(KvroofError, match=r"s.json: conversation 0: nested too deeply to read"):
        load_sharegpt(array)
    array.write_text("[" + "1" * 5000 + "]")
    with pytest.raises(KvroofError, match=r"s.json: conversation 0: an integer too long to read"):
        load_sharegpt(array)


def test_cli_deep_first_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("{" + '"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    assert main(["workload", "stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "x.jsonl: line 1: not valid JSON (Expecting ',' delimiter, " \
        "column 9), so the format cannot be told from it" in err


CONVERSATIONS = [
    {"id": "a", "conversations": [{"from": "human", "value": "one two"},
                                  {"from": "gpt", "value": "three four five"},
                                  {"from": "human", "value": "six"}]},
    {"conversations": [{"role": "user", "content": "seven eight nine ten"}]},
]


def test_sharegpt_json_lines(tmp_path: Path, words: Any) -> None:
    """The same conversations as a JSON array and as JSON Lines load the same requests:
    T = [2, 1, 4], K = [0, 5, 0] by the word counter (2 + 3 words before 'six')."""
    array = tmp_path / "c.json"
    array.write_text(json.dumps(CONVERSATIONS))
    lines = tmp_path / "c.jsonl"
    lines.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS))
    from_array = load_sharegpt(array, tokenizer=words)
    from_lines = load_sharegpt(lines, tokenizer=words)
    assert from_lines.new_tokens.tolist() == [2, 1, 4]
    assert from_lines.cached_tokens.tolist() == [0, 5, 0]
    assert from_lines.group_id.tolist() == ["a", "a", "1"]  # the index when there is no id
    for column in ("new_tokens", "cached_tokens", "output_tokens", "group_id"):
        assert np.array_equal(getattr(from_array, column), getattr(from_lines, column))
    assert guess_format(lines) == "sharegpt"
    compressed = tmp_path / "c2.jsonl"
    compressed.write_bytes(gzip.compress(lines.read_bytes()))
    assert load_sharegpt(compressed, tokenizer=words).new_tokens.tolist() == [2, 1, 4]


def test_sharegpt_json_lines_bad_lines(tmp_path: Path, words: Any) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(CONVERSATIONS[0]) + "\n{broken\n"
                    + json.dumps({"conversations": "no"}) + "\n")
    with pytest.raises(KvroofError, match=r"c.jsonl: line 2: not valid JSON"):
        load_sharegpt(path, tokenizer=words)
    with pytest.warns(UserWarning, match=r"skipped 2 bad conversations \(first: line 2: not"):
        workload = load_sharegpt(path, tokenizer=words, skip_bad=True)
    assert workload.skipped == 2 and len(workload) == 2


def test_csv_header_is_recognised_by_content(tmp_path: Path) -> None:
    path = tmp_path / "requests.txt"
    path.write_text("new_tokens,cached_tokens\n1,2\n")
    assert guess_format(path) == "table"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(KvroofError, match="cannot tell the format"):
        guess_format(path)


def test_tables_are_written_uncompressed(tmp_path: Path) -> None:
    table = load_table(SAMPLES / "table_sample.csv")
    with pytest.raises(KvroofError, match=r"kvroof writes uncompressed tables"):
        write_table(table, tmp_path / "t.csv.gz")


def test_a_key_written_twice_is_a_bad_line(tmp_path: Path) -> None:
    """JSON keeps the last of two equal keys; a trace line that writes one twice is refused
    (skippable), as spec files and configs refuse it."""
    from kvroof.workload.mooncake import load_mooncake

    path = tmp_path / "m.jsonl"
    good = '{"timestamp": 1, "input_length": 100, "output_length": 3, "hash_ids": [2]}\n'
    path.write_text('{"timestamp": 0, "input_length": 100, "input_length": 5, '
                    '"output_length": 3, "hash_ids": [1]}\n' + good)
    with pytest.raises(KvroofError, match="line 1: key 'input_length' written twice"):
        load_mooncake(path)
    with pytest.warns(UserWarning, match="skipped 1 bad line .*key 'input_length' written twice"):
        assert len(load_mooncake(path, skip_bad=True)) == 1


def test_a_key_written_twice_in_a_sharegpt_array(tmp_path: Path) -> None:
    """The streamed ShareGPT list refuses a key written twice as its JSON Lines form does."""
    path = tmp_path / "s.json"
    path.write_text('[{"id": "a", "conversations": [{"from": "human", "value": "hello there", '
                    '"value": "x"}]}]')
    with pytest.raises(KvroofError, match="conversation 0: key 'value' written twice"):
        load_workload(path)
