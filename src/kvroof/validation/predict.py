"""kvroof's prediction of one validation case, with each input and where it came from.

Two ways to predict, both from the library (no formula lives here):

- ``engine_profiles=False`` ("before engine profiles"): kvroof's defaults, as every command
  gives them without ``--engine``: the link's peak bandwidth and its 2 us per copy, 256-token
  blocks copied per layer, write-back on, serial overlap;
- ``engine_profiles=True``: the engine profile the case's source used (``--engine``), optionally
  with the copy-size parameters of a refit (``refit``, for held-out predictions).

Link-level cases (``link_bandwidth``, ``copy_time``, ``layer_load_time``) are copies of
``copy_size`` bytes timed by :func:`kvroof.cost.copy_size.copy_time`; a ``both`` case moves
``copy_size`` each way at once over the link's both-ways bandwidth. Model-level cases are
:func:`kvroof.cost.timing.ttft` of a deployment built by :func:`kvroof.cost.deployment.deployment`
(``prefill_compute_time`` with ``K = 0``), or :func:`kvroof.cost.kappa.kappa_crit`, with the
``compute_model`` asked for (``roofline``, the default, or ``kernels``: op by op from the kernel
tables, each op's model and source in the parts) and the ``ttft_clock`` (``kernel``, or
``client``: the engine profile's serving overheads added; a case measured on a stated clock,
``ttft_clock`` in its file, uses that). ``decode_step_time`` cases are one decode step of a lone
request (:func:`kvroof.cost.iteration.iteration_cost`, plus the profile's per-iteration time on
the client clock). :func:`kernel_tables_overlap` says whether a case shares its GPU and engine
with the kernel tables, and whether it comes from the same source (then it is not independent
of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kvroof.cost.copy_size import copy_time, engine_link_share
from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.iteration import iteration_cost
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.kernel_time import KernelBreakdown
from kvroof.cost.memory_fit import fit_problem
from kvroof.cost.serving import serving_terms
from kvroof.cost.timing import compute_breakdown, reused_tokens, ttft
from kvroof.cost.transfer import transfer_breakdown
from kvroof.errors import KvroofError
from kvroof.specs.engine import Engine
from kvroof.specs.hardware import Link
from kvroof.specs.registry import Registry
from kvroof.units import Kind, format_quantity
from kvroof.validation.cases import LINK_QUANTITIES, UNIT_KINDS, Case

__all__ = ["CopyParams", "Input", "Prediction", "as_text", "case_link", "engine_for",
           "kernel_tables_overlap", "predict_case"]

CopyParams = Mapping[str, Mapping[str, float]]
"""Per copy method (``copy-engine``, ``copy-kernel``): the fitted engine fields
(``copy_overhead``, ``link_share``) that replace the profiles' own."""


@dataclass(frozen=True)
class Input:
    """One input of a prediction (or one part of its result): name, value as text, origin."""

    name: str
    value: str
    origin: str


@dataclass(frozen=True)
class Prediction:
    """A predicted value in SI units (``None`` when the case cannot be predicted, with the
    ``problem``), the inputs it used and the parts of the result."""

    value: float | None
    problem: str
    inputs: tuple[Input, ...]
    parts: tuple[Input, ...] = ()


def engine_for(case: Case, registry: Registry, refit: CopyParams | None = None) -> Engine:
    """The case's engine profile, with the fields it lists as ``fitted`` replaced by ``refit``'s
    values for its copy method."""
    engine = registry.engine(case.engine)
    if refit is None or engine.copy_method not in refit:
        return engine
    values = refit[engine.copy_method]
    update: dict[str, Any] = {name: values[name] for name in engine.fitted if name in values}
    return engine.model_copy(update=update) if update else engine


def _where(path: Path | None) -> str:
    return f"registry: {path}" if path is not None else "registry"


def _engine_origin(engine: Engine, field: str, refitted: bool) -> str:
    if refitted and field in engine.fitted:
        return f"engine {engine.name}, refitted without this case's source"
    source = engine.sources.get(field)
    if source is None:
        return f"engine {engine.name}: not set by the profile (its notes say why)"
    return f"engine {engine.name}: {source}"


