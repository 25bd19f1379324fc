"""Document-QA loader: K and T under the three cache treatments, worked out by hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvroof.errors import KvroofError
from kvroof.workload.docqa import load_docqa
from kvroof.workload.reading import SkippedRecordsWarning
from kvroof.workload.records import UNKNOWN_OUTPUT
from kvroof.workload.tokens import ApproximateTokensWarning

Writer = Callable[..., Path]

LINES = [
    {"doc_id": "d1", "document_tokens": 100, "question_tokens": 5, "answer_tokens": 2},
    {"doc_id": "d1", "question_tokens": 7},                  # document left out: known
    {"doc_id": "d2", "document_tokens": 50, "question_tokens": 3},
    {"doc_id": "d1", "document_tokens": 100, "question_tokens": 1},  # repeated, consistent
]


def test_cached_after_first_use(write_jsonl: Writer) -> None:
    w = load_docqa(write_jsonl(LINES))
    # d1 first: K = 0, T = 100 + 5; d1 again: K = 100, T = 7
    # d2 first: K = 0, T = 50 + 3;  d1 again: K = 100, T = 1
    assert w.new_tokens.tolist() == [105, 7, 53, 1]
    assert w.cached_tokens.tolist() == [0, 100, 0, 100]
    assert w.output_tokens.tolist() == [2, UNKNOWN_OUTPUT, UNKNOWN_OUTPUT, UNKNOWN_OUTPUT]
    assert w.group_id.tolist() == ["d1", "d1", "d2", "d1"]
    assert "token counts given in the file" in w.source


def test_preloaded(write_jsonl: Writer) -> None:
    w = load_docqa(write_jsonl(LINES), preloaded=True)
    # K = document, T = question on every line (the paper's convention)
    assert w.new_tokens.tolist() == [5, 7, 3, 1]
    assert w.cached_tokens.tolist() == [100, 100, 50, 100]


def test_never_cached(write_jsonl: Writer) -> None:
    w = load_docqa(write_jsonl(LINES), cache_documents=False)
    # K = 0, T = document + question on every line
    assert w.new_tokens.tolist() == [105, 107, 53, 101]
    assert w.cached_tokens.tolist() == [0, 0, 0, 0]
    with pytest.raises(KvroofError, match="preloaded documents need cache_documents"):
        load_docqa(write_jsonl(LINES), cache_documents=False, preloaded=True)


def test_text_fields_use_the_counter(write_jsonl: Writer, words: Any) -> None:
    lines = [{"doc_id": 7, "document": "a b c d e f", "question": "why so", "answer": "x"},
             {"doc_id": 7, "question": "how"}]
    w = load_docqa(write_jsonl(lines), tokenizer=words)
    # document 6 words, question 2: (T 8, K 0); then (T 1, K 6)
    assert w.new_tokens.tolist() == [8, 1]
    assert w.cached_tokens.tolist() == [0, 6]
    assert w.output_tokens.tolist() == [1, UNKNOWN_OUTPUT]
    assert w.group_id.tolist() == ["7", "7"]
    assert "tokens: words" in w.source


def test_heuristic_by_default(write_jsonl: Writer) -> None:
    lines = [{"doc_id": "d", "document": "x" * 400, "question": "y" * 20}]
    with pytest.warns(ApproximateTokensWarning):
        w = load_docqa(write_jsonl(lines))
    # ceil(400 / 4) + ceil(20 / 4) = 100 + 5
    assert w.new_tokens.tolist() == [105]


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ({"document_tokens": 9, "question_tokens": 1}, "line 2: missing field 'doc_id'"),
        ({"doc_id": "new", "question_tokens": 1},
         "line 2: missing field 'document' or 'document_tokens'"),
        ({"doc_id": "d1"}, "line 2: missing field 'question' or 'question_tokens'"),
        ({"doc_id": "d1", "document_tokens": 99, "question_tokens": 1},
         "line 2: document 'd1' has 99 tokens here but 100 on line 1"),
        ({"doc_id": "x", "document": "a", "document_tokens": 1, "question_tokens": 1},
         "line 2: give one of 'document' or 'document_tokens', not both"),
        ({"doc_id": "x", "document_tokens": -3, "question_tokens": 1},
         "line 2: 'document_tokens' must be >= 0"),
        ({"doc_id": "x", "document_tokens": "12", "question_tokens": 1},
         "line 2: 'document_tokens' must be an integer"),
        ({"doc_id": [1], "document_tokens": 1, "question_tokens": 1},
         "line 2: 'doc_id' must be text or an integer"),
        ("{not json", "line 2: not valid JSON"),
        ("[1, 2]", "line 2: expected a JSON object, got an array"),
    ],
)
def test_bad_line(write_jsonl: Writer, bad_line: Any, message: str) -> None:
    path = write_jsonl([LINES[0], bad_line, LINES[2]])
    with pytest.raises(KvroofError, match=message) as info:
        load_docqa(path)
    assert str(info.value).startswith(f"{path}: line 2: ")
    with pytest.warns(SkippedRecordsWarning, match="skipped 1 bad line "):
        w = load_docqa(path, skip_bad=True)
    assert w.skipped == 1 and len(w) == 2


def test_blank_lines_keep_line_numbers(write_jsonl: Writer) -> None:
    path = write_jsonl([LINES[0], "", "   ", "{broken"])
    with pytest.raises(KvroofError, match="line 4: not valid JSON"):
        load_docqa(path)


def test_empty_and_wrong_format(tmp_path: Path, write_json: Writer) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(KvroofError, match="empty file"):
        load_docqa(empty)
    sharegpt = write_json([{"conversations": []}])
    with pytest.raises(KvroofError, match="a JSON array, not JSON Lines"):
        load_docqa(sharegpt, skip_bad=True)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"doc_id": "a", "document_tokens": 1, "question_tokens": 1}\n'
                     b'{"doc_id": "caf\xe9"}\n')
    with pytest.raises(KvroofError, match="not UTF-8"):
        load_docqa(path)
