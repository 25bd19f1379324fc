"""Figures (matplotlib is imported only inside this package). Each function takes specs or
deployments and options and returns a :class:`matplotlib.figure.Figure`; nothing here computes
a number that the cost model does not already provide."""

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