def _time(value: float) -> str:
    return "0 s" if value == 0 else format_quantity(value, Kind.TIME)


def _case_inputs(case: Case, origin: str) -> list[Input]:
    rows = [Input("quantity", case.quantity, origin), Input("engine", case.engine, origin)]
    if case.engine_version:
        rows.append(Input("engine version", case.engine_version, origin))
    for name in ("model", "system", "accelerator", "link"):
        value = getattr(case, name)
        if value is not None:
            rows.append(Input(name, value, origin))
    if case.quantity in LINK_QUANTITIES:
        assert case.copy_size is not None
        rows += [Input("copy size", format_quantity(case.copy_size, Kind.CAPACITY), origin),
                 Input("copies", f"{case.copies}", origin),
                 Input("direction", case.direction, origin)]
    else:
        rows += [Input("TP", f"{case.tp}", origin),
                 Input("dtypes", f"compute {case.compute_dtype}, KV {case.kv_dtype}, weights "
                                 f"{case.weight_dtype or 'as the checkpoint'}", origin),
                 Input("T (new tokens)", f"{case.new_tokens:g}", origin),
                 Input("K (cached tokens)", f"{case.cached_tokens or 0:g}", origin)]
    rows += [Input("assumption", text, origin) for text in case.assumptions]
    return rows


def case_link(case: Case, registry: Registry) -> Link:
    if case.link is not None:
        return registry.link(case.link)
    if case.system is not None:
        return registry.link(registry.system(case.system).host_link)
    assert case.accelerator is not None
    return registry.link(registry.accelerator(case.accelerator).host_link)


def _link_prediction(case: Case, registry: Registry, engine: Engine | None,
                     refitted: bool, inputs: list[Input]) -> Prediction:
    link = case_link(case, registry)
    entry = registry.entry("link", link.name)
    peak = link.peak_bandwidth
    ways = 2.0 if case.direction == "both" else 1.0
    inputs.append(Input("link", f"{link.name}, peak {format_quantity(peak, Kind.BANDWIDTH)} per "
                                f"direction", _where(entry.path)))
    if engine is None:
        overhead, share = link.latency, 1.0
        inputs += [Input("per-copy overhead", _time(overhead),
                         f"link {link.name} latency (kvroof's default)"),
                   Input("link share", "1", "kvroof's default link efficiency")]
    else:
        overhead = engine.copy_overhead
        share = float(engine_link_share(engine, peak))
        inputs += [Input("copy method", engine.copy_method, _engine_origin(engine, "copy_method",
                                                                          refitted)),
                   Input("per-copy overhead", _time(overhead),
                         _engine_origin(engine, "copy_overhead", refitted)),
                   Input("link share", f"{share:.4g}",
                         _engine_origin(engine, "copy_rate_cap" if share < engine.link_share
                                        else "link_share", refitted))]
    assert case.copy_size is not None
    size = case.copy_size * ways
    bandwidth = share * peak * ways
    seconds = float(copy_time(size, overhead, bandwidth, case.copies))
    parts = (Input("bandwidth of large copies", format_quantity(bandwidth, Kind.BANDWIDTH),
                   "link share x peak" + (" x 2 (both directions)" if ways == 2 else "")),
             Input("time", _time(seconds), f"{case.copies} x (overhead + bytes / bandwidth), "
                                           "kvroof.cost.copy_size.copy_time"))
    if case.quantity == "link_bandwidth":
        return Prediction(size * case.copies / seconds, "", tuple(inputs), parts)
    return Prediction(seconds, "", tuple(inputs), parts)


