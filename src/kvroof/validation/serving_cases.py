"""Serving validation cases: published serving runs (request rate against TTFT, TPOT, end-to-end
latency and throughput), one YAML file per source under ``validation/serving/``.

A file holds the ``source`` (title, URL), the ``replay`` (what the simulator is given: model,
hardware, replicas, engine settings, compute model, router, and the ``workload`` of shared-prefix
groups and stages as inference-perf runs them), the ``conditions`` (one per published
configuration, e.g. HBM only and with a host tier, each with its cache settings, its router
weights and its ``stages``: one measured row per request rate)
and ``left_out`` (numbers the source gives that are not scored, each with the reason). Every
condition lists its ``assumptions``; a stage whose measured system was saturated says so
(``saturated``, with the reason in ``where`` or ``notes``), and is shown and counted apart, never
dropped.

Errors are one line naming the file and the field (``conditions[1].stages[3].mean_ttft``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field, ValidationError, model_validator

from kvroof.cost.compute_figures import ComputeModel
from kvroof.errors import KvroofError, SpecError, short_repr
from kvroof.files.yaml_reading import load_yaml_file
from kvroof.simulate.router_weights import RouterWeights
from kvroof.simulate.settings import OffloadStore, Router
from kvroof.specs.base import Capacity, PositiveInt, SpecModel, Time
from kvroof.specs.loader import validation_message
from kvroof.specs.registry import Registry
from kvroof.validation.cases import SERVING_FOLDER, LeftOut, Source, builtin_validation_dir

__all__ = [
    "METRICS",
    "SERVING_FOLDER",
    "Condition",
    "Metric",
    "Replay",
    "ServingFile",
    "Stage",
    "Workload",
    "check_serving_names",
    "load_serving_cases",
    "load_serving_file",
]

Metric = Literal["mean_ttft", "mean_tpot", "mean_e2e", "throughput"]
METRICS: Final[tuple[Metric, ...]] = ("mean_ttft", "mean_tpot", "mean_e2e", "throughput")
"""The metrics a stage may give: means over the stage's requests (seconds) and tokens per
second (``throughput``, output or total tokens as the file's ``workload.throughput`` says)."""
_ID = r"^[a-z0-9][a-z0-9._-]*$"
MAX_SERVING_FILE_BYTES: Final = 1 << 20


class Workload(SpecModel):
    """The benchmark's workload: inference-perf's ``shared_prefix`` data and its stages.

    ``groups`` x ``prompts_per_group`` prompts, each a group's ``prefix_tokens`` followed by its
    own ``question_tokens``; request ``i`` (counted across stages) sends prompt ``i mod P`` of a
    seeded shuffle of the ``P`` prompts (inference-perf ``SharedPrefixDataGenerator``). Each stage
    sends ``int(rate x stage_duration)`` requests by inference-perf's ``arrival`` timer (its
    ``load.type``: ``poisson`` or ``constant``, :mod:`kvroof.workload.stages`), drains, and the
    next starts ``stage_interval`` seconds later (its ``load.interval``)."""

    kind_name: ClassVar[str] = "workload"

    groups: PositiveInt
    prompts_per_group: PositiveInt
    prefix_tokens: PositiveInt
    question_tokens: PositiveInt
    output_tokens: PositiveInt
    stage_duration: Time
    throughput: Literal["output", "total"]
    arrival: Literal["poisson", "constant"] = "poisson"
    stage_interval: Time = 0.0
    seed: Annotated[int, Field(ge=0, strict=True)] = 0

    @model_validator(mode="after")
    def _positive_duration(self) -> Workload:
        if self.stage_duration <= 0:
            raise ValueError("stage_duration: must be positive")
        if self.stage_interval < 0:
            raise ValueError("stage_interval: must not be negative")
        return self


class Replay(SpecModel):
    """What the simulator is given for every condition of a file."""

    kind_name: ClassVar[str] = "replay"

    model: Annotated[str, Field(min_length=1)]
    system: str | None = None
    accelerator: str | None = None
    tp: PositiveInt = 1
    replicas: PositiveInt
    engine: Annotated[str, Field(min_length=1)]
    engine_version: str = ""
    memory_utilization: Annotated[float, Field(gt=0, le=1)] | None = None
    block_tokens: PositiveInt
    max_num_seqs: PositiveInt | None = None
    max_num_batched_tokens: PositiveInt | None = None
    compute_model: ComputeModel = "auto"
    router: Router = "scoring"
    workload: Workload

    @model_validator(mode="after")
    def _hardware(self) -> Replay:
        if (self.system is None) == (self.accelerator is None):
            raise ValueError("give a system or an accelerator (one of them)")
        return self


class Stage(SpecModel):
    """One published row: a request rate and what was measured at it."""

    kind_name: ClassVar[str] = "stage"

    rate: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    where: Annotated[str, Field(min_length=1)]
    mean_ttft: Time | None = None
    mean_tpot: Time | None = None
    mean_e2e: Time | None = None
    throughput: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    saturated: bool = False
    notes: str = ""

    @model_validator(mode="after")
    def _something_measured(self) -> Stage:
        if all(self.measured(m) is None for m in METRICS):
            raise ValueError(f"a stage gives at least one of {', '.join(METRICS)}")
        for metric in ("mean_ttft", "mean_tpot", "mean_e2e"):
            value = getattr(self, metric)
            if value is not None and value <= 0:
                raise ValueError(f"{metric}: must be positive, got {short_repr(value)}")
        if self.saturated and not (self.notes or "satur" in self.where.lower()):
            raise ValueError("saturated: say why in notes (what in the source shows it)")
        return self

    def measured(self, metric: str) -> float | None:
        """The measured value of ``metric`` (SI units), ``None`` when not published."""
        value: float | None = getattr(self, metric)
        return value


class Condition(SpecModel):
    """One published configuration (e.g. HBM only, or with a host tier) and its stages.

    ``cache_policy`` ``recompute`` (HBM only) or ``load`` with ``dram_cache`` bytes of host DRAM
    per replica; ``offload_store`` and ``write_back`` override the engine profile's (default:
    the profile's); ``router_weights`` the scoring router's weights (``KEY=W,...`` over kvroof's
    defaults, :class:`~kvroof.simulate.router_weights.RouterWeights`)."""

    kind_name: ClassVar[str] = "condition"

    id: Annotated[str, Field(pattern=_ID)]
    label: Annotated[str, Field(min_length=1)]
    cache_policy: Literal["recompute", "load"]
    dram_cache: Capacity | None = None
    offload_store: OffloadStore | None = None
    write_back: bool | None = None
    router_weights: str | None = None
    rating: Literal["B", "C"] = "B"
    assumptions: Annotated[tuple[str, ...], Field(min_length=1)]
    excluded_metrics: dict[Metric, str] = Field(default_factory=dict)
    stages: Annotated[tuple[Stage, ...], Field(min_length=1)]

    @model_validator(mode="after")
    def _check(self) -> Condition:
        if self.cache_policy == "recompute" and self.dram_cache is not None:
            raise ValueError("dram_cache: an HBM-only condition (cache_policy recompute) has no "
                             "host tier")
        if self.cache_policy == "load" and self.dram_cache is None:
            raise ValueError("dram_cache: a condition with a host tier gives its size per "
                             "replica")
        rates = [stage.rate for stage in self.stages]
        if len(set(rates)) != len(rates):
            raise ValueError("stages: a rate appears twice")
        if rates != sorted(rates):
            raise ValueError("stages: give the stages in the order they ran (rising rates)")
        for metric, reason in self.excluded_metrics.items():
            if not reason.strip():
                raise ValueError(f"excluded_metrics.{metric}: give the reason")
        if self.router_weights is not None:
            try:
                RouterWeights.parse(self.router_weights)
            except KvroofError as error:
                raise ValueError(str(error)) from None
        return self

    def weights(self) -> RouterWeights:
        """The scoring router's weights: ``router_weights`` over kvroof's defaults."""
        return RouterWeights() if self.router_weights is None else RouterWeights.parse(
            self.router_weights)


@dataclass(frozen=True)
class ServingFile:
    """One source's serving file."""

    path: Path
    source: Source
    replay: Replay
    conditions: tuple[Condition, ...]
    left_out: tuple[LeftOut, ...]

    @property
    def name(self) -> str:
        """The file's name without the suffix: the source's short name."""
        return self.path.stem


_TOP_KEYS: Final = ("source", "replay", "conditions", "left_out")


def _validated(cls: type[SpecModel], data: object, path: Path, field: str) -> SpecModel:
    if not isinstance(data, dict):
        raise SpecError("expected a mapping of fields", path, field)
    try:
        return cls.model_validate(data, context={"from_file": True})
    except ValidationError as error:
        where, message = validation_message(error, cls)  # type: ignore[arg-type]
        head, sep, rest = message.partition(": ")
        if sep and re.fullmatch(r"[a-z_]+(\.[a-z_]+)?", head):  # a check across fields
            where, message = f"{where}.{head}" if where else head, rest
        raise SpecError(message, path, f"{field}.{where}" if where else field) from None


def load_serving_file(path: str | Path) -> ServingFile:
    """Load and validate one serving case file; errors are :class:`SpecError` naming the file
    and the field. Read with the limits of :mod:`kvroof.files.reading`."""
    path = Path(path)
    data = load_yaml_file(path, MAX_SERVING_FILE_BYTES, "serving validation case files")
    if not isinstance(data, dict):
        raise SpecError("expected a mapping with source, replay, conditions and left_out", path)
    unknown = sorted(str(key) for key in data if key not in _TOP_KEYS)
    if unknown:
        raise SpecError(f"unknown key (allowed keys: {', '.join(_TOP_KEYS)})", path, unknown[0])
    for key in ("source", "replay", "conditions"):
        if key not in data:
            raise SpecError("missing field", path, key)
    source = _validated(Source, data["source"], path, "source")
    replay = _validated(Replay, data["replay"], path, "replay")
    assert isinstance(replay, Replay)
    raw = data["conditions"]
    if not isinstance(raw, list) or not raw:
        raise SpecError("expected a list of at least one condition", path, "conditions")
    conditions: list[Condition] = []
    for index, item in enumerate(raw):
        condition = _validated(Condition, item, path, f"conditions[{index}]")
        assert isinstance(condition, Condition)
        if any(c.id == condition.id for c in conditions):
            raise SpecError(f"duplicate condition id {short_repr(condition.id)}", path,
                            f"conditions[{index}].id")
        if condition.router_weights is not None and replay.router != "scoring":
            raise SpecError("apply to the scoring router (replay.router is "
                            f"{replay.router!r})", path, f"conditions[{index}].router_weights")
        conditions.append(condition)
    raw_left = data.get("left_out") or []
    if not isinstance(raw_left, list):
        raise SpecError("expected a list", path, "left_out")
    left = [_validated(LeftOut, item, path, f"left_out[{i}]") for i, item in enumerate(raw_left)]
    assert isinstance(source, Source)
    return ServingFile(path, source, replay, tuple(conditions),
                       tuple(item for item in left if isinstance(item, LeftOut)))


def load_serving_cases(folders: Iterable[str | Path] | None = None) -> list[ServingFile]:
    """Every serving file (``*.yaml`` in the ``serving`` sub-folder of each of ``folders``;
    default: the built-in validation folder), sorted by name; condition ids unique across
    files. A folder without serving files gives none."""
    chosen = [builtin_validation_dir()] if folders is None else [Path(f) for f in folders]
    files: list[ServingFile] = []
    owner: dict[str, Path] = {}
    for folder in chosen:
        if not folder.is_dir():
            raise SpecError("validation folder does not exist", folder)
        serving = folder / SERVING_FOLDER
        if not serving.is_dir():
            continue
        for path in sorted(p for p in serving.rglob("*") if p.suffix in (".yaml", ".yml")):
            loaded = load_serving_file(path)
            for index, condition in enumerate(loaded.conditions):
                if condition.id in owner:
                    raise SpecError(f"duplicate condition id {condition.id!r} (also in "
                                    f"{owner[condition.id]})", path, f"conditions[{index}].id")
                owner[condition.id] = path
            files.append(loaded)
    return files


def check_serving_names(files: Iterable[ServingFile], registry: Registry) -> None:
    """Raise :class:`SpecError` (file and field) for a replay naming an unknown model, system,
    accelerator or engine."""
    for loaded in files:
        for field in ("model", "system", "accelerator", "engine"):
            name = getattr(loaded.replay, field)
            if name is None:
                continue
            try:
                registry.get(field, name)
            except KvroofError as error:
                raise SpecError(str(error), loaded.path, f"replay.{field}") from None
