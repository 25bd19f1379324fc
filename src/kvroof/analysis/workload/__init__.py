"""Workload analyses: how much of a workload is transfer-bound (:mod:`.bound`).

The workloads themselves (loaders, the columnar :class:`~kvroof.workload.records.Workload`,
statistics, synthetic workloads) moved to :mod:`kvroof.workload`, which both the analyses and
the serving simulation (:mod:`kvroof.simulate`) use. The names below are re-exported from there
so that ``from kvroof.analysis.workload import load_workload`` keeps working; new code should
import from :mod:`kvroof.workload`.
"""

from __future__ import annotations

from kvroof.workload import (
    FORMATS,
    SYNTHETIC_KINDS,
    UNKNOWN_OUTPUT,
    ApproximateTokensWarning,
    Distribution,
    HeuristicTokenCounter,
    SkippedRecordsWarning,
    TokenCounter,
    Workload,
    WorkloadStats,
    describe,
    guess_format,
    load_docqa,
    load_mooncake,
    load_sharegpt,
    load_table,
    load_workload,
    synthesize,
    tiktoken_counter,
    token_counter,
    tokenizer_from_file,
    write_table,
)

__all__ = [
    "FORMATS",
    "SYNTHETIC_KINDS",
    "UNKNOWN_OUTPUT",
    "ApproximateTokensWarning",
    "Distribution",
    "HeuristicTokenCounter",
    "SkippedRecordsWarning",
    "TokenCounter",
    "Workload",
    "WorkloadStats",
    "describe",
    "guess_format",
    "load_docqa",
    "load_mooncake",
    "load_sharegpt",
    "load_table",
    "load_workload",
    "synthesize",
    "tiktoken_counter",
    "token_counter",
    "tokenizer_from_file",
    "write_table",
]
