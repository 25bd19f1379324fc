"""Figures (matplotlib is imported only inside this package). Each function takes specs or
deployments and options and returns a :class:`matplotlib.figure.Figure`; nothing here computes
a number that the cost model does not already provide.

The names below are imported on first use: importing one figure module loads only what that
figure needs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvroof.plot.breakdown import ttft_breakdown_figure
    from kvroof.plot.ceilings import ceilings_figure
    from kvroof.plot.families import families_figure
    from kvroof.plot.kappa_t import kappa_vs_t_figure
    from kvroof.plot.overhead import overhead_figure
    from kvroof.plot.roofline import offload_roofline_figure
    from kvroof.plot.style import save_figure
    from kvroof.plot.validation import validation_figure
    from kvroof.plot.what_if import what_if_figure
    from kvroof.plot.workload import workload_figure

__all__ = [
    "ceilings_figure",
    "families_figure",
    "kappa_vs_t_figure",
    "offload_roofline_figure",
    "overhead_figure",
    "save_figure",
    "ttft_breakdown_figure",
    "validation_figure",
    "what_if_figure",
    "workload_figure",
]

_HOMES = {
    "ceilings_figure": "ceilings",
    "families_figure": "families",
    "kappa_vs_t_figure": "kappa_t",
    "offload_roofline_figure": "roofline",
    "overhead_figure": "overhead",
    "save_figure": "style",
    "ttft_breakdown_figure": "breakdown",
    "validation_figure": "validation",
    "what_if_figure": "what_if",
    "workload_figure": "workload",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f"kvroof.plot.{home}"), name)
        globals()[name] = value
        return value
    try:  # a submodule: kvroof.plot.roofline after ``from kvroof import plot``
        return importlib.import_module(f"kvroof.plot.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"kvroof.plot.{name}":
            raise
        raise AttributeError(f"module 'kvroof.plot' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
