"""What the loaders share: opening files, JSON Lines, field checks and the bad-record policy.

Files may be plain or gzip-compressed, told apart by their first bytes (never by the name);
a compressed file is decompressed as it is read, up to :data:`MAX_DECOMPRESSED_BYTES`. A
line, or one element of a JSON array, may hold at most :data:`MAX_RECORD_CHARS` characters.

Policy: a bad record (a malformed line, a missing or wrong field, a conversation of the wrong
shape) stops the load with one line naming the file, the line number or conversation index,
and what is wrong. With ``skip_bad=True`` such records are skipped, counted in
``Workload.skipped``, and a :class:`SkippedRecordsWarning` says how many and shows the first.
An empty file, a file of another format, or a file with no usable record at all is always an
error.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import sys
import warnings
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Final, TextIO

from kvroof.errors import KvroofError, short_repr
from kvroof.files.reading import DuplicateKeyError, capped_lines, format_size, unique_keys

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "MAX_RECORD_CHARS",
    "BadRecordError",
    "BadRecords",
    "SkippedRecordsWarning",
    "count_field",
    "hash_id_chain",
    "iter_json_lines",
    "json_record",
    "json_value_error",
    "lines",
    "one_of",
    "open_text",
    "plain_name",
    "text_field",
    "utf8_error",
]

MAX_DECOMPRESSED_BYTES: Final = 16 << 30
"""A gzip-compressed workload may decompress to at most this many bytes (16 GiB): a "gzip
bomb" stops with an error instead of running for hours (memory stays bounded either way:
the loaders stream)."""

MAX_RECORD_CHARS: Final = 64 << 20
"""Characters in one line of a JSON Lines or CSV file, or in one element of a JSON array
(64 Mi): a file with no line breaks is an error, not a read of the whole file into memory."""

_GZIP_MAGIC: Final = b"\x1f\x8b"
_OTHER_COMPRESSION: Final = {
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PK\x03\x04": "zip",
}


class SkippedRecordsWarning(UserWarning):
    """Bad records were skipped on request (``skip_bad=True`` / ``--skip-bad``)."""


class BadRecordError(Exception):
    """One record is wrong; the loader turns it into an error or a counted skip."""


class BadRecords:
    """Raises on a bad record, or counts it when ``skip_bad`` is set."""

    def __init__(self, path: Path, skip_bad: bool, unit: str = "line") -> None:
        self.path = path
        self.skip_bad = skip_bad
        self.unit = unit
        self.skipped = 0
        self._first = ""

    def reject(self, where: str, what: str) -> None:
        """Record ``what`` is wrong at ``where`` (e.g. "line 12"): raise, or count a skip."""
        if not self.skip_bad:
            raise KvroofError(f"{self.path}: {where}: {what}")
        self.skipped += 1
        if not self._first:
            self._first = f"{where}: {what}"

    def finish(self, kept: int) -> None:
        """Warn about skips; fail when nothing usable is left."""
        plural = "s" if self.skipped != 1 else ""
        if kept == 0:
            detail = f" ({self.skipped} bad {self.unit}{plural} skipped, first: {self._first})"
            raise KvroofError(
                f"{self.path}: no usable {self.unit}s" + (detail if self.skipped else "")
            )
        if self.skipped:
            warnings.warn(
                f"{self.path}: skipped {self.skipped} bad {self.unit}{plural} "
                f"(first: {self._first})",
                SkippedRecordsWarning,
                stacklevel=3,
            )


class _Inflated(io.RawIOBase):
    """A gzip stream decompressed on the fly, that stops past ``limit`` bytes."""

    def __init__(self, raw: BinaryIO, path: Path, limit: int) -> None:
        super().__init__()
        self._raw = raw
        self._gzip = gzip.GzipFile(fileobj=raw, mode="rb")
        self._path = path
        self._limit = limit
        self._total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            count = self._gzip.readinto(buffer)
        except (OSError, EOFError, zlib.error) as error:
            raise KvroofError(f"{self._path}: broken gzip data ({error})") from None
        self._total += count
        if self._total > self._limit:
            raise KvroofError(
                f"{self._path}: decompresses to more than {format_size(self._limit)}, the limit "
                "for a compressed workload (a gzip bomb?)"
            )
        return count

    def close(self) -> None:
        try:
            self._gzip.close()
            self._raw.close()
        finally:
            super().close()


def open_text(path: str | Path) -> TextIO:
    """``path`` opened as UTF-8 text (a leading byte-order mark is dropped); a gzip-compressed
    file (known by its first bytes) is decompressed as it is read, up to
    :data:`MAX_DECOMPRESSED_BYTES`. The caller closes it."""
    file = Path(path)
    if not file.exists():
        raise KvroofError(f"{file}: no such file")
    if not file.is_file():
        raise KvroofError(f"{file}: not a regular file")
    try:
        raw = open(file, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except OSError as error:
        raise KvroofError(f"{file}: cannot read ({error.strerror or error})") from None
    try:
        head = raw.peek(8)[:8]
        if head.startswith(_GZIP_MAGIC):
            stream: BinaryIO = io.BufferedReader(_Inflated(raw, file, MAX_DECOMPRESSED_BYTES))
        else:
            for magic, kind in _OTHER_COMPRESSION.items():
                if head.startswith(magic):
                    raise KvroofError(f"{file}: {kind}-compressed; kvroof reads plain or "
                                      "gzip-compressed files (decompress it first)")
            stream = raw
    except BaseException:
        raw.close()
        raise
    return io.TextIOWrapper(stream, encoding="utf-8-sig")


def plain_name(path: str | Path) -> Path:
    """``path`` without a trailing ``.gz`` (``trace.csv.gz`` -> ``trace.csv``): what the name
    says about the format inside (compression itself is known from the content)."""
    file = Path(path)
    return file.with_suffix("") if file.suffix.lower() == ".gz" else file


def lines(handle: TextIO, path: Path) -> Iterator[str]:
    """The lines of ``handle``, each at most :data:`MAX_RECORD_CHARS` characters (a longer
    one is an error naming its line number)."""
    return capped_lines(handle, path, MAX_RECORD_CHARS)


def json_record(text: str) -> Any:
    """``json.loads(text)``, with every way it can fail as a :class:`BadRecordError` (a key
    written twice in an object too)."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKeyError as error:
        raise BadRecordError(f"key {short_repr(error.key)} written twice") from None
    except json.JSONDecodeError as error:
        raise BadRecordError(f"not valid JSON ({error.msg}, column {error.colno})") from None
    except RecursionError:
        raise BadRecordError("nested too deeply to read") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise BadRecordError(json_value_error(error)) from None


