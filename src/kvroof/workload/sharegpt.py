"""ShareGPT conversations -> one request per user turn.

Input: a JSON list of conversations, each ``{"id": ..., "conversations": [{"from": ...,
"value": ...}, ...]}`` (``role``/``content`` are accepted in place of ``from``/``value``), or
the same conversations as JSON Lines, one per line; the first character of the file tells
which (``[`` or ``{``). Either may be gzip-compressed (:func:`.reading.open_text`).
Speakers: ``human``/``user`` (a request), ``gpt``/``assistant``/``chatgpt``/``bard``/``bing``
(a reply), ``system``. The file is streamed (:mod:`.jsonarray`): a multi-GB file does not
have to fit in memory.

Per user turn (all counts are of message text only, no chat template):

- ``K`` = tokens of every earlier turn of the conversation, user and assistant; plus the
  system prompt when ``include_system=True`` (the conversation's own ``system`` turns, or
  ``system_prompt`` for a conversation that has none). A system prompt counts as cached even
  for the first request, as a shared system prompt usually is.
- ``T`` = tokens of the new user message.
- ``previous_reply_cached=True`` (default): the assistant reply just before the message is in
  ``K``. ``False``: it is counted in ``T`` instead, for engines that do not keep the KV of
  decoded tokens (the reply was never prefilled). Either way, after the request everything
  up to and including the message is cached.
- ``output_tokens`` = tokens of the assistant reply right after the message, when there is
  one (-1 otherwise).
- ``group_id`` = the conversation's ``id`` (its index when it has none).

The first request of a conversation has ``K = 0`` (unless a system prompt is included).
A conversation with no user turn gives no request; how many there were is warned about.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from kvroof.errors import KvroofError, short_repr
from kvroof.workload.jsonarray import iter_json_array
from kvroof.workload.reading import (
    BadRecordError,
    BadRecords,
    iter_json_lines,
    open_text,
    plain_name,
    utf8_error,
)
from kvroof.workload.records import UNKNOWN_OUTPUT, Workload, WorkloadBuilder
from kvroof.workload.tokens import HeuristicTokenCounter, TokenCounter

__all__ = ["ROLES", "conversation_requests", "load_sharegpt"]

Role = Literal["user", "assistant", "system"]

ROLES: dict[str, Role] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "system": "system",
}
"""Speaker names (lower case) and what they are."""


def _turns(conversation: Any) -> list[tuple[Role, str]]:
    if not isinstance(conversation, dict):
        raise BadRecordError("expected an object with a 'conversations' list")
    turns = conversation.get("conversations")
    if turns is None:
        raise BadRecordError("missing field 'conversations'")
    if not isinstance(turns, list):
        raise BadRecordError("'conversations' must be a list of turns")
    parsed: list[tuple[Role, str]] = []
    for j, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise BadRecordError(f"turn {j}: expected an object with 'from' and 'value'")
        speaker = turn.get("from", turn.get("role"))
        text = turn.get("value", turn.get("content"))
        if speaker is None:
            raise BadRecordError(f"turn {j}: missing field 'from'")
        if text is None:
            raise BadRecordError(f"turn {j}: missing field 'value'")
        role = ROLES.get(str(speaker).lower())
        if role is None:
            raise BadRecordError(
                f"turn {j}: unknown speaker {short_repr(speaker)} (expected human/user, "
                "gpt/assistant or system)"
            )
        if not isinstance(text, str):
            raise BadRecordError(f"turn {j}: 'value' must be text")
        parsed.append((role, text))
    return parsed


def conversation_requests(
    turns: Sequence[tuple[Role, int]],
    *,
    previous_reply_cached: bool = True,
    system_tokens: int | None = None,
    include_system: bool = False,
) -> list[tuple[int, int, int]]:
    """(T, K, output tokens) for each user turn of one conversation given as
    (role, tokens) pairs; ``system_tokens`` is the prompt used when the conversation has no
    system turn of its own (and ``include_system`` is set)."""
    has_system = any(role == "system" for role, _ in turns)
    cached = 0
    if include_system and system_tokens is not None and not has_system:
        cached = system_tokens
    pending = 0  # context tokens not in the KV cache yet (a reply counted as new)
    requests: list[tuple[int, int, int]] = []
    for j, (role, tokens) in enumerate(turns):
        if role == "system":
            if include_system:
                cached += tokens
        elif role == "assistant":
            if previous_reply_cached:
                cached += tokens
            else:
                pending += tokens
        else:
            new = pending + tokens
            following = turns[j + 1] if j + 1 < len(turns) else None
            output = following[1] if following and following[0] == "assistant" else UNKNOWN_OUTPUT
            requests.append((new, cached, output))
            cached += new
            pending = 0
    return requests


def _first_character(file: Path) -> str:
    """The first non-whitespace character of ``file`` ('' for none)."""
    with open_text(file) as handle:
        try:
            while chunk := handle.read(1 << 16):
                text = chunk.lstrip()
                if text:
                    return text[0]
        except UnicodeDecodeError:
            raise utf8_error(file, 1) from None
    return ""


def _conversations(file: Path, bad: BadRecords) -> Iterator[tuple[int, str, Any]]:
    """(index, where, conversation) for each conversation of a JSON array or JSON Lines file;
    ``where`` locates it in error messages ("conversation 3" or "line 4")."""
    if _first_character(file) == "{":
        for index, (lineno, record) in enumerate(iter_json_lines(file, bad)):
            yield index, f"line {lineno}", record
        return
    with open_text(file) as handle:
        count = 0
        for index, conversation in enumerate(iter_json_array(handle, file, "conversation")):
            count += 1
            yield index, f"conversation {index}", conversation
    if count == 0:
        raise KvroofError(f"{file}: the list of conversations is empty")


def load_sharegpt(
    path: str | Path,
    *,
    tokenizer: TokenCounter | None = None,
    include_system: bool = False,
    system_prompt: str | None = None,
    previous_reply_cached: bool = True,
    skip_bad: bool = False,
    name: str | None = None,
) -> Workload:
    """Requests of a ShareGPT JSON or JSON Lines file (see the module docstring for T, K and
    the options).

    A conversation of the wrong shape (by index, 0-based, in a JSON array; by line number in
    JSON Lines) stops the load, or is skipped and counted with ``skip_bad=True``; invalid JSON
    always stops a JSON array (it cannot be resynchronised), and is a bad line in JSON
    Lines."""
    file = Path(path)
    if system_prompt is not None and not include_system:
        raise KvroofError("system_prompt is only used with include_system=True")
    counter = tokenizer if tokenizer is not None else HeuristicTokenCounter()
    system_tokens = counter.count(system_prompt) if system_prompt is not None else None
    bad = BadRecords(file, skip_bad, unit="conversation")
    builder = WorkloadBuilder()
    kept = 0
    without_user = 0
    for index, where, conversation in _conversations(file, bad):
        try:
            turns = _turns(conversation)
        except BadRecordError as error:
            bad.reject(where, str(error))
            continue
        counted = [(role, counter.count(text)) for role, text in turns]
        requests = conversation_requests(
            counted,
            previous_reply_cached=previous_reply_cached,
            system_tokens=system_tokens,
            include_system=include_system,
        )
        if not requests:
            without_user += 1
            continue
        kept += 1
        raw_id = conversation.get("id")
        group = str(index) if raw_id is None else str(raw_id)
        for new, cached, output in requests:
            builder.add(new, cached, output, group)
    bad.finish(kept)
    if without_user:
        warnings.warn(
            f"{file}: {without_user} conversation(s) have no user turn and give no request",
            UserWarning,
            stacklevel=2,
        )
    options = [
        "previous reply cached" if previous_reply_cached else "previous reply counted as new",
        "system prompt included" if include_system else "system turns left out",
    ]
    source = f"ShareGPT conversations in {file} ({', '.join(options)}; tokens: {counter.name})"
    return builder.build(name or plain_name(file).stem, source, skipped=bad.skipped)
