"""Analyses built on the cost model: the seed paper's tables, workloads, what-ifs."""
