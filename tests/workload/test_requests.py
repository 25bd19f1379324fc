"""Request traces with prefix-block chains: Mooncake's own hash ids, chains built for
ShareGPT conversations, document-QA documents and tables, and bad lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kvroof.errors import KvroofError
from kvroof.workload.reading import SkippedRecordsWarning
from kvroof.workload.records import Workload
from kvroof.workload.requests import (
    load_mooncake_requests,
    load_requests,
    requests_from_workload,
)

Writer = Callable[..., Path]
SAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def moon(t: int, n: int, out: int, ids: list[int]) -> dict[str, object]:
    return {"timestamp": t, "input_length": n, "output_length": out, "hash_ids": ids}


def test_mooncake_blocks_and_times(write_jsonl: Writer) -> None:
    path = write_jsonl([moon(0, 1000, 5, [7, 8]), moon(1500, 512, 1, [7])])
    trace = load_mooncake_requests(path)
    assert len(trace) == 2
    assert trace.arrival_time is not None and trace.arrival_time.tolist() == [0.0, 1.5]
    ids, ends = trace.blocks(0)
    assert ids.tolist() == [7, 8] and ends.tolist() == [512, 1000]   # last block partial
    assert trace.blocks(1)[1].tolist() == [512]
    assert trace.record.tolist() == [1, 2] and trace.where(1).endswith("line 2")


@pytest.mark.parametrize(("record", "message"), [
    (moon(0, 0, 5, []), "'input_length' must be >= 1"),
    (moon(0, 10, 0, [1]), "'output_length' must be >= 1"),
    (moon(0, 10, -3, [1]), "'output_length' must be >= 1"),
    (moon(0, 600, 5, [1, 2, 3]), "3 hash_ids but input_length 600"),
    (moon(-5, 10, 5, [1]), "earlier than the one before it"),
    (moon(0, 1500, 5, [4, 9, 4]), "hash_ids repeat 4"),   # a prefix hash names one position
])
def test_mooncake_bad_lines(write_jsonl: Writer, record: dict[str, object],
                            message: str) -> None:
    path = write_jsonl([moon(0, 10, 1, [1]), record])
    with pytest.raises(KvroofError, match=f"line 2: .*{message}"):
        load_mooncake_requests(path)
    with pytest.warns(SkippedRecordsWarning, match="skipped 1 bad line"):
        trace = load_mooncake_requests(path, skip_bad=True)
    assert len(trace) == 1 and trace.skipped == 1


def test_sharegpt_turns_share_the_conversation(write_json: Writer, words: object) -> None:
    """User turns of 3, 2 and 1 words with replies of 4 and 1 between them (one token per
    word): prompts of 3, 3 + 4 + 2 = 9 and 9 + 1 + 1 = 11 tokens. With 4-token blocks the full
    blocks [0, 4) and [4, 8) get the same ids in every prompt that holds them; the first prompt
    has only a partial block (3 tokens), which is its own."""
    path = write_json([{"id": "c", "conversations": [
        {"from": "human", "value": "a b c"}, {"from": "gpt", "value": "d e f g"},
        {"from": "human", "value": "h i"}, {"from": "gpt", "value": "j"},
        {"from": "human", "value": "k"}]}])
    trace = load_requests(path, "sharegpt", block_tokens=4, tokenizer=words)
    assert trace.input_tokens.tolist() == [3, 9, 11]
    first, second, third = (trace.blocks(i)[0].tolist() for i in range(3))
    assert second[:2] == third[:2]          # full blocks of the conversation are shared
    assert len(set(first) & set(second)) == 0   # turn 1 had only a partial block
    assert trace.blocks(2)[1].tolist() == [4, 8, 11]


def test_docqa_documents_are_the_shared_prefix(write_jsonl: Writer) -> None:
    path = write_jsonl([
        {"doc_id": "d", "document_tokens": 10, "question_tokens": 3},
        {"doc_id": "d", "question_tokens": 2},
        {"doc_id": "e", "document_tokens": 4, "question_tokens": 1}])
    trace = load_requests(path, "docqa", block_tokens=4)
    a, b, c = (trace.blocks(i) for i in range(3))
    # document d: blocks ending at 4, 8 and 10 shared; then the question
    assert a[1].tolist() == [4, 8, 10, 13] and b[1].tolist() == [4, 8, 10, 12]
    assert a[0].tolist()[:3] == b[0].tolist()[:3] and a[0][3] != b[0][3]
    assert set(c[0].tolist()).isdisjoint(a[0].tolist())
    assert trace.preload_blocks.tolist() == [0, 0, 0]
    preloaded = load_requests(path, "docqa", block_tokens=4, preloaded=True)
    assert preloaded.preload_blocks.tolist() == [3, 3, 1]


def test_table_prefix_ends_exactly_at_k(tmp_path: Path) -> None:
    """K = 1,100 with 512-token blocks: blocks end at 512, 1024 and 1100 (all preloaded), the
    T = 30 new tokens follow in a block of their own, so exactly K tokens can hit."""
    w = Workload.from_columns([30, 5], [1100, 0], output_tokens=[3, 4])
    trace = requests_from_workload(w, "table")
    assert trace.blocks(0)[1].tolist() == [512, 1024, 1100, 1130]
    assert trace.preload_blocks.tolist() == [3, 0]
    assert trace.arrival_time is None
    table = tmp_path / "t.csv"
    table.write_text("T,K,output_tokens,arrival_time,group_id\n1,600,2,0.5,g\n1,600,2,1.0,g\n")
    trace = load_requests(table)
    assert trace.blocks(0)[0].tolist()[:2] == trace.blocks(1)[0].tolist()[:2]  # group shares
    assert trace.arrival_time is not None and trace.arrival_time.tolist() == [0.5, 1.0]


def test_table_times_must_not_decrease(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("T,K,output_tokens,arrival_time\n1,0,2,2.0\n1,0,2,1.0\n")
    trace = load_requests(table)  # the times are checked when a simulation replays them
    with pytest.raises(KvroofError, match=r"t.csv: row 2: arrival time 1 s is earlier"):
        trace.check_times()


def test_take_and_repeat() -> None:
    w = Workload.from_columns([30, 5, 7], [600, 0, 0], output_tokens=[3, 4, 5],
                              arrival_time=[0.0, 1.0, 2.0])
    trace = requests_from_workload(w, "table")
    picked = trace.take([0, 2])
    assert picked.input_tokens.tolist() == [630, 7]
    assert picked.blocks(0)[1].tolist() == trace.blocks(0)[1].tolist()
    assert picked.blocks(1)[1].tolist() == trace.blocks(2)[1].tolist()
    twice = trace.repeat(2, 0.5)
    assert twice.arrival_time is not None
    assert twice.arrival_time.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert len(set(twice.blocks(0)[0].tolist()) & set(twice.blocks(1)[0].tolist())) == 0


def test_sample_trace_round_trip() -> None:
    trace = load_requests(SAMPLES / "mooncake_sample.jsonl")
    rows = [json.loads(line) for line in (SAMPLES / "mooncake_sample.jsonl").read_text()
            .splitlines() if line.strip()]
    assert trace.input_tokens.tolist() == [r["input_length"] for r in rows]
    assert np.concatenate([trace.blocks(i)[0] for i in range(len(trace))]).tolist() == \
        [h for r in rows for h in r["hash_ids"]]


def test_a_chain_names_each_block_once(write_jsonl: Writer) -> None:
    """A trace built by hand is held to the rule the loaders keep: an id twice in one request's
    chain is an error naming the request (the same id in two requests is a shared prefix)."""
    import dataclasses

    trace = load_mooncake_requests(write_jsonl([moon(0, 1500, 5, [4, 9, 7]),
                                                moon(1, 600, 1, [4, 8])]))
    assert trace.blocks(1)[0].tolist() == [4, 8]   # 4 shared across requests: fine
    ids = trace.block_ids.copy()
    ids[4] = 4  # request 2 (line 2): [4, 8] -> [4, 4]
    with pytest.raises(KvroofError, match=r"line 2: block id 4 appears twice"):
        dataclasses.replace(trace, block_ids=ids)