def json_value_error(error: ValueError) -> str:
    """What a ``ValueError`` of ``json.loads`` (other than a syntax error) says is wrong: in
    practice an integer longer than Python converts (``sys.get_int_max_str_digits()``, 4,300
    digits by default), which no token count or time can be."""
    if "integer string conversion" in str(error):
        limit = sys.get_int_max_str_digits()
        return f"an integer too long to read (more than {limit:,} digits)"
    return f"not valid JSON ({str(error)[:60]})"


def utf8_error(path: Path, lineno: int) -> KvroofError:
    """Text is decoded a block at a time, so the bad bytes are known to follow ``lineno``."""
    return KvroofError(f"{path}: not UTF-8 text (after line {lineno})")


def iter_json_lines(path: Path, bad: BadRecords) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON Lines file.

    A line that is not a JSON object goes to ``bad``. A file whose first character is ``[`` is
    a JSON array (ShareGPT, say), not JSON Lines: that is an error even with ``skip_bad``."""
    lineno = 0
    seen = False
    with open_text(path) as handle:
        try:
            for lineno, line in enumerate(lines(handle, path), 1):
                text = line.strip()
                if not text:
                    continue
                if not seen and text.startswith("["):
                    raise KvroofError(
                        f"{path}: a JSON array, not JSON Lines (one object per line); "
                        "a ShareGPT file? (format sharegpt)"
                    )
                seen = True
                try:
                    record = json_record(text)
                except BadRecordError as error:
                    bad.reject(f"line {lineno}", str(error))
                    continue
                if not isinstance(record, dict):
                    bad.reject(f"line {lineno}",
                               f"expected a JSON object, got {_json_type(record)}")
                    continue
                yield lineno, record
        except UnicodeDecodeError:
            raise utf8_error(path, lineno) from None
    if not seen:
        raise KvroofError(f"{path}: empty file (no records)")


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def one_of(record: Mapping[str, Any], *names: str, required: bool = True) -> tuple[str, Any]:
    """The first of ``names`` present in ``record`` as (name, value); ``("", None)`` if none
    is and the field is optional. Two of them at once is ambiguous, so an error."""
    present = [name for name in names if name in record]
    if len(present) > 1:
        raise BadRecordError(f"give one of {' or '.join(map(repr, present))}, not both")
    if present:
        return present[0], record[present[0]]
    if required:
        alternatives = " or ".join(repr(name) for name in names)
        raise BadRecordError(f"missing field {alternatives}")
    return "", None


MAX_TOKENS = 10**15
"""No request holds more tokens than this; larger counts are input errors."""


def count_field(name: str, value: Any, minimum: int = 0) -> int:
    """A JSON token count: an integer (or integral float) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRecordError(
            f"{name!r} must be an integer, got {_json_type(value)} {short_repr(value)}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise BadRecordError(f"{name!r} must be an integer, got {short_repr(value)}")
    if value < minimum:
        raise BadRecordError(f"{name!r} must be >= {minimum}, got {short_repr(value)}")
    if value > MAX_TOKENS:
        raise BadRecordError(
            f"{name!r} must be at most {MAX_TOKENS:.0e} tokens, got {short_repr(value)}")
    return int(value)


def text_field(name: str, value: Any) -> str:
    """A JSON string."""
    if not isinstance(value, str):
        raise BadRecordError(f"{name!r} must be text, got {_json_type(value)}")
    return value


def hash_id_chain(value: Any, length: int, block_tokens: int) -> list[int]:
    """A Mooncake record's ``hash_ids`` for a prompt of ``length`` tokens: a list of distinct
    non-negative integers (each names a block and everything before it, so a chain names a
    block once), at most as many as the prompt has blocks of ``block_tokens``."""
    if not isinstance(value, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in value):
        raise BadRecordError("'hash_ids' must be a list of non-negative integers")
    most = -(-length // block_tokens)
    if len(value) > most:
        raise BadRecordError(f"{len(value)} hash_ids but input_length {length} fills at most "
                             f"{most} blocks of {block_tokens} tokens")
    seen: set[int] = set()
    for block in value:
        if block in seen:
            raise BadRecordError(f"hash_ids repeat {block}: a prefix chain names each block "
                                 "once")
        seen.add(block)
    return value
