"""Analyses built on the cost model: the seed paper's tables (``paper``), one-change-at-a-time
walks from its kappa_crit to the full one (``waterfall``), what-ifs (``what_if``) and workloads
(request traces and their T, K and kappa_ratio, ``workload``).

Nothing here is imported by ``import kvroof``; import the submodule you need, e.g.
``from kvroof.analysis.workload import load_workload, describe``.
"""
