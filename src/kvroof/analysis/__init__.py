"""Analyses built on the cost model: the seed paper's tables (``paper``), one-change-at-a-time
walks from its kappa_crit to the full one (``waterfall``), what-ifs (``what_if``) and the
transfer-bound share of a workload (``workload.bound``; the workloads themselves live in
:mod:`kvroof.workload`).

Nothing here is imported by ``import kvroof``; import the submodule you need, e.g.
``from kvroof.analysis.workload.bound import transfer_bound_shares``.
"""
