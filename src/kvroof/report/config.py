"""What `kvroof report` covers: models, hardware and settings, from defaults or a YAML file.

Every key is optional; an unknown key, a wrong type, a number out of range (non-finite, negative
where it cannot be), an unknown model or hardware name, or a trace or measurements folder that
is not there is a one-line error naming the file and the key, found before any work starts.
Relative paths in a config file are relative to the file's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from kvroof.cost.checks import MAX_TOKENS, whole_tokens
from kvroof.errors import KvroofError, SpecError
from kvroof.files.yaml_reading import load_yaml_file
from kvroof.report.config_sections import (
    _DEFAULT_HARDWARE,
    MAX_SYNTHETIC_REQUESTS,
    HardwarePair,
    PlanningReport,
    SimulationReport,
    WorkloadDeployment,
    WorkloadTrace,
    _CachedTokens,
    _Count,
    _default_workload_deployments,
    _Efficiency,
    _finite,
    _png_only,
    _resolved,
    _Strict,
    _Tokens,
)
from kvroof.specs.loader import validation_message
from kvroof.specs.registry import Registry

if TYPE_CHECKING:
    from kvroof.cost.deployment import Deployment

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_SYNTHETIC_REQUESTS",
    "HardwarePair",
    "PlanningReport",
    "ReportConfig",
    "load_report_config",
]

MAX_CONFIG_BYTES: Final = 1 << 20
"""Largest report config read (1 MiB)."""


class ReportConfig(_Strict):
    """Settings of the report. Defaults reproduce the paper's analysis and extend it."""

    models: list[str] = Field(default_factory=lambda: ["qwen3-235b-a22b", "deepseek-v3"],
                              min_length=1)
    paper_models: list[str] = Field(default_factory=lambda: [
        "llama-3.1-70b", "llama-3.1-405b", "qwen3-30b-a3b", "qwen3-235b-a22b", "deepseek-v3"])
    hardware: list[HardwarePair] = Field(default_factory=lambda: list(_DEFAULT_HARDWARE),
                                         min_length=1)
    system: str = "dgx-h100"
    fallback_systems: list[str] = Field(default_factory=lambda: ["hgx-h200"])
    """Systems tried, in order, for a model whose weights do not fit on ``system``."""
    regime_systems: list[str] = Field(default_factory=lambda: ["dgx-h100", "gh200"])
    """Systems of the two-regime kappa-vs-T figure (each model at TP ``tp``, or 1 on a system
    with fewer GPUs); a model that does not fit is said so."""
    token_budget: Annotated[float, BeforeValidator(_finite), Field(ge=1, le=MAX_TOKENS),
                            AfterValidator(whole_tokens)] = 8192.0
    """Tokens of a full iteration (the busy regime): vLLM's max_num_batched_tokens."""
    testbed: str = "paper-testbed"
    new_tokens: _Tokens = 128.0
    tp: _Count = Field(8, ge=1)
    compute_dtype: str = "bf16"
    compute_model: Literal["roofline", "kernels", "auto"] = "auto"
    """How compute is timed in every deployment of the report (and its validation section):
    ``auto`` (the measured kernel tables where they cover the accelerator, else the roofline),
    ``kernels`` or ``roofline`` (the seed paper's whole-model roofline)."""
    bandwidth_source: Literal["peak", "sustained"] = "sustained"
    compute_efficiency: _Efficiency | None = None
    """Share of the dense peak; default: each accelerator's published achievable matmul rate."""
    link_efficiency: _Efficiency = 1.0
    mla_mode: Literal["expanded", "absorbed"] = "expanded"
    breakdown_tokens: tuple[_Tokens, _CachedTokens] = (128.0, 16384.0)
    formats: list[Literal["png", "svg", "pdf"]] = Field(default_factory=_png_only, min_length=1)
    workloads: list[WorkloadTrace] = Field(default_factory=list)
    workload_deployments: list[WorkloadDeployment] = Field(
        default_factory=_default_workload_deployments, min_length=1)
    simulation: SimulationReport | None = Field(default_factory=lambda: SimulationReport())
    """The serving-simulation section (by default the Mooncake slice shipped with kvroof on four
    paper testbeds; ``simulation: null`` leaves it out)."""
    planning: PlanningReport | None = Field(default_factory=lambda: PlanningReport())
    """The planning section (``kvroof plan`` on the shipped trace; ``planning: null`` leaves it
    out)."""
    measurements: Path | None = None
    """A `kvroof measure` output folder: calibrate on it and add measured-vs-predicted figures."""
    measured_system: str | None = None
    """The system the measurements were taken on (needed with ``measurements``)."""
    synthetic_requests: _Count = Field(20000, ge=100)
    synthetic_max_context: _Count | None = Field(131072, ge=2)
    """Synthetic requests longer than this are cut to it (null: no cap)."""
    seed: _Count = Field(0, ge=0)

    @field_validator("synthetic_requests")
    @classmethod
    def _not_too_many(cls, count: int) -> int:
        if count > MAX_SYNTHETIC_REQUESTS:
            raise ValueError(f"at most {MAX_SYNTHETIC_REQUESTS:,} synthetic requests per "
                             f"workload (the report draws three), got {count:,}")
        return count

    @field_validator("measurements")
    @classmethod
    def _a_results_folder(cls, folder: Path | None, info: ValidationInfo) -> Path | None:
        if folder is None:
            return None
        folder = _resolved(folder, info)
        if not folder.exists():
            raise ValueError(f"no such folder: {folder}")
        if not folder.is_dir():
            raise ValueError(f"not a folder (a `kvroof measure -o` folder is expected): {folder}")
        if not (folder / "prefill.csv").is_file():
            raise ValueError(f"{folder} holds no prefill.csv (run `kvroof measure prefill -o "
                             f"{folder}`)")
        return folder

    @field_validator("formats")
    @classmethod
    def _png_first(cls, formats: list[str]) -> list[str]:
        # the HTML embeds PNG, so PNG is always written
        return ["png", *[f for f in formats if f != "png"]]

    def placed(self, model: str, registry: Registry, **changes: Any) -> Deployment:
        """``model`` on ``system``, or on the first of ``fallback_systems`` where its weights
        fit (``system`` again when none fits: callers mark it)."""
        from kvroof.cost.deployment import deployment
        from kvroof.cost.memory_fit import memory_fit

        first: Deployment | None = None
        for name in (self.system, *self.fallback_systems):
            settings = self.settings(**changes)
            gpus = registry.system(name).num_accelerators
            settings["tp"] = min(settings["tp"], gpus)
            dep = deployment(model, system=name, registry=registry, **settings)
            first = first or dep
            if memory_fit(dep).fits:
                return dep
        assert first is not None
        return first

    def settings(self, **changes: Any) -> dict[str, Any]:
        """The deployment settings the config gives (for :func:`kvroof.deployment`),
        with ``changes`` on top."""
        settings: dict[str, Any] = {
            "tp": self.tp,
            "compute_dtype": self.compute_dtype,
            "compute_model": self.compute_model,
            "bandwidth_source": self.bandwidth_source,
            "compute_efficiency": self.compute_efficiency,
            "link_efficiency": self.link_efficiency,
            "mla_mode": self.mla_mode,
        }
        settings.update(changes)
        return settings

    def check_deployments(self, registry: Registry, path: Path | str = "<config>") -> None:
        """Build every deployment the report uses once, so that a setting that does not fit
        the hardware (TP above a system's GPUs, a dtype without a peak) is a one-line error
        naming the file and the key."""
        from kvroof.cost.deployment import deployment

        def attempt(key: str, **where: Any) -> None:
            try:
                for model in self.models:
                    deployment(model, registry=registry, **where)
            except KvroofError as error:
                field, _, rest = str(error).partition(": ")
                if field in self.settings():
                    raise SpecError(rest, path, field) from None
                raise SpecError(str(error), path, key) from None

        attempt("system", system=self.system, **self.settings())
        attempt("testbed", system=self.testbed, **self.settings(bandwidth_source="sustained"))
        for i, pair in enumerate(self.hardware):
            attempt(f"hardware[{i}]", accelerator=pair.accelerator, link=pair.link,
                    **self.settings(tp=1))
        for i, entry in enumerate(self.workload_deployments):
            attempt(f"workload_deployments[{i}]", system=entry.system,
                    accelerator=entry.accelerator, link=entry.link,
                    **self.settings(tp=entry.tp))
        if self.simulation is not None:
            from kvroof.cost.memory_fit import check_fit

            sim = self.simulation
            try:
                check_fit(deployment(sim.model, system=sim.system, registry=registry,
                                     **self.settings(tp=sim.tp)))
            except KvroofError as error:
                raise SpecError(str(error), path, "simulation") from None
            for i, model in enumerate(sim.paper_load_models):
                try:
                    check_fit(deployment(model, system="paper-testbed", tp=8,
                                         registry=registry))
                except KvroofError as error:
                    raise SpecError(str(error), path,
                                    f"simulation.paper_load_models[{i}]") from None
        if self.planning is not None:
            from kvroof.plan.candidates import resolve_candidate
            from kvroof.plan.inputs import Candidate

            settings = {k: v for k, v in self.settings().items() if k != "tp" and v is not None}
            for i, text in enumerate(self.planning.candidates):
                try:  # the weights fit (the trace's longest request is the plan's to check)
                    resolve_candidate(self.planning.model, Candidate.parse(text), settings,
                                      registry)
                except KvroofError as error:
                    raise SpecError(str(error).removeprefix(f"candidate {text}: "), path,
                                    f"planning.candidates[{i}]") from None

    def check_names(self, registry: Registry, path: Path | str = "<config>") -> None:
        """Raise a one-line error for any unknown model, accelerator, link or system, or a
        trace whose format cannot be told from its first 64 KiB."""
        checks: list[tuple[str, str, str]] = [
            *((f"models[{i}]", "model", m) for i, m in enumerate(self.models)),
            *((f"paper_models[{i}]", "model", m) for i, m in enumerate(self.paper_models)),
            *((f"hardware[{i}].accelerator", "accelerator", h.accelerator)
              for i, h in enumerate(self.hardware)),
            *((f"hardware[{i}].link", "link", h.link) for i, h in enumerate(self.hardware)),
            ("system", "system", self.system),
            ("testbed", "system", self.testbed),
            *((f"fallback_systems[{i}]", "system", n) for i, n in enumerate(self.fallback_systems)),
            *((f"regime_systems[{i}]", "system", n) for i, n in enumerate(self.regime_systems)),
        ]
        if self.measurements is not None and self.measured_system is None:
            raise SpecError("measurements need measured_system (the system they were taken on)",
                            path, "measured_system")
        if self.measured_system is not None:
            checks.append(("measured_system", "system", self.measured_system))
        if self.simulation is not None:
            checks += [("simulation.model", "model", self.simulation.model),
                       ("simulation.system", "system", self.simulation.system),
                       *((f"simulation.paper_load_models[{i}]", "model", m)
                         for i, m in enumerate(self.simulation.paper_load_models))]
        if self.planning is not None:
            from kvroof.plan.inputs import Candidate

            checks.append(("planning.model", "model", self.planning.model))
            for i, text in enumerate(self.planning.candidates):
                name = Candidate.parse(text).name
                try:  # a system, else an accelerator (as kvroof plan reads it)
                    registry.system(name)
                except LookupError:
                    checks.append((f"planning.candidates[{i}]", "accelerator", name))
        for i, entry in enumerate(self.workload_deployments):
            if (entry.system is None) == (entry.accelerator is None):
                raise SpecError("give a system or an accelerator (not both)", path,
                                f"workload_deployments[{i}]")
            if entry.system is not None:
                checks.append((f"workload_deployments[{i}].system", "system", entry.system))
            if entry.accelerator is not None:
                checks.append((f"workload_deployments[{i}].accelerator", "accelerator",
                               entry.accelerator))
            if entry.link is not None:
                checks.append((f"workload_deployments[{i}].link", "link", entry.link))
        for field, kind, name in checks:
            try:
                registry.get(kind, name)  # type: ignore[call-overload]
            except LookupError as error:
                raise SpecError(str(error), path, field) from None
        for i, trace in enumerate(self.workloads):
            if trace.format is None:
                from kvroof.workload.formats import guess_format

                try:
                    guess_format(trace.path)
                except KvroofError as error:
                    raise SpecError(str(error), path, f"workloads[{i}].path") from None


def load_report_config(path: str | Path, registry: Registry) -> ReportConfig:
    """Read a report config YAML; errors name the file and the key. The file is read with the
    limits of :mod:`kvroof.files.reading` (at most :data:`MAX_CONFIG_BYTES`, UTF-8, bounded
    nesting and YAML aliases, no key written twice)."""
    source = Path(path)
    data = load_yaml_file(source, MAX_CONFIG_BYTES, "report configs")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError("expected a mapping of settings at the top level", source)
    try:  # relative paths: relative to the config file's folder
        config = ReportConfig.model_validate(data, context={"base": source.parent})
    except ValidationError as error:
        field, message = validation_message(error)
        raise SpecError(message, source, field) from None
    config.check_names(registry, source)
    config.check_deployments(registry, source)
    if config.measurements is not None:  # read and fit them now, not after half the figures
        from kvroof.report.calibration import calibrate_folder

        assert config.measured_system is not None  # check_names asks for it
        try:
            calibrate_folder(config.measurements, config.measured_system, registry)
        except KvroofError as error:
            raise SpecError(str(error), source, "measurements") from None
    return config
