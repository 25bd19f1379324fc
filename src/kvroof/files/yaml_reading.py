"""Reading YAML files with the limits of :mod:`kvroof.files.reading`, and two of YAML's own:

- aliases: an alias may not refer to the node that contains it, and all aliases of a file
  together may stand for at most :data:`~kvroof.files.reading.ALIAS_NODE_BUDGET` nodes (each alias
  counts the nodes of what it refers to, with the aliases inside that expanded);
- duplicate keys: a key written twice in one mapping is an error naming both lines (PyYAML
  would silently keep the last value).

YAML is parsed with libyaml (``yaml.CSafeLoader``) when PyYAML was built with it, else with
the pure-Python ``yaml.SafeLoader``; either way the events are composed into nodes here,
without recursion, so that the limits hold before anything is built.

The spec files that ship inside kvroof are not handed over by a user: :func:`load_packaged_yaml`
reads them with libyaml alone (about three times faster), and the test suite checks every one
of them with the limits above. The registry reads them from a JSON copy when it is current
(:mod:`kvroof.specs.builtin_cache`), without PyYAML.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kvroof.errors import SpecError, clip
from kvroof.files.reading import ALIAS_NODE_BUDGET, MAX_DEPTH, read_text_file

__all__ = ["YAML_LOADERS", "load_packaged_yaml", "load_yaml_file", "load_yaml_text"]

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


class _LimitError(yaml.YAMLError):
    """A limit of this module was hit while composing; ``field`` is where, ``line`` 1-based."""

    def __init__(self, message: str, line: int, field: str = "", *, say_line: bool = True
                 ) -> None:
        super().__init__(message)
        self.message = f"{message} (line {line})" if say_line else message
        self.line = line
        self.field = clip(field)


class _Frame:
    """A list or mapping being composed."""

    __slots__ = ("anchor", "keys", "node", "pending_key", "size")

    def __init__(self, node: SequenceNode | MappingNode, anchor: str | None) -> None:
        self.node = node
        self.anchor = anchor
        self.size = 1  # nodes in this subtree, aliases expanded
        self.pending_key: Node | None = None
        self.keys: dict[Any, int] = {}  # key -> line (mappings)


def _field(stack: list[_Frame], last: str = "") -> str:
    """The dotted path (``hardware[0].link``) of the position below the top of ``stack``."""
    parts: list[str] = []
    for frame in stack:
        node = frame.node
        if isinstance(node, SequenceNode):
            parts.append(f"[{len(node.value)}]")
        elif frame.pending_key is not None:
            key = frame.pending_key
            text = key.value if isinstance(key, ScalarNode) else "?"
            parts.append(("." if parts else "") + clip(str(text), 40))
    if last:
        parts.append(("." if parts else "") + last)
    return "".join(parts)


class _CheckedComposer:
    """Composes the single document of a stream from parser events, iteratively, enforcing
    the limits of this module. Mixed into a loader class (libyaml's or PyYAML's)."""

    check_event: Callable[..., bool]
    get_event: Callable[[], Any]
    peek_event: Callable[[], Any]
    resolve: Callable[..., str]
    construct_object: Callable[..., Any]

    def get_single_node(self) -> Node | None:
        self.get_event()  # StreamStartEvent
        document: Node | None = None
        if not self.check_event(StreamEndEvent):
            self.get_event()  # DocumentStartEvent
            document = self._compose_checked()
            self.get_event()  # DocumentEndEvent
        if not self.check_event(StreamEndEvent):
            event = self.get_event()
            raise _LimitError("more than one YAML document (a second '---')",
                              event.start_mark.line + 1)
        self.get_event()  # StreamEndEvent
        return document

    def _compose_checked(self) -> Node:
        anchors: dict[str, Node] = {}
        sizes: dict[str, int] = {}  # anchor -> nodes it stands for
        open_anchors: set[str] = set()
        expanded = 0
        stack: list[_Frame] = []
        root: Node | None = None

        def attach(node: Node, size: int) -> Node | None:
            """Put ``node`` into the collection on top of the stack; the root if none."""
            if not stack:
                return node
            frame = stack[-1]
            frame.size += size
            parent = frame.node
            if isinstance(parent, SequenceNode):
                parent.value.append(node)
            elif frame.pending_key is None:
                frame.pending_key = node
                if isinstance(node, ScalarNode) and node.tag != _MERGE_TAG:
                    key = self.construct_object(node, deep=True)
                    line = node.start_mark.line + 1
                    try:
                        first = frame.keys.get(key)
                        if first is None:
                            frame.keys[key] = line
                    except TypeError:  # an unhashable key: the constructor will say so
                        first = None
                    if first is not None:
                        raise _LimitError(
                            f"key written twice (lines {first} and {line}); YAML would keep "
                            "only the last value", line, _field(stack), say_line=False)
            else:
                parent.value.append((frame.pending_key, node))
                frame.pending_key = None
            return None

        while True:
            event = self.get_event()
            start: Any = event.start_mark  # libyaml's marks are typed apart from PyYAML's
            end: Any = event.end_mark
            line = start.line + 1
            if isinstance(event, AliasEvent):
                name = str(event.anchor)
                if name in open_anchors:
                    raise _LimitError(f"alias *{clip(name, 40)} refers to a node that "
                                      "contains it (a recursive structure)", line, _field(stack))
                if name not in anchors:
                    raise _LimitError(f"alias *{clip(name, 40)} names no anchor before "
                                      "it", line, _field(stack))
                expanded += sizes[name]
                if expanded > ALIAS_NODE_BUDGET:
                    raise _LimitError(
                        f"its aliases stand for more than {ALIAS_NODE_BUDGET:,} nodes (a YAML "
                        "alias bomb?); write the values out", line, _field(stack))
                done = attach(anchors[name], sizes[name])
            elif isinstance(event, ScalarEvent):
                tag = event.tag
                if tag is None or tag == "!":
                    tag = self.resolve(ScalarNode, event.value, event.implicit)
                node: Node = ScalarNode(tag, event.value, start, end, style=event.style)
                if event.anchor is not None:
                    anchors[event.anchor] = node
                    sizes[event.anchor] = 1
                done = attach(node, 1)
            elif isinstance(event, SequenceStartEvent | MappingStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise _LimitError(f"nested deeper than {MAX_DEPTH} levels", line,
                                      _field(stack))
                tag = event.tag
                if isinstance(event, SequenceStartEvent):
                    if tag is None or tag == "!":
                        tag = self.resolve(SequenceNode, None, event.implicit)
                    collection: SequenceNode | MappingNode = SequenceNode(
                        tag, [], start, None, flow_style=event.flow_style)
                else:
                    if tag is None or tag == "!":
                        tag = self.resolve(MappingNode, None, event.implicit)
                    collection = MappingNode(tag, [], start, None, flow_style=event.flow_style)
                if event.anchor is not None:
                    anchors[event.anchor] = collection
                    open_anchors.add(event.anchor)
                stack.append(_Frame(collection, event.anchor))
                continue
            elif isinstance(event, SequenceEndEvent | MappingEndEvent):
                frame = stack.pop()
                frame.node.end_mark = end
                if frame.anchor is not None:
                    open_anchors.discard(frame.anchor)
                    sizes[frame.anchor] = frame.size
                done = attach(frame.node, frame.size)
            else:  # pragma: no cover - the parser yields nothing else inside a document
                raise _LimitError(f"unexpected YAML event {type(event).__name__}", line)
            if done is not None:
                root = done
                break
        return root


def _loader_classes() -> dict[str, type[Any]]:
    classes: dict[str, type[Any]] = {
        "python": type("KvroofSafeLoader", (_CheckedComposer, yaml.SafeLoader), {}),
    }
    c_loader = getattr(yaml, "CSafeLoader", None)
    if c_loader is not None:
        classes["libyaml"] = type("KvroofCSafeLoader", (_CheckedComposer, c_loader), {})
    return classes


YAML_LOADERS: Final = _loader_classes()
"""The checked loaders: ``python`` always, ``libyaml`` when PyYAML has its C extension."""

_DEFAULT_LOADER: Final = YAML_LOADERS.get("libyaml", YAML_LOADERS["python"])


def load_yaml_text(text: str, path: str | Path, loader: str | None = None) -> Any:
    """The data of one YAML document, with this module's limits; errors name ``path``."""
    cls = _DEFAULT_LOADER if loader is None else YAML_LOADERS[loader]
    instance = cls(text)
    try:
        return instance.get_single_data()
    except _LimitError as error:
        raise SpecError(error.message, path, error.field) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise SpecError(f"malformed YAML{where}: {clip(str(problem), 120)}", path) from None
    except (ValueError, OverflowError) as error:  # e.g. an integer of 5000 digits
        raise SpecError(f"malformed YAML: {clip(str(error), 120)}", path) from None
    finally:
        instance.dispose()


def load_yaml_file(path: str | Path, max_bytes: int, what: str, loader: str | None = None) -> Any:
    """Read and parse the YAML file ``path`` (see the module docstring for the limits)."""
    return load_yaml_text(read_text_file(path, max_bytes, what), path, loader)


_PACKAGED_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_packaged_yaml(path: str | Path, max_bytes: int, what: str) -> Any:
    """Parse a YAML file that ships inside kvroof (a built-in spec) with libyaml's own composer:
    the per-node limits of :func:`load_yaml_file` are left to the tests, which run them on
    every packaged file (``tests/specs/test_spec_files.py``)."""
    text = read_text_file(path, max_bytes, what)
    try:
        return yaml.load(text, Loader=_PACKAGED_LOADER)  # a safe loader
    except yaml.YAMLError as error:
        raise SpecError(f"malformed YAML: {clip(str(error), 120)}", path) from None
