"""Validation cases: published measurements of KV loading and prefill, one YAML file per source.

A case file holds the ``source`` (title, URL), optional ``defaults`` (fields shared by its cases),
the ``cases`` (one per measured number) and ``left_out`` (numbers the source gives that are not
cases, each with the reason). A case says what was measured (``quantity``, ``measured`` with its
unit, ``timed``: what exactly the clock covered, ``where``: table, row, line or comment), under
which conditions (model, hardware, engine and version, TP, dtypes, T and K, copy size, direction,
free-text ``conditions``), how usable it is (``rating`` A: a single request or microbenchmark
with its conditions stated; B: usable with the ``assumptions`` it lists; C: for qualitative checks
only, never in the statistics) and whether kvroof's copy-size fit uses it (``in_fit``).

``decode_step_time`` is the time of one decode step of a lone request (a TPOT at concurrency 1):
one new token (``new_tokens: 1``) attending to ``cached_tokens`` of context. ``ttft_clock`` is
the clock the measurement used (``client``: a benchmark client's TTFT or TPOT, serving stack
included); when set, the case is predicted on that clock whatever ``--ttft-clock`` says.
``same_source_as_kernel_tables`` marks a case measured by the same source that the kernel tables
(:mod:`kvroof.kernels`) were derived from (ai-dynamo/aiconfigurator): on the same GPU and engine
it is not independent of kernel mode (:func:`kvroof.validation.predict.kernel_tables_overlap`).

Errors are one line naming the file and the field (``cases[3].measured``), like spec errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from kvroof.cost.checks import whole_tokens
from kvroof.errors import KvroofError, SpecError, short_repr
from kvroof.files.yaml_reading import load_yaml_file
from kvroof.specs.base import Capacity, PositiveInt, SpecModel
from kvroof.specs.loader import validation_message
from kvroof.specs.registry import Registry
from kvroof.units import Kind, UnitError, parse_quantity

__all__ = [
    "LINK_QUANTITIES",
    "MAX_CASE_FILE_BYTES",
    "QUANTITIES",
    "SERVING_FOLDER",
    "UNIT_KINDS",
    "Case",
    "CaseFile",
    "LeftOut",
    "Quantity",
    "Source",
    "builtin_validation_dir",
    "check_names",
    "load_case_file",
    "load_cases",
]

Quantity = Literal["link_bandwidth", "copy_time", "layer_load_time", "prefill_compute_time",
                   "ttft_with_prefix", "kappa_crit", "decode_step_time"]
QUANTITIES: Final[tuple[Quantity, ...]] = ("link_bandwidth", "copy_time", "layer_load_time",
                                           "prefill_compute_time", "ttft_with_prefix",
                                           "kappa_crit", "decode_step_time")
LINK_QUANTITIES: Final = frozenset({"link_bandwidth", "copy_time", "layer_load_time"})
"""Quantities of the host link alone (no model): copies of ``copy_size`` bytes."""
UNIT_KINDS: Final[dict[str, Kind | None]] = {
    "link_bandwidth": Kind.BANDWIDTH,
    "copy_time": Kind.TIME,
    "layer_load_time": Kind.TIME,
    "prefill_compute_time": Kind.TIME,
    "ttft_with_prefix": Kind.TIME,
    "kappa_crit": None,
    "decode_step_time": Kind.TIME,
}
_ID = r"^[a-z0-9][a-z0-9._-]*$"
_Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "nvfp4"]


class Source(SpecModel):
    """Where a file's numbers come from."""

    kind_name: ClassVar[str] = "source"

    title: Annotated[str, Field(min_length=1)]
    url: Annotated[str, Field(pattern=r"^https?://\S+$")]
    date: str = ""
    notes: str = ""

    @field_validator("date", mode="before")
    @classmethod
    def _date_text(cls, value: object) -> object:
        return str(value) if value is not None and not isinstance(value, str) else value


class LeftOut(SpecModel):
    """A number the source gives that is not a case, and why."""

    kind_name: ClassVar[str] = "left-out entry"

    what: Annotated[str, Field(min_length=1)]
    where: str = ""
    value: str = ""
    reason: Annotated[str, Field(min_length=1)]


