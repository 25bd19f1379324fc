"""The one colour palette of kvroof's figures (colour-blind safe), and what each colour means,
the same in every figure:

- bluish green (:data:`COMPUTE_SHADE`) means compute-bound and vermillion
  (:data:`TRANSFER_SHADE`) transfer-bound; nothing else is drawn in them;
- each accelerator has one colour (:func:`accelerator_color`) and each model one colour
  (:func:`model_color`), from :data:`SERIES`; a figure that tells deployments apart colours
  them by the model where the models differ, else by the accelerator (:func:`deployment_colors`);
- reference lines (links, budgets, medians) are grey or black.

Plain data and functions: no matplotlib here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["ACCELERATOR_COLORS", "COMPUTE_SHADE", "MODEL_COLORS", "OKABE_ITO", "PALETTE", "SERIES",
           "TRANSFER_SHADE", "accelerator_color", "color", "deployment_colors", "model_color"]

OKABE_ITO: dict[str, str] = {
    "blue": "#0072B2", "orange": "#E69F00", "bluish green": "#009E73",
    "vermillion": "#D55E00", "reddish purple": "#CC79A7", "sky blue": "#56B4E9",
    "yellow": "#F0E442", "black": "#000000",
}
"""Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision
deficiency."""

COMPUTE_SHADE = OKABE_ITO["bluish green"]
"""Compute-bound, and nothing else."""
TRANSFER_SHADE = OKABE_ITO["vermillion"]
"""Transfer-bound, and nothing else."""

SERIES: tuple[str, ...] = (
    OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["reddish purple"], OKABE_ITO["sky blue"],
    OKABE_ITO["black"], "#882255", "#999933", "#332288",
)
"""Colours for series (models, accelerators, workloads, policies): Okabe-Ito without the two
regime colours and without yellow (too faint on white), then Paul Tol's wine, olive and indigo
(his colour-blind-safe "muted" scheme)."""
PALETTE = SERIES  # the name earlier versions exported

ACCELERATOR_COLORS: dict[str, str] = {
    "a100": SERIES[0], "h100": SERIES[1], "b200": SERIES[2], "h200": SERIES[3],
    "gh200": SERIES[5], "gb200": SERIES[7], "b300": SERIES[4], "mi300x": SERIES[6],
    "mi325x": SERIES[6], "mi355x": SERIES[6], "gb300": SERIES[7], "h20": SERIES[3],
    "l40s": SERIES[4], "gaudi3": SERIES[5], "t4": SERIES[4], "rtx-4090": SERIES[5],
    "rtx-pro-6000-server": SERIES[5],
}
"""One colour per accelerator (its variants, such as ``h100-sxm`` and ``h100-pcie``, share
it). The six the report compares (A100, H100, B200, H200, GH200, GB200) differ from each
other."""

MODEL_COLORS: dict[str, str] = {
    "qwen3-235b-a22b": SERIES[0], "deepseek-v3": SERIES[1], "llama-3.1-70b": SERIES[2],
    "gemma-3-27b": SERIES[3], "qwen3-next-80b-a3b": SERIES[4],
    "llama-4-scout-17b-16e": SERIES[5], "deepseek-v3.2": SERIES[6], "gemma-4-e2b": SERIES[7],
    "llama-3.1-405b": SERIES[7], "qwen3-30b-a3b": SERIES[6], "llama-3.1-8b": SERIES[5],
    "qwen3-8b": SERIES[3], "qwen3-32b": SERIES[4],
}
"""One colour per model. The seed paper's five models differ from each other, and so do the
seven that stand for the attention families; other models get a colour from their name."""


def _named_color(name: str, table: dict[str, str]) -> str:
    key = name.lower()
    if key in table:
        return table[key]
    # a variant of a listed name ("h100-sxm", "a100-sxm-40gb"): the longest listed prefix
    prefixes = [k for k in table if key.startswith(k + "-")]
    if prefixes:
        return table[max(prefixes, key=len)]
    import zlib

    return SERIES[zlib.crc32(key.encode()) % len(SERIES)]


def accelerator_color(name: str) -> str:
    """The accelerator's colour in every figure (registry name, e.g. ``h100-sxm``)."""
    return _named_color(name, ACCELERATOR_COLORS)


def model_color(name: str) -> str:
    """The model's colour in every figure (registry name, e.g. ``qwen3-235b-a22b``)."""
    return _named_color(name, MODEL_COLORS)


def deployment_colors(deployments: Sequence[Any]) -> list[str]:
    """A colour for each deployment: its model's where the models differ, else its
    accelerator's where those differ, else the series colours in order (the deployments then
    differ in something else, such as TP, that the legend names)."""
    models = [d.model.name for d in deployments]
    if len(set(models)) == len(models):
        return [model_color(m) for m in models]
    accelerators = [d.accelerator.name for d in deployments]
    if len(set(accelerators)) == len(accelerators):
        return [accelerator_color(a) for a in accelerators]
    return [color(i) for i in range(len(deployments))]


def color(index: int) -> str:
    """The palette colour at ``index`` (cycling)."""
    return PALETTE[index % len(PALETTE)]
