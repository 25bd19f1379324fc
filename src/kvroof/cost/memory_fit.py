"""Whether a deployment can run at all: the weights one TP rank stores, plus a minimum KV
reserve, against what the engine may use of the GPU's memory.

``needed = weight bytes per rank + KV bytes per rank of kv_reserve_tokens tokens``;
``usable = HBM capacity x memory_utilization`` (vLLM's ``gpu_memory_utilization``, 0.9 by
default). Activations and the CUDA context come out of the ``1 - memory_utilization`` margin.

The command line refuses a deployment that does not fit, naming the bytes and what would fit;
the report and the figures mark such rows "does not fit" instead of printing numbers. The
Python functions of the cost model compute regardless (a what-if may be about hardware that
does not exist), and :func:`kvroof.cost.kappa.kappa_crit` and :func:`kvroof.cost.timing.ttft`
say so with a :class:`DoesNotFitWarning` (:mod:`kvroof.cost.caller_warnings`); call
:func:`check_fit` to refuse.
"""

from __future__ import annotations

import dataclasses
import warnings
import weakref
from dataclasses import dataclass

from kvroof.cost.checks import dtype_bytes, token_value
from kvroof.cost.deployment_settings import DeploymentSettings
from kvroof.cost.deployment_terms import kv_terms
from kvroof.cost.groups import tp_problem
from kvroof.cost.kv_terms import peak
from kvroof.errors import KvroofError
from kvroof.units import Kind, format_quantity

__all__ = ["DoesNotFitWarning", "MemoryFit", "check_fit", "fit_problem", "fit_warning",
           "memory_fit", "valid_tp_degrees"]

_SMALLER_DTYPES = ("fp8", "mxfp4", "int4")


class DoesNotFitWarning(UserWarning):
    """A cost function computed a deployment whose weights and KV reserve do not fit in the
    usable HBM (it computes regardless; the command line refuses)."""


@dataclass(frozen=True)
class MemoryFit:
    """Bytes per GPU: weights, the KV reserve, what is needed and what is usable."""

    weights: float
    kv_reserve: float
    usable: float
    weight_dtype: str

    @property
    def needed(self) -> float:
        return self.weights + self.kv_reserve

    @property
    def fits(self) -> bool:
        return self.needed <= self.usable


def valid_tp_degrees(dep: DeploymentSettings, limit: int = 64) -> list[int]:
    """TP degrees the model's heads allow (dividing the attention heads; dividing or a multiple
    of the KV heads), up to the system's GPUs (or ``limit`` without a system)."""
    top = dep.system.num_accelerators if dep.system is not None else limit
    return [tp for tp in range(1, top + 1) if not tp_problem(dep.model, tp)]


def memory_fit(dep: DeploymentSettings, kv_tokens: float | None = None) -> MemoryFit:
    """Weights per rank plus the KV of ``kv_tokens`` tokens (default: the deployment's
    ``kv_reserve_tokens``) against the usable HBM."""
    tokens = dep.kv_reserve_tokens if kv_tokens is None else max(kv_tokens,
                                                                  dep.kv_reserve_tokens)
    # the most KV bytes one rank holds over the sequence (as
    # kvroof.cost.transfer.kv_peak_bytes_per_rank, from the KV terms alone)
    # Deployment.terms holds the same KV terms once a cost function has computed them
    terms = vars(dep).get("terms")
    hold = terms.hold if terms is not None else kv_terms(dep)["hold"]
    kv_peak = peak(hold, token_value("tokens", tokens))
    return MemoryFit(
        weights=dep.weight_bytes.total,
        kv_reserve=float(kv_peak),
        usable=dep.accelerator.hbm_capacity * dep.memory_utilization,
        weight_dtype=dep.weight_dtype or dep.model.weights.dtype,
    )