class Case(SpecModel):
    """One measured number and the conditions it was measured under (module docstring)."""

    kind_name: ClassVar[str] = "case"

    id: Annotated[str, Field(pattern=_ID)]
    quantity: Quantity
    measured: float
    where: Annotated[str, Field(min_length=1)]
    timed: Annotated[str, Field(min_length=1)]
    rating: Literal["A", "B", "C"]
    engine: Annotated[str, Field(min_length=1)]
    engine_version: str = ""
    model: str | None = None
    system: str | None = None
    accelerator: str | None = None
    link: str | None = None
    tp: PositiveInt = 1
    compute_dtype: _Dtype = "bf16"
    kv_dtype: _Dtype = "bf16"
    weight_dtype: _Dtype | None = None
    new_tokens: Annotated[float, Field(ge=0), AfterValidator(whole_tokens)] | None = None
    cached_tokens: Annotated[float, Field(ge=0), AfterValidator(whole_tokens)] | None = None
    copy_size: Capacity | None = None
    copies: PositiveInt = 1
    direction: Literal["h2d", "d2h", "both"] = "h2d"
    conditions: str = ""
    in_fit: bool = False
    ttft_clock: Literal["kernel", "client"] | None = None
    same_source_as_kernel_tables: bool = False
    excluded: str = ""
    assumptions: tuple[str, ...] = ()
    notes: str = ""

    @field_validator("measured", mode="before")
    @classmethod
    def _measured(cls, value: object, info: ValidationInfo) -> float:
        quantity = info.data.get("quantity")
        kind = UNIT_KINDS.get(str(quantity)) if quantity is not None else None
        if quantity is None:
            raise ValueError("cannot read without a valid quantity")
        if kind is None:
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"expected a positive number for {quantity}, got "
                                 f"{short_repr(value)}")
            return float(value)
        if not isinstance(value, str):
            raise ValueError(f"write the measured {kind.value} with its unit, like "
                             f"{kind.example!r}")
        try:
            measured = parse_quantity(value, kind)
        except UnitError as error:
            raise ValueError(str(error)) from None
        if measured <= 0:
            raise ValueError(f"must be positive, got {short_repr(value)}")
        return measured

    @model_validator(mode="after")
    def _check(self) -> Case:
        link_level = self.quantity in LINK_QUANTITIES
        if link_level:
            if self.copy_size is None:
                raise ValueError(f"copy_size: a {self.quantity} case needs the bytes per copy")
            if self.model is not None:
                raise ValueError(f"model: not used by a {self.quantity} case (only the link and "
                                 "the copy method are)")
            if self.system is None and self.accelerator is None and self.link is None:
                raise ValueError("give a system, an accelerator or a link")
        else:
            if self.model is None:
                raise ValueError(f"model: a {self.quantity} case needs a model")
            if self.new_tokens is None:
                raise ValueError(f"new_tokens: a {self.quantity} case needs T")
            if self.copy_size is not None:
                raise ValueError("copy_size: only for link_bandwidth, copy_time and "
                                 "layer_load_time cases")
            if (self.system is None) == (self.accelerator is None):
                raise ValueError("give a system or an accelerator (one of them)")
        if self.quantity == "ttft_with_prefix" and not self.cached_tokens:
            raise ValueError("cached_tokens: a ttft_with_prefix case needs K > 0")
        if self.quantity == "decode_step_time" and self.new_tokens != 1:
            raise ValueError("new_tokens: a decode_step_time case computes one token a step "
                             "(new_tokens: 1; cached_tokens is the context it attends to)")
        if self.quantity == "prefill_compute_time" and self.cached_tokens:
            raise ValueError("cached_tokens: a prefill_compute_time case has no cached prefix")
        if self.in_fit and not (link_level and self.direction == "h2d"):
            raise ValueError("in_fit: only host-to-device link cases are fitted")
        if self.in_fit and self.rating == "C":
            raise ValueError("in_fit: a C-rated case is never fitted")
        if self.rating == "B" and not self.assumptions:
            raise ValueError("assumptions: a B-rated case lists what it assumes")
        return self

    @property
    def in_statistics(self) -> bool:
        """Whether the error statistics count this case (A or B, not excluded)."""
        return self.rating != "C" and not self.excluded


@dataclass(frozen=True)
class CaseFile:
    """One source's file: its cases and what was left out."""

    path: Path
    source: Source
    cases: tuple[Case, ...]
    left_out: tuple[LeftOut, ...]

    @property
    def name(self) -> str:
        """The file's name without the suffix: the source's short name."""
        return self.path.stem


_TOP_KEYS: Final = ("source", "defaults", "cases", "left_out")
MAX_CASE_FILE_BYTES: Final = 1 << 20
"""The largest case file read (the biggest built-in one is about 8 kB)."""


def _validated(cls: type[SpecModel], data: object, path: Path, field: str) -> Any:
    if not isinstance(data, dict):
        raise SpecError("expected a mapping of fields", path, field)
    try:
        return cls.model_validate(data, context={"from_file": True})
    except ValidationError as error:
        where, message = validation_message(error, cls)  # type: ignore[arg-type]
        raise SpecError(message, path, f"{field}.{where}" if where else field) from None


