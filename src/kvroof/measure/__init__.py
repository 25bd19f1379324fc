"""Measure a real machine: link bandwidth, GEMM throughput and prefill with offloaded KV.

Needs torch (``pip install 'kvroof[measure]'``), imported only when a benchmark runs: this
package itself, the fits and the results reader work without it.

Python use (what ``kvroof measure link --quick --device cpu -o out`` does)::

    from kvroof import get_model
    from kvroof.measure import LinkSettings, machine_info, run_link, write_results

    result = run_link(get_model("llama-3.1-8b"), "cpu", LinkSettings.default("cpu", quick=True))
    write_results("out", result, machine_info("cpu"))  # out/link.csv and out/link.json

Modules: ``device`` (device choice, machine description, timer), ``link``, ``compute``,
``prefill`` (the benchmarks), ``layer`` (the prefill benchmark's synthetic layer shapes),
``stack`` (its torch decoder stack and attention variants), ``kappa`` (the measured
kappa_crit), ``rows`` (the typed result rows), ``results`` (CSV + JSON writer and reader),
``progress``.
"""

from __future__ import annotations

from kvroof.measure.compute import ComputeSettings, ffn_width, gemm_shape, run_compute
from kvroof.measure.device import (
    TORCH_MISSING,
    Timer,
    Timing,
    machine_info,
    pick_device,
    require_torch,
)
from kvroof.measure.kappa import KappaCrit, measured_kappa_crit
from kvroof.measure.layer import LayerShape, layer_shape
from kvroof.measure.link import LinkFit, LinkSettings, fit_latency_bandwidth, run_link
from kvroof.measure.prefill import PrefillSettings, choose_layers, run_prefill
from kvroof.measure.results import (
    Results,
    ResultsError,
    read_results,
    read_results_dir,
    write_results,
)
from kvroof.measure.rows import BENCHMARKS, ComputeRow, LinkRow, Measurement, PrefillRow

__all__ = [
    "BENCHMARKS",
    "TORCH_MISSING",
    "ComputeRow",
    "ComputeSettings",
    "KappaCrit",
    "LayerShape",
    "LinkFit",
    "LinkRow",
    "LinkSettings",
    "Measurement",
    "PrefillRow",
    "PrefillSettings",
    "Results",
    "ResultsError",
    "Timer",
    "Timing",
    "choose_layers",
    "ffn_width",
    "fit_latency_bandwidth",
    "gemm_shape",
    "layer_shape",
    "machine_info",
    "measured_kappa_crit",
    "pick_device",
    "read_results",
    "read_results_dir",
    "require_torch",
    "run_compute",
    "run_link",
    "run_prefill",
    "write_results",
]
