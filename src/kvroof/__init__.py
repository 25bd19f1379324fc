"""kvroof: is prefill with offloaded KV cache limited by GPU compute or by the host link?

The public API is re-exported here lazily, so ``import kvroof`` stays fast; the submodules
(``kvroof.specs``, ``kvroof.cost``, ``kvroof.units``) load on first use.

>>> import kvroof
>>> model = kvroof.get_model("Qwen/Qwen3-235B-A22B")
>>> kvroof.kv_bytes_per_token(model)
192512.0
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from kvroof._version import __version__

_EXPORTS: dict[str, str] = {
    "Accelerator": "kvroof.specs.hardware",
    "Link": "kvroof.specs.hardware",
    "System": "kvroof.specs.hardware",
    "HostMemory": "kvroof.specs.hardware",
    "Tier": "kvroof.specs.hardware",
    "ModelSpec": "kvroof.specs.model",
    "Engine": "kvroof.specs.engine",
    "Registry": "kvroof.specs.registry",
    "SpecWarning": "kvroof.specs.registry",
    "default_registry": "kvroof.specs.registry",
    "load_spec_file": "kvroof.specs.loader",
    "model_from_hf_config": "kvroof.specs.hf",
    "get_model": "kvroof.lookup",
    "get_accelerator": "kvroof.lookup",
    "get_link": "kvroof.lookup",
    "get_system": "kvroof.lookup",
    "get_engine": "kvroof.lookup",
    "KvroofError": "kvroof.errors",
    "explore": "kvroof.explore",
    "SpecError": "kvroof.errors",
    "UnknownNameError": "kvroof.errors",
    "UnitError": "kvroof.units",
    "parse_quantity": "kvroof.units",
    "ParamCounts": "kvroof.cost.params",
    "param_counts": "kvroof.cost.params",
    "kv_bytes": "kvroof.cost.kv",
    "kv_bytes_per_token": "kvroof.cost.kv",
    "kv_bytes_per_token_per_layer": "kvroof.cost.kv",
    "Deployment": "kvroof.cost.deployment",
    "Granularity": "kvroof.cost.deployment",
    "deployment": "kvroof.cost.deployment",
    "PrefillFlops": "kvroof.cost.flops",
    "prefill_flops": "kvroof.cost.flops",
    "decode_flops": "kvroof.cost.flops",
    "attention_pairs": "kvroof.cost.flops",
    "KappaResult": "kvroof.cost.kappa",
    "PaperKappa": "kvroof.cost.kappa",
    "SolveResult": "kvroof.cost.kappa",
    "kappa_crit": "kvroof.cost.kappa",
    "kappa_paper": "kvroof.cost.kappa",
    "kappa_paper_for": "kvroof.cost.kappa",
    "max_new_tokens_for_crossover": "kvroof.cost.kappa",
    "required_bandwidth": "kvroof.cost.kappa",
    "transfer_bound_compute": "kvroof.cost.kappa",
    "TTFTResult": "kvroof.cost.timing",
    "ttft": "kvroof.cost.timing",
    "ttft_batch": "kvroof.cost.timing",
    "compute_time": "kvroof.cost.timing",
    "compute_breakdown": "kvroof.cost.timing",
    "ComputeBreakdown": "kvroof.cost.timing",
    "allreduce_time": "kvroof.cost.timing",
    "IterationCost": "kvroof.cost.iteration",
    "IterationModel": "kvroof.cost.iteration",
    "iteration_cost": "kvroof.cost.iteration",
    "MemoryFit": "kvroof.cost.memory_fit",
    "memory_fit": "kvroof.cost.memory_fit",
    "check_fit": "kvroof.cost.memory_fit",
    "fit_problem": "kvroof.cost.memory_fit",
    "WeightBytes": "kvroof.cost.weights",
    "weight_bytes_per_rank": "kvroof.cost.weights",
    "weights_read_per_rank": "kvroof.cost.weights",
    "touched_expert_share": "kvroof.cost.weights",
    "RegimeCurves": "kvroof.analysis.regimes",
    "regime_curves": "kvroof.analysis.regimes",
    "transfer_time": "kvroof.cost.transfer",
    "transfer_breakdown": "kvroof.cost.transfer",
    "kv_bytes_per_rank": "kvroof.cost.transfer",
    "plan": "kvroof.plan",
}

__all__ = [
    "Accelerator",
    "ComputeBreakdown",
    "Deployment",
    "Engine",
    "Granularity",
    "HostMemory",
    "IterationCost",
    "IterationModel",
    "KappaResult",
    "KvroofError",
    "Link",
    "MemoryFit",
    "ModelSpec",
    "PaperKappa",
    "ParamCounts",
    "PrefillFlops",
    "RegimeCurves",
    "Registry",
    "SolveResult",
    "SpecError",
    "SpecWarning",
    "System",
    "TTFTResult",
    "Tier",
    "UnitError",
    "UnknownNameError",
    "WeightBytes",
    "__version__",
    "allreduce_time",
    "attention_pairs",
    "check_fit",
    "compute_breakdown",
    "compute_time",
    "decode_flops",
    "default_registry",
    "deployment",
    "explore",
    "fit_problem",
    "get_accelerator",
    "get_engine",
    "get_link",
    "get_model",
    "get_system",
    "iteration_cost",
    "kappa_crit",
    "kappa_paper",
    "kappa_paper_for",
    "kv_bytes",
    "kv_bytes_per_rank",
    "kv_bytes_per_token",
    "kv_bytes_per_token_per_layer",
    "load_spec_file",
    "max_new_tokens_for_crossover",
    "memory_fit",
    "model_from_hf_config",
    "param_counts",
    "parse_quantity",
    "plan",
    "prefill_flops",
    "regime_curves",
    "required_bandwidth",
    "show_specs_in_ipython",
    "touched_expert_share",
    "transfer_bound_compute",
    "transfer_breakdown",
    "transfer_time",
    "ttft",
    "ttft_batch",
    "weight_bytes_per_rank",
    "weights_read_per_rank",
]

if TYPE_CHECKING:
    from kvroof.analysis.regimes import RegimeCurves, regime_curves
    from kvroof.cost.deployment import Deployment, Granularity, deployment
    from kvroof.cost.flops import PrefillFlops, attention_pairs, decode_flops, prefill_flops
    from kvroof.cost.iteration import IterationCost, IterationModel, iteration_cost
    from kvroof.cost.kappa import (
        KappaResult,
        PaperKappa,
        SolveResult,
        kappa_crit,
        kappa_paper,
        kappa_paper_for,
        max_new_tokens_for_crossover,
        required_bandwidth,
        transfer_bound_compute,
    )
    from kvroof.cost.kv import kv_bytes, kv_bytes_per_token, kv_bytes_per_token_per_layer
    from kvroof.cost.memory_fit import MemoryFit, check_fit, fit_problem, memory_fit
    from kvroof.cost.params import ParamCounts, param_counts
    from kvroof.cost.timing import (
        ComputeBreakdown,
        TTFTResult,
        allreduce_time,
        compute_breakdown,
        compute_time,
        ttft,
        ttft_batch,
    )
    from kvroof.cost.transfer import kv_bytes_per_rank, transfer_breakdown, transfer_time
    from kvroof.cost.weights import (
        WeightBytes,
        touched_expert_share,
        weight_bytes_per_rank,
        weights_read_per_rank,
    )
    from kvroof.errors import KvroofError, SpecError, UnknownNameError
    from kvroof.explore import explore
    from kvroof.lookup import get_accelerator, get_engine, get_link, get_model, get_system
    from kvroof.plan.run import plan
    from kvroof.specs.engine import Engine
    from kvroof.specs.hardware import Accelerator, HostMemory, Link, System, Tier
    from kvroof.specs.hf import model_from_hf_config
    from kvroof.specs.loader import load_spec_file
    from kvroof.specs.model import ModelSpec
    from kvroof.specs.registry import Registry, SpecWarning, default_registry
    from kvroof.units import UnitError, parse_quantity


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kvroof' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def _spec_html(spec: Any) -> str:
    from kvroof.describe import spec_html

    return spec_html(spec)


def show_specs_in_ipython(shell: Any = None) -> bool:
    """Have IPython (Jupyter) show a spec as :func:`kvroof.describe.spec_html` draws it: its
    fields, the figures derived from it (parameters, KV bytes per token) and its sources.

    Specs are data below the cost model, so their own ``_repr_html_`` shows fields and sources
    only; the derived figures are attached here, from the top of the package. ``import kvroof``
    calls this when IPython is running (the formatter is registered by class name, so nothing
    is imported until a spec is shown). Returns whether a formatter was registered."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "text/html" not in formatters:
        return False
    formatters["text/html"].for_type_by_name("kvroof.specs.base", "SourcedSpec", _spec_html)
    return True


show_specs_in_ipython()