def load_case_file(path: str | Path) -> CaseFile:
    """Load and validate one case file; errors are :class:`SpecError` naming file and field.
    The file is read with the limits of :mod:`kvroof.files.reading` (at most
    :data:`MAX_CASE_FILE_BYTES`, UTF-8, bounded nesting and YAML aliases, no key twice)."""
    path = Path(path)
    data = load_yaml_file(path, MAX_CASE_FILE_BYTES, "validation case files")
    if not isinstance(data, dict):
        raise SpecError("expected a mapping with source, defaults, cases and left_out", path)
    unknown = sorted(str(key) for key in data if key not in _TOP_KEYS)
    if unknown:
        raise SpecError(f"unknown key (allowed keys: {', '.join(_TOP_KEYS)})", path, unknown[0])
    if "source" not in data:
        raise SpecError("missing field", path, "source")
    source = _validated(Source, data["source"], path, "source")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise SpecError("expected a mapping of case fields", path, "defaults")
    for key in defaults:
        if key not in Case.model_fields or key == "id":
            raise SpecError("not a case field that can be shared", path, f"defaults.{key}")
    raw_cases = data.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise SpecError("expected a list of at least one case", path, "cases")
    cases: list[Case] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_cases):
        if not isinstance(raw, dict):
            raise SpecError("expected a mapping of fields", path, f"cases[{index}]")
        merged = {**defaults, **raw}
        try:
            case = Case.model_validate(merged, context={"from_file": True})
        except ValidationError as error:
            where, message = validation_message(error, Case)  # type: ignore[arg-type]
            head, sep, rest = message.partition(": ")
            if not where and sep and head in Case.model_fields:  # a check across fields
                where, message = head, rest
            key = where.split(".", 1)[0]
            if key in defaults and key not in raw:
                message += " (set in defaults)"
            raise SpecError(message, path,
                            f"cases[{index}]" + (f".{where}" if where else "")) from None
        if case.id in seen:
            raise SpecError(f"duplicate case id {short_repr(case.id)}", path, f"cases[{index}].id")
        seen.add(case.id)
        cases.append(case)
    raw_left = data.get("left_out") or []
    if not isinstance(raw_left, list):
        raise SpecError("expected a list", path, "left_out")
    left = [_validated(LeftOut, item, path, f"left_out[{i}]") for i, item in enumerate(raw_left)]
    return CaseFile(path, source, tuple(cases), tuple(left))


def builtin_validation_dir() -> Path:
    """The folder of the built-in cases (inside the installed package, else the repository)."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_data" / "validation"
    if packaged.is_dir():
        return packaged
    repository = package.parent.parent / "validation"
    if not repository.is_dir():
        raise SpecError(f"built-in validation folder not found: {repository}")
    return repository


SERVING_FOLDER: Final = "serving"
"""The sub-folder of a validation folder that holds serving case files (another format:
:mod:`kvroof.validation.serving_cases`); :func:`load_cases` skips it."""


def load_cases(folders: Iterable[str | Path] | None = None) -> list[CaseFile]:
    """Every case file (``*.yaml``) in ``folders`` (default: the built-in cases), sorted by
    name, except those in a ``serving`` sub-folder; case ids must be unique across files."""
    chosen = [builtin_validation_dir()] if folders is None else [Path(f) for f in folders]
    files: list[CaseFile] = []
    owner: dict[str, Path] = {}
    for folder in chosen:
        if folder.is_file():
            raise SpecError("is a file; give the folder that holds the case files", folder)
        if not folder.is_dir():
            raise SpecError("validation folder does not exist", folder)
        for path in sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml")
                           and SERVING_FOLDER not in p.relative_to(folder).parts[:-1]):
            loaded = load_case_file(path)
            for index, case in enumerate(loaded.cases):
                if case.id in owner:
                    raise SpecError(f"duplicate case id {case.id!r} (also in {owner[case.id]})",
                                    path, f"cases[{index}].id")
                owner[case.id] = path
            files.append(loaded)
    if not files:
        raise SpecError("no case files (*.yaml) found", chosen[0] if chosen else None)
    return files


def check_names(files: Sequence[CaseFile], registry: Registry) -> None:
    """Raise :class:`SpecError` (file and field) for a case naming an unknown model, system,
    accelerator, link or engine."""
    for loaded in files:
        for index, case in enumerate(loaded.cases):
            for field in ("model", "system", "accelerator", "link", "engine"):
                name = getattr(case, field)
                if name is None:
                    continue
                try:
                    registry.get(field, name)
                except KvroofError as error:
                    raise SpecError(str(error), loaded.path, f"cases[{index}].{field}") from None
