"""Registries of specs: the built-in YAML files plus the user's own folders.

Sources, in order (a later spec with the same name replaces an earlier one, with a warning):

1. the built-in ``hardware_specs/``, ``model_specs/`` and ``engine_specs/`` folders (shipped
   inside the wheel);
2. folders in the ``KVROOF_SPEC_PATH`` environment variable (``os.pathsep``-separated);
3. folders passed to :class:`Registry` (or ``--spec-path`` on the command line).

Every ``*.yaml``/``*.yml`` file under a folder is read (recursively). Lookup is case-insensitive,
treats ``_`` and spaces like ``-``, and accepts aliases (HuggingFace ids such as
``Qwen/Qwen3-235B-A22B``). A broken user file does not hide the built-in specs: it is skipped
with a :class:`SpecWarning` and listed in :attr:`Registry.problems` (one that overrides a
built-in and then fails its references leaves the built-in in place).

A spec that replaces another of the same name also takes over its aliases (a user ``h100-sxm``
answers to ``h100`` like the built-in one), unless a spec claims such an alias for itself.
"""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, overload

from kvroof.errors import SpecError, UnknownNameError, short_repr
from kvroof.specs.engine import Engine
from kvroof.specs.entry import KINDS, Entry, SpecKind, normalize_name
from kvroof.specs.folders import (
    BUILTIN_FOLDERS,
    builtin_files,
    builtin_spec_dirs,
    not_a_file,
    spec_files,
)
from kvroof.specs.hardware import Accelerator, Link, System
from kvroof.specs.loader import MAX_SPEC_BYTES, Spec, load_spec_file
from kvroof.specs.model import ModelSpec

__all__ = [
    "BUILTIN_FOLDERS",
    "ENV_VAR",
    "KINDS",
    "Entry",
    "Registry",
    "SpecKind",
    "SpecWarning",
    "builtin_files",
    "builtin_spec_dirs",
    "default_registry",
    "normalize_name",
]

ENV_VAR: Final = "KVROOF_SPEC_PATH"

S = TypeVar("S", Accelerator, Link, System, ModelSpec, Engine)


class SpecWarning(UserWarning):
    """A user spec was skipped (broken) or replaced a built-in one."""






