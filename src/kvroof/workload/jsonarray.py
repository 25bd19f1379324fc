"""Stream the elements of one top-level JSON array without reading the whole file.

``json.JSONDecoder.raw_decode`` parses one element at a time from a text buffer that is
refilled from the file as needed: memory holds one element plus one read chunk, not the
file. An element that does not fit the buffer makes the next read at least as large as the
buffer (doubling), so a long element is parsed in amortised linear time.

One element may hold at most :data:`~kvroof.workload.reading.MAX_RECORD_CHARS`
characters (a file that is one endless element is an error, not a read into memory).

A syntax error cannot be skipped (the array cannot be resynchronised after it), so it is
always an error, with the element's index and character offset in the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from kvroof.errors import KvroofError, short_repr
from kvroof.files.reading import DuplicateKeyError, unique_keys
from kvroof.workload import reading

__all__ = ["CHUNK_CHARS", "iter_json_array"]

CHUNK_CHARS = 1 << 20
"""Characters read from the file at a time (1 Mi)."""

_WHITESPACE = " \t\n\r"
_NUMBER_CHARS = "0123456789+-.eE"
# A parse error this close to the end of the buffer may just mean the element continues in
# the next chunk ("tru" of "true", half of a \\u escape); farther back it is a real error.
_TAIL = 64


class _Reader:
    def __init__(self, handle: TextIO, path: Path, what: str, chunk: int) -> None:
        self.handle = handle
        self.path = path
        self.what = what
        self.chunk = chunk
        self.buffer = ""
        self.pos = 0
        self.offset = 0  # characters of the file before self.buffer
        self.eof = False
        self.decoder = json.JSONDecoder(object_pairs_hook=unique_keys)

    def more(self) -> bool:
        """Read another chunk (at least as long as the buffer); False at the end of file."""
        if self.eof:
            return False
        if self.pos > 0:
            self.offset += self.pos
            self.buffer = self.buffer[self.pos :]
            self.pos = 0
        try:
            data = self.handle.read(max(self.chunk, len(self.buffer)))
        except UnicodeDecodeError:
            raise KvroofError(
                f"{self.path}: not UTF-8 text (near character {self.offset + len(self.buffer)})"
            ) from None
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    def _room(self, index: int, end: int | None = None) -> bool:
        """True while the element being read (to ``end``, or the end of the buffer) is within
        the size limit; else an error."""
        limit = reading.MAX_RECORD_CHARS
        if (len(self.buffer) if end is None else end) - self.pos > limit:
            raise KvroofError(
                f"{self.path}: {self.what} {index} is longer than {limit:,} characters, the "
                "limit for one record"
            )
        return True

    def peek(self) -> str | None:
        """The next non-whitespace character (not consumed), or None at the end of file."""
        while True:
            while self.pos < len(self.buffer) and self.buffer[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos < len(self.buffer):
                return self.buffer[self.pos]
            if not self.more():
                return None

    def decode(self, index: int) -> Any:
        while True:
            try:
                value, end = self.decoder.raw_decode(self.buffer, self.pos)
            except json.JSONDecodeError as error:
                maybe_cut = error.pos >= len(self.buffer) - _TAIL or error.msg.startswith(
                    "Unterminated string"
                )
                if maybe_cut and self._room(index) and self.more():
                    continue
                raise KvroofError(
                    f"{self.path}: {self.what} {index}: not valid JSON ({error.msg} at "
                    f"character {self.offset + error.pos}); a broken array cannot be skipped"
                ) from None
            except DuplicateKeyError as error:  # json alone keeps the last value
                raise KvroofError(
                    f"{self.path}: {self.what} {index}: key {short_repr(error.key)} written "
                    "twice; a broken array cannot be skipped"
                ) from None
            except RecursionError:
                raise KvroofError(
                    f"{self.path}: {self.what} {index}: nested too deeply to read (character "
                    f"{self.offset + self.pos}); a broken array cannot be skipped"
                ) from None
            except ValueError as error:  # e.g. an integer of more than 4300 digits
                raise KvroofError(
                    f"{self.path}: {self.what} {index}: {reading.json_value_error(error)}; a "
                    "broken array cannot be skipped"
                ) from None
            # a number that reaches the end of the buffer may continue in the next chunk
            # ("12" of "123"; "1.5" of "1.5e-7", where "1.5e" decodes as 1.5)
            if (
                isinstance(value, int | float)
                and not self.buffer[end:].strip(_NUMBER_CHARS)
                and self._room(index)
                and self.more()
            ):
                continue
            self._room(index, end)
            self.pos = end
            if self.pos > self.chunk:
                self.offset += self.pos
                self.buffer = self.buffer[self.pos :]
                self.pos = 0
            return value


def iter_json_array(
    handle: TextIO, path: Path, what: str = "element", chunk: int = CHUNK_CHARS
) -> Iterator[Any]:
    """The elements of the JSON array in ``handle``, one at a time.

    ``what`` names an element in error messages ("conversation 12: ..."). An empty file, a
    file that does not start with ``[``, a truncated array and text after the closing ``]``
    are errors."""
    reader = _Reader(handle, path, what, chunk)
    first = reader.peek()
    if first is None:
        raise KvroofError(f"{path}: empty file")
    if first == "{":
        raise KvroofError(
            f"{path}: starts with a JSON object, not a list of {what}s "
            "(JSON Lines? formats docqa, mooncake or table read those)"
        )
    if first != "[":
        raise KvroofError(f"{path}: expected a JSON list of {what}s ('['), found {first!r}")
    reader.pos += 1
    if reader.peek() == "]":
        reader.pos += 1
        _expect_end(reader)
        return
    index = 0
    while True:
        if reader.peek() is None:
            raise KvroofError(f"{path}: the list ends early, before {what} {index} (truncated?)")
        yield reader.decode(index)
        following = reader.peek()
        if following == ",":
            reader.pos += 1
            index += 1
            if reader.peek() == "]":
                raise KvroofError(f"{path}: a trailing comma after {what} {index - 1}")
            continue
        if following == "]":
            reader.pos += 1
            _expect_end(reader)
            return
        if following is None:
            raise KvroofError(
                f"{path}: the list ends early, after {what} {index} (truncated? no ']')"
            )
        raise KvroofError(
            f"{path}: after {what} {index}: expected ',' or ']', found {following!r} "
            f"(character {reader.offset + reader.pos})"
        )


def _expect_end(reader: _Reader) -> None:
    extra = reader.peek()
    if extra is not None:
        raise KvroofError(
            f"{reader.path}: unexpected text after the closing ']' "
            f"(character {reader.offset + reader.pos}): {extra!r}"
        )
