"""The seed paper's printed numbers, the inputs that reproduce them, and the comparison.

Meng, Lee, Wang, "Understanding Bottlenecks for Efficiently Serving LLM Inference With KV
Offloading", arXiv 2601.19910 (arxiv.org/abs/2601.19910; the tables' section numbers were not
verified).

What the printed tables imply (worked out here, checked by the tests):

- kappa_M = 2 N_active / B_kv with N_active = 70B, 405B, 3.3B, 22B, 37B and B_kv in bf16.
  Four of five printed values agree to one unit in the last digit (0.42 for Llama-3.1-70B is
  0.427 truncated; 1.06 for DeepSeek-V3 is 2 x 37e9 / 70,000 B, i.e. "70 KB" taken as 70,000 B).
  Llama-3.1-405B is printed as 1.42, but 2 x 405e9 / 516,096 B = 1.57, the value the paper's own
  worked example uses; 1.42 would need B_kv of about 570 kB or N of about 366B.
- kappa_HW = BW / C with C = 624 (A100), 2000 (H100), 5000 (B200) TFLOP/s (2:4-sparse BF16 or
  dense FP8 marketing peaks, about 2x the dense BF16 peaks). With the stated 32 / 64 GB/s per
  direction the products are 4.9% below the printed values; the printed values match
  BW = 32 / 64 x 1.048576 GB/s (GB read as 1000 x 2^20 B) to one unit in the last printed digit,
  except B200 + PCIe5 (13.4 vs 13.5 printed).
- H100 kappa_HW is printed as 34 (PCIe5) in the table but 32 = 64e9 / 2000e12 follows from the
  stated inputs; kappa_crit 14.3 and 7.8 are the products of the rounded printed factors
  (0.42 x 34 and 0.23 x 34); with the unrounded 0.427 and 0.229 and kappa_HW 33.6 they are 14.3
  and 7.7, with kappa_HW 32 they are 13.7 and 7.3.
- At the measured 15 GB/s the paper's ~3.3 and ~1.8 are 14.3 x 15/64 and 7.8 x 15/64; the
  formula gives 3.2 and 1.7 (C = 2000 TFLOP/s). It measured 2 and 1.

Paper mode from the paper's own C and BW for a model on one of its GPUs and links
(:func:`paper_kappa_inputs`; the report's paper-mode grid and the paper-mode offload roofline
both call it) and the kappa_crit the paper prints for it (:func:`printed_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

from kvroof.cost.deployment import Deployment
from kvroof.cost.kv import kv_bytes_per_token
from kvroof.cost.paper_kappa import PaperKappa, kappa_paper
from kvroof.cost.params import param_counts
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry

__all__ = [
    "BINARY_MEGA",
    "MEASURED",
    "PAPER_ACCELERATORS",
    "PAPER_COMPUTE",
    "PAPER_KAPPA_CRIT",
    "PAPER_KAPPA_HW",
    "PAPER_KAPPA_M",
    "PAPER_LINKS",
    "PAPER_LINK_BANDWIDTH",
    "PAPER_MODELS",
    "PAPER_WHAT_IFS",
    "PaperRow",
    "Printed",
    "kappa_hw_table",
    "kappa_m_table",
    "paper_input_kappa",
    "paper_inputs",
    "paper_kappa_at",
    "paper_kappa_inputs",
    "paper_platform",
    "printed_for",
    "printed_kappa_crit",
]

BINARY_MEGA: Final = 1.048576
"""2^20 / 10^6: the factor by which the printed kappa_HW exceed the stated 32 / 64 GB/s."""


@dataclass(frozen=True)
class PaperModel:
    """A model as the paper uses it: registry name, active parameters, printed B_kv."""

    name: str
    active_params: float
    printed_kv_kb: float


PAPER_MODELS: Final = (
    PaperModel("llama-3.1-70b", 70e9, 328),
    PaperModel("llama-3.1-405b", 405e9, 516),
    PaperModel("qwen3-30b-a3b", 3.3e9, 98),
    PaperModel("qwen3-235b-a22b", 22e9, 192),
    PaperModel("deepseek-v3", 37e9, 70),
)

class Printed(NamedTuple):
    """A value as printed, and one unit of its last printed digit."""

    value: float
    last_digit: float


PAPER_KAPPA_M: Final[dict[str, Printed]] = {
    "llama-3.1-70b": Printed(0.42e6, 0.01e6),
    "llama-3.1-405b": Printed(1.42e6, 0.01e6),
    "qwen3-30b-a3b": Printed(0.07e6, 0.01e6),
    "qwen3-235b-a22b": Printed(0.23e6, 0.01e6),
    "deepseek-v3": Printed(1.06e6, 0.01e6),
}
"""Printed kappa_M (FLOP per byte)."""

PAPER_COMPUTE: Final[dict[str, float]] = {"a100": 624e12, "h100": 2000e12, "b200": 5000e12}
"""C the paper's kappa_HW imply (FLOP/s): sparse-BF16 / dense-FP8 class peaks."""

