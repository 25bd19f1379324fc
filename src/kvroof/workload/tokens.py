"""Token counting for the loaders that read text (ShareGPT, document QA).

Exact counts need the model's tokenizer; kvroof never downloads one. Choose:

- :func:`tokenizer_from_file`: a local HuggingFace ``tokenizer.json`` through the optional
  ``tokenizers`` package (``pip install tokenizers``).
- :func:`tiktoken_counter`: a ``tiktoken`` encoding by name, only if its BPE file is already
  in tiktoken's local cache (``TIKTOKEN_CACHE_DIR``); a download is refused, not attempted.
- :class:`HeuristicTokenCounter` (the default): ``ceil(characters / 4)``, from OpenAI's rule of
  thumb that "one token generally corresponds to ~4 characters of text for common English
  text" (help.openai.com, "What are tokens and how to count them?"). It warns once that the
  counts are approximate. Characters are Unicode code points; the rule undercounts text in
  scripts with fewer characters per token (Chinese, Japanese, code with many symbols).

Counts are of the text alone: no chat template, role markers or special tokens are added.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from kvroof.errors import KvroofError, short_repr

__all__ = [
    "CHARS_PER_TOKEN",
    "ApproximateTokensWarning",
    "HeuristicTokenCounter",
    "TokenCounter",
    "UsedCounter",
    "tiktoken_counter",
    "token_counter",
    "tokenizer_from_file",
]

CHARS_PER_TOKEN = 4
"""The heuristic's characters per token (OpenAI: ~4 characters of English text per token)."""


class ApproximateTokensWarning(UserWarning):
    """Token counts come from the characters-per-token heuristic, not a tokenizer."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text."""

    @property
    def name(self) -> str:
        """What counts the tokens, for the workload's ``source``."""
        ...

    @property
    def exact(self) -> bool:
        """True for a real tokenizer, False for an estimate."""
        ...

    def count(self, text: str) -> int:
        """Tokens in ``text`` (no special tokens added)."""
        ...


class HeuristicTokenCounter:
    """``ceil(len(text) / 4)`` tokens; warns once per counter that counts are approximate."""

    name = f"ceil(characters / {CHARS_PER_TOKEN}) heuristic"
    exact = False

    def __init__(self) -> None:
        self._warned = False

    def count(self, text: str) -> int:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"token counts are approximate: ceil(characters / {CHARS_PER_TOKEN}) per text "
                "(give a tokenizer for exact counts)",
                ApproximateTokensWarning,
                stacklevel=2,
            )
        return -(-len(text) // CHARS_PER_TOKEN)


class _ModuleCounter:
    """A counter around a tokenizer object's encode method."""

    exact = True

    def __init__(self, name: str, encode: Any) -> None:
        self.name = name
        self._encode = encode

    def count(self, text: str) -> int:
        return int(self._encode(text))


def _optional(module: str, purpose: str) -> Any:
    try:
        return import_module(module)
    except ImportError:
        raise KvroofError(
            f"{purpose} needs the optional package {module!r}, which kvroof does not install "
            f"(pip install {module})"
        ) from None


def tokenizer_from_file(path: str | Path) -> TokenCounter:
    """Exact counts with a local HuggingFace ``tokenizer.json`` (needs ``tokenizers``)."""
    file = Path(path)
    if not file.is_file():
        raise KvroofError(f"{file}: no such tokenizer file (expected a local tokenizer.json)")
    tokenizers = _optional("tokenizers", "reading a tokenizer.json")
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(file))
    except Exception as error:  # the Rust side raises plain Exception subclasses
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise KvroofError(f"{file}: not a tokenizers tokenizer.json ({first})") from None

    def encode(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return _ModuleCounter(f"tokenizer {file.name}", encode)


class _DownloadRefusedError(Exception):
    pass


def tiktoken_counter(encoding: str) -> TokenCounter:
    """Exact counts with a ``tiktoken`` encoding (e.g. ``cl100k_base``) that is already in
    tiktoken's local cache. tiktoken fetches missing BPE files over the network when an
    encoding is first used; kvroof blocks that fetch for the duration of the load and reports
    the encoding as unavailable instead."""
    tiktoken = _optional("tiktoken", "a tiktoken encoding")
    loader = import_module("tiktoken.load")
    original = getattr(loader, "read_file", None)
    if original is None:
        raise KvroofError(
            "this tiktoken version cannot be kept from downloading; use a tokenizer.json"
        )

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise _DownloadRefusedError(blobpath)
        result: bytes = original(blobpath)
        return result

    setattr(loader, "read_file", local_only)  # noqa: B010 (a module attribute)
    try:
        coder = tiktoken.get_encoding(encoding)
    except _DownloadRefusedError:
        raise KvroofError(
            f"tiktoken encoding {short_repr(encoding)} is not in the local cache and kvroof never "
            "downloads (put its file in TIKTOKEN_CACHE_DIR, or use a tokenizer.json)"
        ) from None
    except ValueError as error:
        first = str(error).splitlines()[0]
        raise KvroofError(f"tiktoken encoding {short_repr(encoding)}: {first}") from None
    finally:
        setattr(loader, "read_file", original)  # noqa: B010

    def encode(text: str) -> int:
        return len(coder.encode_ordinary(text))

    return _ModuleCounter(f"tiktoken {encoding}", encode)


class UsedCounter:
    """Wraps a counter and remembers whether it counted anything (a file that gives token
    counts needs no counter, and its ``source`` should not name one)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.used = False

    @property
    def name(self) -> str:
        return self.counter.name

    @property
    def exact(self) -> bool:
        return self.counter.exact

    def count(self, text: str) -> int:
        self.used = True
        return self.counter.count(text)

    def describe(self) -> str:
        """For a workload's source: the counter's name if it counted text, else that the
        file gave the counts."""
        return f"tokens: {self.name}" if self.used else "token counts given in the file"


def token_counter(spec: str | Path | None = None) -> TokenCounter:
    """The counter a command-line ``--tokenizer`` value names: None for the heuristic,
    ``tiktoken:NAME`` for a cached tiktoken encoding, anything else a tokenizer.json path."""
    if spec is None:
        return HeuristicTokenCounter()
    text = str(spec)
    if text.startswith("tiktoken:"):
        return tiktoken_counter(text.removeprefix("tiktoken:"))
    return tokenizer_from_file(text)