def _settings_inputs(dep: Deployment, refitted: bool) -> list[Input]:
    engine = dep.engine

    def origin(field: str, default: str) -> str:
        return default if engine is None else _engine_origin(engine, field, refitted)

    g = dep.granularity
    return [
        Input("copy granularity", f"{g.block_tokens or 'one block per request'} tokens, "
                                  f"{g.layout}", origin("block_tokens", "kvroof's default")),
        Input("per-copy overhead", _time(float(np.asarray(dep.transfer_latency))),
              origin("copy_overhead", f"link {dep.link.name} latency (kvroof's default)")),
        Input("link share", f"{float(np.asarray(dep.link_efficiency)):.4g}",
              origin("link_share", "kvroof's default link efficiency")),
        Input("write-back", "on" if dep.write_back else "off",
              origin("write_back", "kvroof's default")),
        Input("prefix reuse block", f"{dep.reuse_block_tokens} tokens"
              if (dep.reuse_block_tokens or 1) > 1 else "none (every cached token reused)",
              origin("reuse_block_tokens", "kvroof's default (every cached token reused)")),
        Input("request overhead", _time(float(np.asarray(dep.request_overhead))),
              origin("request_overhead", "kvroof's default")),
        Input("overlap", "layerwise" if engine is not None and engine.loading == "layerwise"
              else "serial", origin("loading", "kvroof's default (serial)")),
    ]


def _model_prediction(case: Case, registry: Registry, engine: Engine | None,
                      refitted: bool, inputs: list[Input], compute_model: str = "roofline",
                      ttft_clock: str = "kernel") -> Prediction:
    dep = deployment(case.model or "", system=case.system, accelerator=case.accelerator,
                     link=case.link, registry=registry, engine=engine, tp=case.tp,
                     compute_dtype=case.compute_dtype, kv_dtype=case.kv_dtype,
                     weight_dtype=case.weight_dtype, compute_model=compute_model,
                     ttft_clock=ttft_clock)
    inputs.append(Input("deployment", dep.label,
                        _where(registry.entry("model", dep.model.name).path)))
    inputs += _settings_inputs(dep, refitted)
    inputs.append(Input("compute model", compute_model, "kvroof validate --compute-model"))
    inputs.append(Input("TTFT clock", ttft_clock, "kvroof validate --ttft-clock"))
    t = float(case.new_tokens or 0.0)
    k = float(case.cached_tokens or 0.0)
    problem = fit_problem(dep, t + k)
    if problem:
        return Prediction(None, f"does not fit: {problem}", tuple(inputs))
    if case.quantity == "kappa_crit":
        value = float(kappa_crit(dep, t).kappa_crit)
        return Prediction(value, "", tuple(inputs))
    if case.quantity == "decode_step_time":
        return _decode_prediction(dep, k, inputs)
    result = ttft(dep, t, k)
    run_t, run_k = reused_tokens(dep, t, k)
    compute = compute_breakdown(dep, run_t, run_k)
    transfer = transfer_breakdown(dep, run_k, run_t)
    if isinstance(compute, KernelBreakdown):
        kinds = ", ".join(f"{kind} {_time(float(value))}"
                          for kind, value in compute.by_kind().items())
        models = ", ".join(f"{name} {_time(float(value))}"
                           for name, value in compute.by_model().items())
        compute_row = Input("compute", _time(float(compute.total)),
                            f"kernels, op by op: {kinds} (timed by {models})")
    else:
        compute_row = Input("compute", _time(float(compute.total)),
                            f"FLOPs {_time(float(compute.flop_time))}, HBM reads "
                            f"{_time(float(compute.hbm_time))}, all-reduce "
                            f"{_time(float(compute.comm_time))}")
    op_rows = tuple(
        Input(f"op {op.label}", _time(float(op.seconds)),
              f"{op.model}: {op.source}" + ("; " + "; ".join(op.notes) if op.notes else ""))
        for op in (compute.ops if isinstance(compute, KernelBreakdown) else ()))
    parts = (
        Input("tokens run", f"T = {run_t:g} computed, K = {run_k:g} loaded",
              "prefix reused in whole blocks (kvroof.cost.timing.reused_tokens)"),
        compute_row,
        *op_rows,
        Input("transfer", _time(float(transfer.total)),
              f"{format_quantity(float(transfer.bytes_per_rank), Kind.CAPACITY)} loaded per "
              f"rank, {float(transfer.copies):.4g} copies ({_time(float(transfer.latency_time))}"
              f" of per-copy overhead), data {_time(float(transfer.data_time))}"),
        Input("TTFT", _time(float(result.ttft)),
              f"{result.overlap} overlap + request overhead {_time(float(result.overhead))}"
              + (f" + serving overhead {_time(float(result.serving))} (client-side clock)"
                 if result.clock == "client" else " (kernel time)")),
    )
    return Prediction(float(result.ttft), "", tuple(inputs), parts)