PAPER_LINK_BANDWIDTH: Final[dict[str, float]] = {"pcie4": 32e9, "pcie5": 64e9}
"""Per-direction PCIe bandwidth the paper states (bytes/s)."""

PAPER_ACCELERATORS: Final[dict[str, str]] = {"a100-sxm": "a100", "h100-sxm": "h100",
                                             "b200": "b200"}
"""The paper's GPUs by registry accelerator name (keys of :data:`PAPER_COMPUTE`)."""

PAPER_LINKS: Final[dict[str, str]] = {"pcie-gen4-x16": "pcie4", "pcie-gen5-x16": "pcie5"}
"""The paper's links by registry link name (keys of :data:`PAPER_LINK_BANDWIDTH`)."""

PAPER_KAPPA_HW: Final[dict[tuple[str, str], Printed]] = {
    ("a100", "pcie4"): Printed(53.8e-6, 0.1e-6),
    ("a100", "pcie5"): Printed(107.5e-6, 0.1e-6),
    ("h100", "pcie4"): Printed(17e-6, 1e-6),
    ("h100", "pcie5"): Printed(34e-6, 1e-6),
    ("b200", "pcie4"): Printed(6.7e-6, 0.1e-6),
    ("b200", "pcie5"): Printed(13.5e-6, 0.1e-6),
}
"""Printed kappa_HW (bytes per FLOP)."""

PAPER_KAPPA_CRIT: Final[dict[tuple[str, str], float]] = {
    ("llama-3.1-70b", "h100-pcie5"): 14.3,
    ("qwen3-235b-a22b", "h100-pcie5"): 7.8,
    ("llama-3.1-70b", "h100-15GB/s"): 3.3,
    ("qwen3-235b-a22b", "h100-15GB/s"): 1.8,
    ("llama-3.1-405b", "h100-pcie5"): 50.0,
    ("llama-3.1-405b", "h100-15GB/s"): 12.0,
}
"""Predicted kappa_crit as printed (the 15 GB/s and 405B ones are approximate, "~")."""

MEASURED: Final[dict[str, float]] = {"llama-3.1-70b": 2.0, "qwen3-235b-a22b": 1.0}
"""kappa_crit measured on 8x H100 SXM5 (vLLM 0.10.1 + LMCache 0.3.5) at 15 GB/s sustained."""
MEASURED_BANDWIDTH: Final = 15e9

PAPER_WHAT_IFS: Final[dict[tuple[str, str], float]] = {
    ("qwen3-235b-a22b", "nvlink-c2c"): 41.5,
    ("deepseek-v3", "nvlink-c2c"): 191.0,
    ("qwen3-235b-a22b", "unified-hbm"): 370.0,
    ("deepseek-v3", "unified-hbm"): 1700.0,
}
"""Printed hardware what-ifs; they imply C = 5000 TFLOP/s, 900 GB/s for NVLink-C2C (its
bidirectional figure; it is 450 GB/s per direction) and 8 TB/s for on-package HBM."""
WHAT_IF_COMPUTE: Final = 5000e12
WHAT_IF_BANDWIDTH: Final[dict[str, float]] = {"nvlink-c2c": 900e9, "unified-hbm": 8e12}


@dataclass(frozen=True)
class PaperRow:
    """One printed value next to the value recomputed from stated inputs."""

    key: str
    printed: float
    last_digit: float
    computed: float
    inputs: str

    @property
    def within_printing_precision(self) -> bool:
        """Whether the computed value is within one unit of the last printed digit."""
        return abs(self.computed - self.printed) <= self.last_digit * (1 + 1e-9)

    @property
    def relative_difference(self) -> float:
        return float((self.computed - self.printed) / self.printed)


