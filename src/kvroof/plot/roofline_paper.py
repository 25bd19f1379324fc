"""The paper's own inputs for its offload roofline (Meng, Lee, Wang, arXiv 2601.19910, Fig. 4):
its GPUs and links by registry name, paper mode from its compute C and link bandwidth BW for a
deployment on them, and the kappa_crit it prints. One implementation, in
:mod:`kvroof.analysis.paper` (the report's paper-mode table calls it too); re-exported here
under the names the plots use."""

from __future__ import annotations

from kvroof.analysis.paper import (
    PAPER_ACCELERATORS,
    PAPER_LINKS,
    paper_inputs,
    printed_kappa_crit,
)

__all__ = ["PAPER_ACCELERATORS", "PAPER_LINKS", "paper_inputs", "printed_kappa_crit"]
