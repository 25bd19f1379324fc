"""Workload analyses: how much of a workload is transfer-bound (:mod:`.bound`).

The workloads themselves (loaders, the columnar :class:`~kvroof.workload.records.Workload`,
statistics, synthetic workloads) live in :mod:`kvroof.workload`, which both the analyses and
the serving simulation (:mod:`kvroof.simulate`) use; import them from there.
"""
