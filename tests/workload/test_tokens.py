"""Token counting: the heuristic's documented rule (ceil(characters / 4)), its one warning,
and the optional exact tokenizers (offline only; skipped when the package is missing)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from kvroof.errors import KvroofError
from kvroof.workload import tokens
from kvroof.workload.tokens import (
    ApproximateTokensWarning,
    HeuristicTokenCounter,
    TokenCounter,
    tiktoken_counter,
    token_counter,
    tokenizer_from_file,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),            # ceil(0 / 4) = 0
        ("abc", 1),         # ceil(3 / 4) = 1
        ("abcd", 1),        # ceil(4 / 4) = 1
        ("abcde", 2),       # ceil(5 / 4) = 2
        ("x" * 4000, 1000),  # 4000 / 4
        ("héllo", 2),       # 5 code points (not 6 UTF-8 bytes) -> ceil(5 / 4) = 2
        ("a b\nc", 2),      # whitespace counts as characters: 5 -> 2
    ],
)
def test_heuristic_rule(text: str, expected: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximateTokensWarning)
        assert HeuristicTokenCounter().count(text) == expected


def test_heuristic_warns_once_per_counter() -> None:
    counter = HeuristicTokenCounter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        counter.count("one")
        counter.count("two")
    assert len(caught) == 1
    assert issubclass(caught[0].category, ApproximateTokensWarning)
    assert "approximate" in str(caught[0].message)
    assert not counter.exact
    assert isinstance(counter, TokenCounter)


def _no_module(name: str) -> object:
    raise ImportError(name)


def test_tokenizer_file_missing(tmp_path: Path) -> None:
    with pytest.raises(KvroofError, match="no such tokenizer file"):
        tokenizer_from_file(tmp_path / "nope.json")


def test_tokenizers_package_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "tokenizer.json"
    file.write_text("{}")
    monkeypatch.setattr(tokens, "import_module", _no_module)
    with pytest.raises(KvroofError, match=r"optional package 'tokenizers'.*pip install"):
        tokenizer_from_file(file)


def test_tiktoken_package_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "import_module", _no_module)
    with pytest.raises(KvroofError, match="optional package 'tiktoken'"):
        tiktoken_counter("cl100k_base")


def test_tokenizer_json_exact_counts(tmp_path: Path) -> None:
    tk = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    tokenizer = tk.Tokenizer(tk.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tk.pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    counter = tokenizer_from_file(path)
    # whitespace pre-tokenizer, one token per word: hello / world / hello / [UNK]
    assert counter.count("hello world hello there") == 4
    assert counter.exact and counter.name == "tokenizer tokenizer.json"


def test_tokenizer_json_garbage(tmp_path: Path) -> None:
    pytest.importorskip("tokenizers")
    path = tmp_path / "tokenizer.json"
    path.write_text("not json")
    with pytest.raises(KvroofError, match=r"not a tokenizers tokenizer\.json"):
        tokenizer_from_file(path)


def test_tiktoken_never_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tiktoken")
    import tiktoken.load

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache
    original = tiktoken.load.read_file
    with pytest.raises(KvroofError, match="not in the local cache and kvroof never downloads"):
        tiktoken_counter("cl100k_base")
    assert tiktoken.load.read_file is original  # the guard is removed again
    assert list(tmp_path.iterdir()) == []  # nothing was fetched into the cache


def test_token_counter_dispatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(token_counter(None), HeuristicTokenCounter)
    seen: list[str] = []
    monkeypatch.setattr(tokens, "tiktoken_counter", lambda name: seen.append(name))
    monkeypatch.setattr(tokens, "tokenizer_from_file", lambda path: seen.append(str(path)))
    token_counter("tiktoken:o200k_base")
    token_counter(tmp_path / "t.json")
    assert seen == ["o200k_base", str(tmp_path / "t.json")]
