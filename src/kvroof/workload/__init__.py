"""Workloads: request traces as new tokens T and cached tokens K per request.

>>> from kvroof.workload import load_workload, describe, synthesize
>>> stats = describe(synthesize("narrativeqa", 10_000, seed=0))
>>> round(stats.kappa_ratio.p50, -2)
5000.0

Modules, one concept each: :mod:`.records` (the columnar :class:`Workload`), :mod:`.tokens`
(token counting), one loader per format (:mod:`.sharegpt`, :mod:`.docqa`, :mod:`.mooncake`,
:mod:`.table`), :mod:`.formats` (format guessing and dispatch), :mod:`.summary` (percentiles
and the :class:`WorkloadStats` of columns), :mod:`.stats` (:func:`describe`), :mod:`.synth`
(synthetic workloads from published statistics), :mod:`.trace` (the simulation's
:class:`~kvroof.workload.trace.RequestTrace` of prefix-block chains) and :mod:`.requests`
(request traces built from each source); :mod:`.arrivals` (arrival times and output lengths),
:mod:`.stages` and :mod:`.stage_clock` (staged benchmark runs that drain between stages).
"""

from __future__ import annotations

from kvroof.workload.docqa import load_docqa
from kvroof.workload.formats import FORMATS, guess_format, load_workload
from kvroof.workload.mooncake import load_mooncake
from kvroof.workload.reading import SkippedRecordsWarning
from kvroof.workload.records import UNKNOWN_OUTPUT, Workload
from kvroof.workload.sharegpt import load_sharegpt
from kvroof.workload.stats import describe
from kvroof.workload.summary import Distribution, WorkloadStats
from kvroof.workload.synth import KINDS as SYNTHETIC_KINDS
from kvroof.workload.synth import synthesize
from kvroof.workload.table import load_table, write_table
from kvroof.workload.tokens import (
    ApproximateTokensWarning,
    HeuristicTokenCounter,
    TokenCounter,
    tiktoken_counter,
    token_counter,
    tokenizer_from_file,
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