class Registry:
    """All known specs by kind, with name and alias lookup.

    >>> reg = Registry()                       # built-ins + KVROOF_SPEC_PATH
    >>> reg.model("Qwen/Qwen3-235B-A22B").num_layers
    94
    """

    def __init__(
        self,
        spec_paths: Iterable[str | Path] = (),
        *,
        builtin: bool = True,
        use_env: bool = True,
    ) -> None:
        self._entries: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
        self._aliases: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
        self._replaced: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
        """The entry each override replaced (restored if the override is dropped)."""
        self._inherited: dict[str, dict[str, tuple[str, ...]]] = {kind: {} for kind in KINDS}
        """Aliases of the entries an override replaced: they follow the name."""
        self.problems: list[str] = []
        """One line per user spec file that was skipped, and why."""
        if builtin:
            from kvroof.specs.builtin_cache import cached_data

            files = builtin_files()
            cached = cached_data(files, MAX_SPEC_BYTES)  # None: out of date, parse the YAML
            for name, path in files:
                self._add_builtin(path, None if cached is None else cached[name])
        user_folders: list[Path] = []
        if use_env:
            user_folders += [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p]
        user_folders += [Path(p) for p in spec_paths]
        for folder in user_folders:
            self._load_user_folder(folder)
        self._check_references(builtin_only=False)
        self._index_aliases()

    # -- building -------------------------------------------------------------------------------
    def _problem(self, message: str) -> None:
        self.problems.append(message)
        warnings.warn(f"skipped: {message}", SpecWarning, stacklevel=3)

    def _load_user_folder(self, folder: Path) -> None:
        if folder.is_file():
            self._problem(f"{folder}: is a file; a spec path names a folder of spec files "
                          "(put the file in a folder and give the folder)")
            return
        if not folder.is_dir():
            exists = folder.exists() or folder.is_symlink()
            self._problem(f"{folder}: " + ("not a folder" if exists
                                           else "spec folder does not exist"))
            return
        for path in spec_files(folder):
            what = not_a_file(path)
            if what is not None:
                self._problem(f"{path}: {what}, not a spec file")
                continue
            try:
                spec = load_spec_file(path)
            except SpecError as error:
                self._problem(str(error))
                continue
            self._add(spec, path, builtin=False)

    def _add_builtin(self, path: Path, parsed: Any = None) -> None:
        """Register a built-in spec file (``parsed``: its data from the JSON copy, else its
        YAML is parsed), to be validated when first used (its name, aliases and references are
        checked by the test suite, as is every field)."""
        if parsed is None:
            from kvroof.files.yaml_reading import load_packaged_yaml

            parsed = load_packaged_yaml(path, MAX_SPEC_BYTES, "spec files")
        data = dict(parsed)
        kind = str(data.pop("spec"))
        self._add_entry(Entry(None, path, True, kind=kind, data=data))

    def check_builtins(self) -> None:
        """Validate every built-in spec and check what the built-ins refer to (the test suite
        runs this; the registry itself validates a built-in when it is first used)."""
        for kind in KINDS:
            for entry in self._entries[kind].values():
                if entry.builtin:
                    assert entry.spec.name == entry.name
        self._check_references(builtin_only=True)

    def _add(self, spec: Spec, path: Path | None, *, builtin: bool) -> None:
        self._add_entry(Entry(spec, path, builtin))

    def _add_entry(self, entry: Entry) -> None:
        kind, path, builtin = entry.kind, entry.path, entry.builtin
        key = normalize_name(entry.name)
        previous = self._entries[kind].get(key)
        if previous is not None:
            if builtin and previous.builtin:
                raise SpecError(
                    f"duplicate {kind} name {short_repr(entry.name)} (also in {previous.path})",
                    path, "name")
            warnings.warn(
                f"{path}: {kind} {short_repr(entry.name)} overrides the one from "
                f"{previous.path}",
                SpecWarning,
                stacklevel=4,
            )
            self._replaced[kind][key] = previous
            self._inherited[kind][key] = (*self._inherited[kind].get(key, ()),
                                          *previous.aliases)
        self._entries[kind][key] = entry

    def _check_references(self, *, builtin_only: bool) -> None:
        def refs(spec: Spec) -> list[tuple[str, SpecKind, str]]:
            tier_refs: list[tuple[str, SpecKind, str]]
            if isinstance(spec, Accelerator):
                return [("host_link", "link", spec.host_link)]
            if isinstance(spec, System):
                tier_refs = [(f"tiers[{i}].link", "link", t.link) for i, t in enumerate(spec.tiers)]
                return [
                    ("accelerator", "accelerator", spec.accelerator),
                    ("host_link", "link", spec.host_link),
                    *tier_refs,
                ]
            return []

        for kind in ("accelerator", "system"):
            for key, entry in list(self._entries[kind].items()):
                if builtin_only != entry.builtin:
                    continue
                for field, ref_kind, ref in refs(entry.spec):
                    error = None
                    found = self._find(ref_kind, ref)
                    if found is None:
                        error = SpecError(f"no {ref_kind} named {short_repr(ref)}", entry.path,
                                          field)
                    elif (isinstance(entry.spec, System) and field == "host_link"
                          and isinstance(found.spec, Link)
                          and entry.spec.host_link_sustained_bandwidth is not None
                          and entry.spec.host_link_sustained_bandwidth
                          > found.spec.peak_bandwidth):
                        error = SpecError(
                            f"{entry.spec.host_link_sustained_bandwidth:g} B/s exceeds the "
                            f"peak of {found.spec.name} ({found.spec.peak_bandwidth:g} B/s)",
                            entry.path, "host_link_sustained_bandwidth")
                    if error is None:
                        continue
                    if entry.builtin:
                        raise error
                    replaced = self._replaced[kind].pop(key, None)
                    if replaced is not None:
                        self._entries[kind][key] = replaced
                        self._problem(f"{error} (the {kind} from {replaced.path} stays)")
                    else:
                        self._problem(str(error))
                        del self._entries[kind][key]
                    break

    def _index_aliases(self) -> None:
        for kind in KINDS:
            aliases: dict[str, str] = {}
            for key, entry in self._entries[kind].items():
                for alias in entry.aliases:
                    alias_key = normalize_name(alias)
                    if alias_key in self._entries[kind] and alias_key != key:
                        warnings.warn(
                            f"{entry.path}: alias {short_repr(alias)} is the name of another "
                            f"{kind}; the name wins",
                            SpecWarning,
                            stacklevel=3,
                        )
                        continue
                    if aliases.get(alias_key, key) != key:
                        warnings.warn(
                            f"{entry.path}: alias {short_repr(alias)} also names "
                            f"{self._entries[kind][aliases[alias_key]].name}; it now "
                            f"means {entry.name}",
                            SpecWarning,
                            stacklevel=3,
                        )
                    aliases[alias_key] = key
            for key, inherited in self._inherited[kind].items():
                for alias in inherited:
                    alias_key = normalize_name(alias)
                    if alias_key not in self._entries[kind] and alias_key not in aliases:
                        aliases[alias_key] = key  # unless a name or an alias claimed above
            self._aliases[kind] = aliases

    def _find(self, kind: str, name: str) -> Entry | None:
        key = normalize_name(name)
        entries = self._entries[kind]
        if key in entries:
            return entries[key]
        target = self._aliases[kind].get(key)
        return None if target is None else entries[target]

    # -- lookup -----------------------------------------------------------------------------------
    def entry(self, kind: SpecKind, name: str) -> Entry:
        """The entry for ``name`` (or an alias); :class:`UnknownNameError` lists close names."""
        if kind not in self._entries:
            raise SpecError(
                f"unknown spec kind {short_repr(kind)} (expected one of {', '.join(KINDS)})")
        found = self._find(kind, name)
        if found is None:
            names = [e.name for e in self._entries[kind].values()]
            by_key = {normalize_name(n): n for n in names}
            for alias, key in self._aliases[kind].items():
                by_key[alias] = self._entries[kind][key].name
            close = difflib.get_close_matches(normalize_name(name), list(by_key), n=4, cutoff=0.5)
            suggestions = list(dict.fromkeys(by_key[c] for c in close))
            if not suggestions:
                suggestions = [n for n in names if normalize_name(name) in normalize_name(n)][:4]
            raise UnknownNameError(kind, name, suggestions, skipped=len(self.problems))
        return found

    @overload
    def get(self, kind: Literal["accelerator"], name: str) -> Accelerator: ...
    @overload
    def get(self, kind: Literal["link"], name: str) -> Link: ...
    @overload
    def get(self, kind: Literal["system"], name: str) -> System: ...
    @overload
    def get(self, kind: Literal["model"], name: str) -> ModelSpec: ...
    @overload
    def get(self, kind: Literal["engine"], name: str) -> Engine: ...
    @overload
    def get(self, kind: SpecKind, name: str) -> Spec: ...
    def get(self, kind: SpecKind, name: str) -> Spec:
        """The spec of ``kind`` called ``name`` (or an alias)."""
        return self.entry(kind, name).spec

    def accelerator(self, name: str) -> Accelerator:
        return self.get("accelerator", name)

    def link(self, name: str) -> Link:
        return self.get("link", name)

    def system(self, name: str) -> System:
        return self.get("system", name)

    def model(self, name: str) -> ModelSpec:
        return self.get("model", name)

    def engine(self, name: str) -> Engine:
        return self.get("engine", name)

    def all(self, kind: SpecKind) -> list[Spec]:
        """Every spec of ``kind``, sorted by name."""
        return [e.spec for e in self.entries(kind)]

    def entries(self, kind: SpecKind) -> list[Entry]:
        """Every entry of ``kind``, sorted by name."""
        return sorted(self._entries[kind].values(), key=lambda e: normalize_name(e.name))

    def names(self, kind: SpecKind) -> list[str]:
        """The names of every spec of ``kind``, sorted."""
        return [e.name for e in self.entries(kind)]



@lru_cache(maxsize=1)
def _cached_default(env: str) -> Registry:
    return Registry()


def default_registry() -> Registry:
    """The registry of built-in specs plus ``KVROOF_SPEC_PATH`` (rebuilt when it changes)."""
    return _cached_default(os.environ.get(ENV_VAR, ""))