def kappa_m_table(kv_bytes_per_token: dict[str, float]) -> list[PaperRow]:
    """kappa_M recomputed from the paper's N_active and the exact bf16 B_kv (bytes/token)."""
    rows = []
    for model in PAPER_MODELS:
        b_kv = kv_bytes_per_token[model.name]
        result = kappa_paper(model.active_params, b_kv, 1.0, 1.0)
        printed = PAPER_KAPPA_M[model.name]
        rows.append(PaperRow(model.name, printed.value, printed.last_digit,
                             float(result.kappa_model),
                             f"2 x {model.active_params / 1e9:g}B / {b_kv:,.0f} B"))
    return rows


def kappa_hw_table(bandwidth_scale: float = 1.0) -> list[PaperRow]:
    """kappa_HW from the paper's C and BW (BW x ``bandwidth_scale``; 1.048576 reproduces the
    printed table)."""
    rows = []
    for (gpu, link), printed in PAPER_KAPPA_HW.items():
        bandwidth = PAPER_LINK_BANDWIDTH[link] * bandwidth_scale
        compute = PAPER_COMPUTE[gpu]
        value = float(kappa_paper(1.0, 1.0, bandwidth, compute).kappa_hw)
        rows.append(PaperRow(f"{gpu}+{link}", printed.value, printed.last_digit, value,
                             f"{bandwidth / 1e9:.4g} GB/s / {compute / 1e12:g} TFLOP/s"))
    return rows


def paper_platform(accelerator: str, link: str) -> tuple[str, str] | None:
    """The paper's names (``("h100", "pcie5")``) of a registry accelerator and link, or None
    when the paper does not cover both."""
    gpu = PAPER_ACCELERATORS.get(accelerator)
    generation = PAPER_LINKS.get(link)
    if gpu is None or generation is None:
        return None
    return gpu, generation


def paper_kappa_at(model: ModelSpec, compute: float, bandwidth: float,
                   kv_dtype: str = "bf16") -> PaperKappa:
    """Paper mode for ``model`` at a compute C (FLOP/s) and link bandwidth BW (bytes/s):
    N_active as published (computed when the model publishes none, as
    :func:`kvroof.cost.kappa.kappa_paper_for` does) and B_kv in ``kv_dtype``."""
    active = model.published.active if model.published else param_counts(model).active
    return kappa_paper(active, kv_bytes_per_token(model, kv_dtype), bandwidth, compute)


def paper_kappa_inputs(model: ModelSpec, accelerator: str, link: str,
                       kv_dtype: str = "bf16") -> PaperKappa | None:
    """Paper mode from the paper's own inputs for ``model`` on a registry ``accelerator`` and
    ``link`` of the paper's: its C (:data:`PAPER_COMPUTE`) and BW
    (:data:`PAPER_LINK_BANDWIDTH`) in :func:`paper_kappa_at`, B_kv in ``kv_dtype`` (the
    paper's bf16 by default; a deployment's own KV type for a deployment); None for hardware
    the paper does not cover."""
    platform = paper_platform(accelerator, link)
    if platform is None:
        return None
    gpu, generation = platform
    return paper_kappa_at(model, PAPER_COMPUTE[gpu], PAPER_LINK_BANDWIDTH[generation],
                          kv_dtype)


def paper_inputs(dep: Deployment) -> PaperKappa | None:
    """:func:`paper_kappa_inputs` for a deployment on one of the paper's GPUs and links (B_kv
    in the deployment's KV type); None for other hardware."""
    return paper_kappa_inputs(dep.model, dep.accelerator.name, dep.link.name, dep.kv_dtype)


def paper_input_kappa(reg: Registry, model_name: str, accelerator: str,
                      link_name: str) -> float | None:
    """kappa_crit of :func:`paper_kappa_inputs` for a registry model (the paper's bf16 B_kv);
    None for hardware the paper does not cover."""
    found = paper_kappa_inputs(reg.model(model_name), accelerator, link_name)
    return None if found is None else float(found.kappa_crit)


def printed_for(model_name: str, accelerator: str, link: str) -> float | None:
    """The kappa_crit the paper prints for a registry model, accelerator and link, if any."""
    platform = paper_platform(accelerator, link)
    if platform is None:
        return None
    return PAPER_KAPPA_CRIT.get((model_name, f"{platform[0]}-{platform[1]}"))


def printed_kappa_crit(dep: Deployment) -> float | None:
    """The kappa_crit the paper prints for this deployment's model and hardware, if any."""
    return printed_for(dep.model.name, dep.accelerator.name, dep.link.name)
