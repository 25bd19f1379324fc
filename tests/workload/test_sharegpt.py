"""ShareGPT loader: T and K per user turn worked out by hand (one token per word, with the
WordCounter fixture), the options, and bad input."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kvroof.errors import KvroofError
from kvroof.workload.reading import SkippedRecordsWarning
from kvroof.workload.records import UNKNOWN_OUTPUT
from kvroof.workload.sharegpt import load_sharegpt
from kvroof.workload.tokens import ApproximateTokensWarning

Writer = Callable[..., Path]


def turn(speaker: str, n_words: int) -> dict[str, str]:
    return {"from": speaker, "value": " ".join(["w"] * n_words)}


# user 3, assistant 5, user 2, assistant 1, user 4 (words = tokens)
CHAT = {"id": "c1", "conversations": [turn("human", 3), turn("gpt", 5), turn("human", 2),
                                      turn("gpt", 1), turn("human", 4)]}


def test_previous_reply_cached(write_json: Writer, words: Any) -> None:
    w = load_sharegpt(write_json([CHAT]), tokenizer=words)
    # turn 1: T = 3, K = 0,             output = 5
    # turn 2: T = 2, K = 3 + 5 = 8,     output = 1
    # turn 3: T = 4, K = 8 + 2 + 1 = 11, no reply follows
    assert w.new_tokens.tolist() == [3, 2, 4]
    assert w.cached_tokens.tolist() == [0, 8, 11]
    assert w.output_tokens.tolist() == [5, 1, UNKNOWN_OUTPUT]
    assert w.group_id.tolist() == ["c1", "c1", "c1"]
    assert w.name == "data" and not w.synthetic and w.skipped == 0
    assert "previous reply cached" in w.source and "words" in w.source


def test_previous_reply_counted_as_new(write_json: Writer, words: Any) -> None:
    w = load_sharegpt(write_json([CHAT]), tokenizer=words, previous_reply_cached=False)
    # turn 1: T = 3,         K = 0
    # turn 2: T = 5 + 2 = 7, K = 3      (the reply was never prefilled, so it is new)
    # turn 3: T = 1 + 4 = 5, K = 3 + 7 = 10
    assert w.new_tokens.tolist() == [3, 7, 5]
    assert w.cached_tokens.tolist() == [0, 3, 10]
    # either way every token is prefilled once: sum T = 3+5+2+1+4 = 15 words
    assert w.new_tokens.sum() == 15


def test_system_turn(write_json: Writer, words: Any) -> None:
    conv = {"conversations": [turn("system", 2), turn("human", 3), turn("gpt", 1),
                              turn("user", 1)]}
    path = write_json([conv])
    left_out = load_sharegpt(path, tokenizer=words)
    # system ignored: (T 3, K 0), (T 1, K 3 + 1 = 4)
    assert left_out.cached_tokens.tolist() == [0, 4]
    included = load_sharegpt(path, tokenizer=words, include_system=True)
    # system cached: (T 3, K 2), (T 1, K 2 + 3 + 1 = 6)
    assert included.new_tokens.tolist() == [3, 1]
    assert included.cached_tokens.tolist() == [2, 6]
    # the conversation's own system turn wins over a given prompt (4 words)
    prompted = load_sharegpt(path, tokenizer=words, include_system=True,
                             system_prompt="a b c d")
    assert prompted.cached_tokens.tolist() == [2, 6]


def test_given_system_prompt(write_json: Writer, words: Any) -> None:
    w = load_sharegpt(write_json([CHAT]), tokenizer=words, include_system=True,
                      system_prompt="be brief please")
    # a 3-word prompt is cached before every request: K = 3, 3 + 8, 3 + 11
    assert w.cached_tokens.tolist() == [3, 11, 14]
    with pytest.raises(KvroofError, match="include_system=True"):
        load_sharegpt(write_json([CHAT]), tokenizer=words, system_prompt="x")


def test_turn_order_variants(write_json: Writer, words: Any) -> None:
    conv = {"conversations": [turn("gpt", 2), turn("human", 1), turn("human", 3),
                              {"role": "assistant", "content": "a b"},
                              {"role": "user", "content": "c"}]}
    w = load_sharegpt(write_json([conv]), tokenizer=words)
    # an opening assistant turn is history: request 1 T = 1, K = 2, no reply right after
    # two user turns in a row: request 2 T = 3, K = 2 + 1 = 3, output 2 (role/content form)
    # request 3: T = 1, K = 3 + 3 + 2 = 8
    assert w.new_tokens.tolist() == [1, 3, 1]
    assert w.cached_tokens.tolist() == [2, 3, 8]
    assert w.output_tokens.tolist() == [UNKNOWN_OUTPUT, 2, UNKNOWN_OUTPUT]
    assert w.group_id.tolist() == ["0", "0", "0"]  # no id: the conversation's index


def test_default_counter_is_the_heuristic(write_json: Writer) -> None:
    conv = {"conversations": [{"from": "human", "value": "abcdefgh"},     # 8 chars -> 2
                              {"from": "gpt", "value": "abcdefghi"},      # 9 chars -> 3
                              {"from": "human", "value": "a"}]}           # 1 char  -> 1
    with pytest.warns(ApproximateTokensWarning):
        w = load_sharegpt(write_json([conv]))
    assert w.new_tokens.tolist() == [2, 1]
    assert w.cached_tokens.tolist() == [0, 5]


def test_several_conversations(write_json: Writer, words: Any) -> None:
    other = {"id": 42, "conversations": [turn("human", 6)]}
    w = load_sharegpt(write_json([CHAT, other]), tokenizer=words)
    assert w.new_tokens.tolist() == [3, 2, 4, 6]
    assert w.cached_tokens.tolist() == [0, 8, 11, 0]
    assert w.group_id.tolist() == ["c1", "c1", "c1", "42"]


BAD_CONVERSATIONS = [
    ({"turns": []}, "missing field 'conversations'"),
    ({"conversations": {}}, "'conversations' must be a list"),
    ({"conversations": [{"from": "robot", "value": "x"}]}, "turn 0: unknown speaker 'robot'"),
    ({"conversations": [{"value": "x"}]}, "turn 0: missing field 'from'"),
    ({"conversations": [{"from": "human", "value": 3}]}, "turn 0: 'value' must be text"),
    ([1, 2], "expected an object"),
]


@pytest.mark.parametrize(("conversation", "message"), BAD_CONVERSATIONS)
def test_bad_conversation_stops_with_index(write_json: Writer, words: Any,
                                           conversation: Any, message: str) -> None:
    path = write_json([CHAT, conversation, CHAT])
    with pytest.raises(KvroofError, match=f"data.json: conversation 1: {message}") as info:
        load_sharegpt(path, tokenizer=words)
    assert "\n" not in str(info.value)


def test_skip_bad_counts(write_json: Writer, words: Any) -> None:
    path = write_json([CHAT, {"turns": []}, CHAT, [1]])
    with pytest.warns(SkippedRecordsWarning, match=r"skipped 2 bad conversations \(first: "
                      r"conversation 1: missing field"):
        w = load_sharegpt(path, tokenizer=words, skip_bad=True)
    assert w.skipped == 2
    assert len(w) == 6  # two good conversations, 3 requests each


def test_all_bad_is_an_error(write_json: Writer, words: Any) -> None:
    with pytest.raises(KvroofError, match=r"no usable conversations \(1 bad"):
        load_sharegpt(write_json([{"turns": []}]), tokenizer=words, skip_bad=True)


def test_conversation_without_user_turn_is_reported(write_json: Writer, words: Any) -> None:
    with pytest.warns(UserWarning, match="1 conversation.* no user turn"):
        w = load_sharegpt(write_json([CHAT, {"conversations": [turn("gpt", 3)]}]),
                          tokenizer=words)
    assert len(w) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("   \n", "empty file"),
        ("[]", "the list of conversations is empty"),
        # JSON Lines are read as one conversation per line: a docqa file has none
        ('{"doc_id": 1}\n{"doc_id": 2}\n',
         "no usable conversations .2 bad conversations skipped, first: line 1: missing field "
         "'conversations'"),
        ("new_tokens,cached_tokens\n1,2\n", "expected a JSON list"),
        ('[{"conversations": []}', "ends early"),
        ('[{"conversations": []}, ', "ends early"),
        ('[{"conversations": []},]', "trailing comma"),
        ('[{"conversations": []}] extra', "unexpected text after"),
        ('[{"conversations": []} {"a": 1}]', "expected ',' or ']'"),
        ('[{"conversations": [}]', "conversation 0: not valid JSON"),
    ],
)
def test_broken_files(tmp_path: Path, words: Any, text: str, message: str) -> None:
    path = tmp_path / "f.json"
    path.write_text(text)
    with pytest.raises(KvroofError, match=message) as info:
        load_sharegpt(path, tokenizer=words, skip_bad=True)  # not skippable
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)


def test_invalid_json_mid_file_names_the_conversation(tmp_path: Path, words: Any) -> None:
    path = tmp_path / "f.json"
    path.write_text("[" + json.dumps(CHAT) + ', {"conversations": [1 2]}]')
    with pytest.raises(KvroofError, match="conversation 1: not valid JSON"):
        load_sharegpt(path, tokenizer=words, skip_bad=True)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KvroofError, match="no such file"):
        load_sharegpt(tmp_path / "none.json")


def test_utf8_bom_and_unicode(tmp_path: Path, words: Any) -> None:
    path = tmp_path / "bom.json"
    conv = {"conversations": [{"from": "human", "value": "größe 尺寸"}]}
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([conv], ensure_ascii=False).encode())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = load_sharegpt(path, tokenizer=words)
    assert w.new_tokens.tolist() == [2]