def _decode_prediction(dep: Deployment, context: float, inputs: list[Input]) -> Prediction:
    """One decode step of a lone request on ``context`` tokens: the iteration's compute
    (:func:`kvroof.cost.iteration.iteration_cost`, roofline or op by op) plus, on the client
    clock, the engine profile's per-iteration CPU time."""
    step = iteration_cost(dep, decode_context=[context])
    _, _, per_iteration = serving_terms(dep)
    compute = step.compute
    origin = ("kernels, op by op: " + ", ".join(
        f"{kind} {_time(float(value))}" for kind, value in compute.by_kind().items())
        if isinstance(compute, KernelBreakdown) else
        f"FLOPs {_time(float(compute.flop_time))}, HBM reads {_time(float(compute.hbm_time))}, "
        f"all-reduce {_time(float(compute.comm_time))}")
    parts = (Input("compute", _time(step.time), origin),
             Input("decode step", _time(step.time + per_iteration),
                   f"one token on {context:g} tokens of context (kvroof.cost.iteration."
                   "iteration_cost)" + (f" + iteration overhead {_time(per_iteration)} "
                                        "(client-side clock)" if dep.ttft_clock == "client"
                                        else " (kernel time)")))
    return Prediction(step.time + per_iteration, "", tuple(inputs), parts)


def predict_case(case: Case, registry: Registry, *, engine_profiles: bool = True,
                 refit: CopyParams | None = None, origin: str = "case",
                 compute_model: str = "roofline", ttft_clock: str = "kernel") -> Prediction:
    """kvroof's prediction of ``case`` (SI units), with its inputs (module docstring).
    ``origin`` names where the case's own fields come from (its file and index);
    ``compute_model`` and ``ttft_clock`` are the deployment settings model-level cases use (a
    case that names its own ``ttft_clock``, the clock it was measured on, uses that one)."""
    inputs = _case_inputs(case, origin)
    ttft_clock = case.ttft_clock or ttft_clock
    engine = engine_for(case, registry, refit) if engine_profiles else None
    refitted = engine_profiles and refit is not None
    if not engine_profiles:
        inputs.append(Input("engine profile", "not used", "before engine profiles: kvroof's "
                                                          "defaults"))
    try:
        if case.quantity in LINK_QUANTITIES:
            return _link_prediction(case, registry, engine, refitted, inputs)
        return _model_prediction(case, registry, engine, refitted, inputs, compute_model,
                                 ttft_clock)
    except KvroofError as error:
        return Prediction(None, str(error), tuple(inputs))


def as_text(value: float, quantity: str) -> str:
    """A measured or predicted value with its unit, for tables."""
    kind = UNIT_KINDS[quantity]
    return f"{value:.4g}" if kind is None else format_quantity(value, kind)


def kernel_tables_overlap(case: Case, registry: Registry) -> str:
    """Whether a model-level case shares its GPU and engine with the kernel tables
    (:mod:`kvroof.kernels`): ``""`` for a link-level case, else one line saying which."""
    if case.quantity in LINK_QUANTITIES:
        return ""
    from kvroof.kernels import covered, provenance

    name = case.accelerator
    if name is None and case.system is not None:
        name = registry.system(case.system).accelerator
    accelerator = registry.accelerator(name or "")
    if not covered(accelerator):
        return (f"independent: no kernel tables for {accelerator.name}"
                + (" (same source as the tables, other GPU)"
                   if case.same_source_as_kernel_tables else ""))
    table = provenance(accelerator, "gemm")
    engine = f"{table.get('framework', '?')} {table.get('version', '?')}"
    family = registry.engine(case.engine).name.split("-")[0]
    same_engine = str(table.get("framework", "")).lower().startswith(family[:4].lower())
    head = (f"NOT independent: same source as the kernel tables "
            f"({str(table.get('repository', '?')).removeprefix('https://github.com/')}), "
            if case.same_source_as_kernel_tables else "")
    return (f"{head}same GPU ({accelerator.name}) {'and engine' if same_engine else 'only'}: "
            f"tables from {engine}, the case ran {case.engine} {case.engine_version}".rstrip())
