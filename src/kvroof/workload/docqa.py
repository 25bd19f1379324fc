"""Document question answering (JSON Lines) -> one request per question.

Each line: ``doc_id``; the document as ``document`` (text) or ``document_tokens`` (a count);
the question as ``question`` or ``question_tokens``; optionally the answer as ``answer`` or
``answer_tokens`` (the request's output tokens). A later line of an already seen document may
leave the document out; if it gives it, its token count must match the first one.

How the document's KV cache is treated:

- ``cache_documents=True`` (default): the first question on a document prefills it,
  ``K = 0, T = document + question``; every later question on it reuses it,
  ``K = document, T = question``.
- ``preloaded=True``: every document is in the cache before the first question (the paper's
  convention for NarrativeQA and DocFinQA): always ``K = document, T = question``.
- ``cache_documents=False``: nothing is reused: always ``K = 0, T = document + question``.

Lines are processed in file order; the set of seen documents is unbounded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvroof.errors import KvroofError, short_repr
from kvroof.workload.reading import (
    BadRecordError,
    BadRecords,
    count_field,
    iter_json_lines,
    one_of,
    plain_name,
    text_field,
)
from kvroof.workload.records import UNKNOWN_OUTPUT, Workload, WorkloadBuilder
from kvroof.workload.tokens import HeuristicTokenCounter, TokenCounter, UsedCounter

__all__ = ["load_docqa"]


def _tokens(record: dict[str, Any], text: str, count: str, counter: TokenCounter,
            required: bool = True) -> int | None:
    field, value = one_of(record, text, count, required=required)
    if not field:
        return None
    if field == count:
        return count_field(count, value)
    return counter.count(text_field(text, value))


def _doc_id(record: dict[str, Any]) -> str:
    if "doc_id" not in record:
        raise BadRecordError("missing field 'doc_id'")
    value = record["doc_id"]
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise BadRecordError("'doc_id' must be text or an integer")
    return str(value)


def load_docqa(
    path: str | Path,
    *,
    tokenizer: TokenCounter | None = None,
    cache_documents: bool = True,
    preloaded: bool = False,
    skip_bad: bool = False,
    name: str | None = None,
) -> Workload:
    """Requests of a document-QA JSON Lines file (see the module docstring)."""
    if preloaded and not cache_documents:
        raise KvroofError("preloaded documents need cache_documents=True")
    file = Path(path)
    counter = UsedCounter(tokenizer if tokenizer is not None else HeuristicTokenCounter())
    bad = BadRecords(file, skip_bad)
    builder = WorkloadBuilder()
    documents: dict[str, tuple[int, int]] = {}  # doc_id -> (tokens, first line)
    for lineno, record in iter_json_lines(file, bad):
        try:
            doc_id = _doc_id(record)
            known = documents.get(doc_id)
            doc_tokens = _tokens(record, "document", "document_tokens", counter,
                                 required=known is None)
            question = _tokens(record, "question", "question_tokens", counter)
            answer = _tokens(record, "answer", "answer_tokens", counter, required=False)
            if known is not None and doc_tokens is not None and doc_tokens != known[0]:
                raise BadRecordError(
                    f"document {short_repr(doc_id)} has {doc_tokens} tokens here but {known[0]} on "
                    f"line {known[1]}"
                )
        except BadRecordError as error:
            bad.reject(f"line {lineno}", str(error))
            continue
        assert question is not None  # required above
        if known is None:
            assert doc_tokens is not None
            documents[doc_id] = (doc_tokens, lineno)
            document = doc_tokens
        else:
            document = known[0]
        reused = preloaded or (cache_documents and known is not None)
        if reused:
            builder.add(question, document, _output(answer), doc_id)
        else:
            builder.add(document + question, 0, _output(answer), doc_id)
    bad.finish(len(builder))
    mode = (
        "documents preloaded" if preloaded
        else "documents cached after first use" if cache_documents
        else "documents never cached"
    )
    source = f"document QA in {file} ({mode}; {counter.describe()})"
    return builder.build(name or plain_name(file).stem, source, skipped=bad.skipped)


def _output(answer: int | None) -> int:
    return UNKNOWN_OUTPUT if answer is None else answer