def _alternatives(dep: DeploymentSettings, kv_tokens: float | None) -> str:
    """What would fit: a larger TP on this hardware, or a smaller weight dtype."""
    ideas = []
    for tp in valid_tp_degrees(dep):
        if tp > dep.tp:
            try:
                wider = dataclasses.replace(dep, tp=tp, gpus_loading=None)
            except KvroofError:
                continue
            if memory_fit(wider, kv_tokens).fits:
                ideas.append(f"TP {tp}")
                break
    current = dtype_bytes(dep.weight_dtype or dep.model.weights.dtype)
    for dtype in _SMALLER_DTYPES:
        if dtype_bytes(dtype) < current:
            smaller = dataclasses.replace(dep, weight_dtype=dtype)
            if memory_fit(smaller, kv_tokens).fits:
                ideas.append(f"{dtype} weights at TP {dep.tp}")
                break
    if not ideas:
        where = f"the {dep.system.num_accelerators} GPUs of {dep.system.name}" if dep.system \
            else "any TP up to 64"
        return f"nothing fits on {where} with these dtypes"
    return "it fits with " + " or ".join(ideas)


def _misfit(dep: DeploymentSettings, fit: MemoryFit, kv_tokens: float | None) -> str:
    """The sentence of a deployment that does not fit: the bytes and what would fit."""
    def size(value: float) -> str:
        return format_quantity(value, Kind.CAPACITY)

    return (
        f"{dep.model.name} does not fit on {dep.accelerator.name} at TP {dep.tp}: needs "
        f"{size(fit.weights)} of {fit.weight_dtype} weights + {size(fit.kv_reserve)} of KV per "
        f"GPU, {size(fit.usable)} usable ({size(dep.accelerator.hbm_capacity)} x "
        f"{dep.memory_utilization:g}); {_alternatives(dep, kv_tokens)}"
    )


def check_fit(dep: DeploymentSettings, kv_tokens: float | None = None) -> MemoryFit:
    """The fit, or a one-line :class:`KvroofError` naming the bytes and what would fit."""
    fit = memory_fit(dep, kv_tokens)
    if fit.fits:
        return fit
    raise KvroofError(_misfit(dep, fit, kv_tokens))


def fit_warning(dep: DeploymentSettings, what: str, kv_tokens: float | None = None,
                stacklevel: int = 2) -> bool:
    """Issue a :class:`DoesNotFitWarning` (``check_fit``'s sentence, then "``what`` computes
    it regardless") when ``dep`` does not fit; whether it did. ``stacklevel`` as
    :func:`warnings.warn`'s, counted from the caller of this function."""
    fit = memory_fit(dep, kv_tokens)
    if fit.fits:
        return False
    key = (id(dep), kv_tokens)
    known = _SAID.get(key)
    if known is not None and known[0]() is dep:
        text = known[1]
    else:  # what would fit takes a deployment per TP degree: once per deployment and size
        text = _misfit(dep, fit, kv_tokens)
        if len(_SAID) >= 256:
            _SAID.clear()
        _SAID[key] = (weakref.ref(dep), text)
    warnings.warn(f"{text} ({what} computes it regardless)", DoesNotFitWarning,
                  stacklevel=stacklevel + 1)
    return True


_SAID: dict[tuple[int, float | None], tuple[weakref.ref[DeploymentSettings], str]] = {}
"""The sentences :func:`fit_warning` wrote, by deployment (its id, checked by a weak
reference) and KV tokens."""


def fit_problem(dep: DeploymentSettings, kv_tokens: float | None = None) -> str:
    """"" when the deployment fits; else a short "does not fit (...)" note for tables and
    figure captions."""
    fit = memory_fit(dep, kv_tokens)
    if fit.fits:
        return ""
    needed = format_quantity(fit.needed, Kind.CAPACITY)
    usable = format_quantity(fit.usable, Kind.CAPACITY)
    return f"does not fit ({needed} of {fit.weight_dtype} weights + KV per GPU, {usable} usable)"
