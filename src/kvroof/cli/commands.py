"""The commands of ``kvroof``: which module registers each and its one-line help.

Kept free of heavy imports (no numpy, no pydantic): ``kvroof --help`` lists these lines without
loading the cost model, and a command loads only its own module (see :mod:`kvroof.cli`).
"""

from __future__ import annotations

__all__ = ["COMMANDS", "command_help", "command_module"]

COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("kvroof.cli.specs",
             "list the known models, accelerators, links, systems or engine profiles"),
    "show": ("kvroof.cli.specs", "show one spec with its derived figures"),
    "kappa": ("kvroof.cli.cost", "critical cached-to-new token ratio (paper or full mode)"),
    "ttft": ("kvroof.cli.cost", "time to first token of one request"),
    "plot": ("kvroof.cli.plot", "draw one figure to a PNG, SVG or PDF file"),
    "report": ("kvroof.cli.report",
               "write every figure, the paper's tables and the extensions to a folder"),
    "workload": ("kvroof.cli.workload",
                 "request traces: T, K and kappa_ratio statistics; synthetic workloads"),
    "simulate": ("kvroof.cli.simulate",
                 "replay a request trace through replicas of an iteration-level serving engine "
                 "(prefix cache in HBM, host DRAM and tiers)"),
    "sweep": ("kvroof.cli.simulate",
              "run a grid of simulations (hardware x policies x request rates x cache sizes) on "
              "local processes or a Dask cluster"),
    "plan": ("kvroof.cli.plan", "will KV offloading pay: rates, host memory, threshold, GPUs"),
    "measure": ("kvroof.cli.measure",
                "measure this machine: copy bandwidth, GEMM FLOP/s, prefill with offloaded KV "
                "(needs torch: pip install 'kvroof[measure]')"),
    "calibrate": ("kvroof.cli.calibrate",
                  "fit compute efficiency, link bandwidth and latency, overlap to measured "
                  "prefill results"),
    "validate": ("kvroof.cli.validate",
                 "predict published measurements and report the errors, before and with "
                 "engine profiles"),
}
"""Command name -> (module whose ``register`` adds it, help line), in the order ``--help``
lists them."""


def command_help(name: str) -> str:
    """The one-line help of command ``name``."""
    return COMMANDS[name][1]


def command_module(name: str) -> str:
    """The module that registers command ``name``."""
    return COMMANDS[name][0]
