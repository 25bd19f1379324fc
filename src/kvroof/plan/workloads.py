"""The workload of a plan: a request trace (any format kvroof reads), a shipped preset, or a
summary, with what each assumes and its prefix reuse measured under an unlimited cache.

Presets (``PRESETS``; every assumption is in :attr:`PlanWorkload.assumptions` and on the page):

- ``chat``: multi-turn chat, the first five minutes of Mooncake's real conversation trace
  shipped with kvroof (918 requests; its 512-token prefix-block hashes and output lengths as
  recorded).
- ``docqa``: document question answering with a shared prefix. Documents and questions are
  drawn from kvroof's NarrativeQA model (:func:`kvroof.workload.synth.synthesize`: document
  median 57K tokens, question median about 11), eight questions per document, the questions
  of all documents in random order (a document's questions are spread over the run), answers
  exponential with a mean of 64 tokens; built as a document-QA trace
  (:func:`kvroof.workload.requests.requests_from_workload`), so a document's first question
  prefills it and the others reuse it.
- ``agentic``: agentic coding sessions: a system prompt with tool definitions of 8,192 tokens
  shared by every session, a first turn adding the task and repository context (lognormal,
  median 6,000 tokens), each later turn adding the previous reply and a tool result (lognormal,
  median 1,200 tokens), 8 to 24 turns a session, replies exponential with a mean of 250 tokens,
  a session stopping before its prompt passes 100K tokens (or the model's context); about ten
  sessions interleaved at any time. These figures are kvroof's assumptions, not measurements.

A summary (:class:`WorkloadSummary`) is a prompt-length distribution, the share of each prompt
that is a reused prefix, the mean number of requests between two uses of the same prefix and,
optionally, an arrival rate (then the plan's target rate).

Arrival times are the plan's business (Poisson arrivals at each rate it tries, in the trace's
order); output lengths must be known (a trace without them takes ``output_tokens``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kvroof.errors import KvroofError, short_repr
from kvroof.plan.inputs import positive_number
from kvroof.workload.arrivals import output_lengths
from kvroof.workload.records import Workload
from kvroof.workload.requests import MOONCAKE_SLICE, load_requests, requests_from_workload
from kvroof.workload.synth import synthesize
from kvroof.workload.trace import RequestTrace, TraceBuilder

__all__ = ["PRESETS", "PlanWorkload", "ReuseStats", "WorkloadSummary", "load_plan_workload",
           "reuse_stats"]

PRESETS: dict[str, str] = {
    "chat": "multi-turn chat: Mooncake's real conversation trace (first five minutes)",
    "docqa": "document QA: synthetic NarrativeQA-like documents shared by eight questions each",
    "agentic": "agentic coding: synthetic tool-using sessions on a shared system prompt",
}
"""Preset name -> what it is."""

BLOCK_TOKENS = 512
"""Prefix-block size of the synthetic presets and summaries (Mooncake's)."""


@dataclass(frozen=True)
class WorkloadSummary:
    """A workload described by its statistics (tokens; ``rps`` requests per second).

    - ``prompt_tokens``: median prompt length (lognormal with ``prompt_sigma``, the standard
      deviation of its natural log);
    - ``reused_share``: the share of each prompt that is a prefix shared with other requests
      (0: no reuse);
    - ``reuse_distance``: mean number of requests between two uses of the same prefix (the
      number of distinct prefixes in use);
    - ``output_tokens``: ``N``, ``exp:MEAN`` or ``uniform:LO:HI``;
    - ``requests``: how many to draw; ``rps``: the arrival rate (the plan's target rate);
      ``seed``.
    """

    prompt_tokens: float
    reused_share: float
    reuse_distance: float = 100.0
    prompt_sigma: float = 0.5
    output_tokens: str = "exp:256"
    requests: int = 600
    rps: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if positive_number("summary prompt", self.prompt_tokens) < 2:
            raise KvroofError("summary prompt: expected at least 2 tokens")
        share = positive_number("summary reused", self.reused_share, allow_zero=True)
        if share >= 1:
            raise KvroofError(f"summary reused: expected a share in [0, 1), got {share:g}")
        if positive_number("summary distance", self.reuse_distance) < 1:
            raise KvroofError("summary distance: expected at least 1 request")
        positive_number("summary sigma", self.prompt_sigma, allow_zero=True)
        if isinstance(self.requests, bool) or not isinstance(self.requests, int) \
                or not 1 <= self.requests <= 1_000_000:
            raise KvroofError(f"summary requests: expected an integer from 1 to 1,000,000, got "
                              f"{short_repr(self.requests)}")
        if self.rps is not None:
            positive_number("summary rps", self.rps)
        output_lengths(self.output_tokens, 1)  # checks the spec

    @classmethod
    def parse(cls, text: str) -> WorkloadSummary:
        """``prompt=4000,reused=0.5,distance=100[,sigma=0.5][,output=exp:256][,requests=600]
        [,rps=2][,seed=0]``."""
        keys = {"prompt": float, "reused": float, "distance": float, "sigma": float,
                "output": str, "requests": int, "rps": float, "seed": int}
        names = {"prompt": "prompt_tokens", "reused": "reused_share",
                 "distance": "reuse_distance", "sigma": "prompt_sigma",
                 "output": "output_tokens", "requests": "requests", "rps": "rps",
                 "seed": "seed"}
        values: dict[str, Any] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in keys:
                raise KvroofError(f"summary: expected KEY=VALUE with KEY one of "
                                  f"{', '.join(keys)}, got {short_repr(item)}")
            if names[key] in values:
                raise KvroofError(f"summary: {key} given twice")
            try:
                values[names[key]] = keys[key](value.strip())
            except ValueError:
                raise KvroofError(f"summary {key}: expected a number, got "
                                  f"{short_repr(value)}") from None
        for required in ("prompt", "reused"):
            if names[required] not in values:
                raise KvroofError(f"summary: give {required}=... (e.g. summary:prompt=4000,"
                                  "reused=0.5,distance=100)")
        return cls(**values)


@dataclass(frozen=True)
class ReuseStats:
    """Prefix reuse of a trace under an unlimited cache (each request's cached prefix is its
    leading blocks seen in earlier requests, at most its prompt less one token).

    ``reused_tokens``: tokens of the prefix blocks that more than one request uses;
    ``median_new`` and ``median_kappa``: T and K/T over the requests with a cached prefix (0
    when none has one); ``lru_tokens``: the capacity (tokens) of one LRU cache of every
    request's blocks that keeps 50%, 90% and 100% of the reused tokens until they are used
    again (the block's own tokens and those of the distinct blocks used since its last use);
    ``(0, 0, 0)`` without reuse."""

    requests: int
    mean_input: float
    mean_output: float
    share_with_prefix: float
    cached_share: float
    reused_tokens: int
    distinct_tokens: int
    median_new: float
    median_cached: float
    median_kappa: float
    lru_tokens: tuple[int, int, int] = (0, 0, 0)


class _Fenwick:
    """Prefix sums over positions with point updates (a binary indexed tree)."""

    def __init__(self, size: int) -> None:
        self.tree = [0] * (size + 1)

    def add(self, index: int, value: int) -> None:
        i = index + 1
        tree = self.tree
        while i < len(tree):
            tree[i] += value
            i += i & -i

    def total(self, index: int) -> int:
        """Sum of positions ``0 .. index``."""
        i = index + 1
        out = 0
        tree = self.tree
        while i > 0:
            out += tree[i]
            i -= i & -i
        return out


def _lru_needs(ids: list[int], lengths: list[int]) -> tuple[int, int, int]:
    """LRU capacities (tokens) keeping 50/90/100% of the reused tokens of the access sequence
    ``ids`` (blocks of ``lengths`` tokens)."""
    tree = _Fenwick(len(ids))
    last: dict[int, int] = {}
    needs: list[int] = []
    weights: list[int] = []
    for time, (block, length) in enumerate(zip(ids, lengths, strict=True)):
        previous = last.get(block)
        if previous is not None:
            between = tree.total(time - 1) - tree.total(previous)
            needs.append(between + length)
            weights.append(length)
            tree.add(previous, -length)
        tree.add(time, length)
        last[block] = time
    if not needs:
        return 0, 0, 0
    order = np.argsort(np.asarray(needs))
    sorted_needs = np.asarray(needs)[order]
    share = np.cumsum(np.asarray(weights)[order]) / float(sum(weights))
    half = int(sorted_needs[min(int(np.searchsorted(share, 0.5)), len(needs) - 1)])
    most = int(sorted_needs[min(int(np.searchsorted(share, 0.9)), len(needs) - 1)])
    return half, most, int(sorted_needs[-1])


def reuse_stats(trace: RequestTrace) -> ReuseStats:
    """:class:`ReuseStats` of ``trace`` (requests in its order)."""
    first_user: dict[int, int] = {}
    uses: dict[int, int] = {}
    length: dict[int, int] = {}
    n = len(trace)
    cached = np.zeros(n, dtype=np.int64)
    ids_all = trace.block_ids.tolist()
    ends_all = trace.block_ends.tolist()
    offsets = trace.block_offsets.tolist()
    sizes: list[int] = []
    for i in range(n):
        k = 0
        leading = True
        previous = 0
        for j in range(offsets[i], offsets[i + 1]):
            block, end = ids_all[j], ends_all[j]
            sizes.append(end - previous)
            seen = first_user.get(block)
            if seen is None:
                first_user[block] = i
                length[block] = end - previous
                leading = False
            elif leading and seen < i:
                k = end
            else:
                leading = False
            uses[block] = uses.get(block, 0) + 1
            previous = end
        cached[i] = min(k, int(trace.input_tokens[i]) - 1)
    inputs = trace.input_tokens
    new = inputs - cached
    mask = cached > 0
    outputs = trace.output_tokens[trace.output_known]
    return ReuseStats(
        requests=n,
        mean_input=float(inputs.mean()) if n else 0.0,
        mean_output=float(outputs.mean()) if outputs.size else math.nan,
        share_with_prefix=float(mask.mean()) if n else 0.0,
        cached_share=float(cached.sum() / inputs.sum()) if n else 0.0,
        reused_tokens=int(sum(length[b] for b, count in uses.items() if count > 1)),
        distinct_tokens=int(sum(length.values())),
        median_new=float(np.median(new[mask])) if mask.any() else 0.0,
        median_cached=float(np.median(cached[mask])) if mask.any() else 0.0,
        median_kappa=float(np.median(cached[mask] / new[mask])) if mask.any() else 0.0,
        lru_tokens=_lru_needs(ids_all, sizes),
    )


@dataclass(frozen=True)
class PlanWorkload:
    """A plan's workload: the trace, how it was made, and its reuse."""

    trace: RequestTrace
    name: str
    kind: str
    """``file``, ``preset`` or ``summary``."""
    description: str
    assumptions: tuple[str, ...]
    reuse: ReuseStats
    target_rps: float | None = None
    synthetic: bool = False


def _lognormal(rng: np.random.Generator, median: float, sigma: float, n: int) -> Any:
    return np.maximum(1, np.rint(median * np.exp(sigma * rng.standard_normal(n)))).astype(
        np.int64)


def _chat() -> tuple[RequestTrace, str, tuple[str, ...]]:
    trace = load_requests(MOONCAKE_SLICE)
    return trace, PRESETS["chat"], (
        "Mooncake's conversation trace (FAST'25 release, Apache-2.0), its first five minutes: "
        "918 requests with their 512-token prefix-block hashes and output lengths as recorded",
        "its timestamps are replaced by Poisson arrivals at each rate the plan tries, in the "
        "trace's order (turns of a conversation stay in order)",
    )


def _docqa(context: int, seed: int, documents: int = 75, questions: int = 8
           ) -> tuple[RequestTrace, str, tuple[str, ...]]:
    rng = np.random.default_rng(seed)
    cap = min(context, 131_072) - 256
    docs = synthesize("narrativeqa", documents, seed=seed, max_context=cap)
    asked = synthesize("narrativeqa", documents * questions, seed=seed + 1,
                       max_context=cap)
    doc_of = np.repeat(np.arange(documents), questions)
    rng.shuffle(doc_of)
    new = np.minimum(asked.new_tokens, 256)
    cached = docs.cached_tokens[doc_of]
    cached = np.minimum(cached, context - new - 1 - 256)
    outputs = output_lengths("exp:64", len(doc_of), seed + 2)
    workload = Workload.from_columns(
        new, np.maximum(cached, 0), output_tokens=outputs,
        group_id=np.array([f"doc{d}" for d in doc_of], dtype=object),
        name="docqa", synthetic=True, source="SYNTHETIC document QA (kvroof plan preset)")
    trace = requests_from_workload(workload, "docqa", block_tokens=BLOCK_TOKENS)
    return trace, PRESETS["docqa"], (
        f"SYNTHETIC: {documents} documents and {documents * questions} questions drawn from "
        "kvroof's NarrativeQA model (lognormal fitted to published medians: documents median "
        f"57K tokens, questions median about 11; seed {seed}), documents cut to the model's "
        "context",
        f"{questions} questions per document, all questions in random order (a document's "
        "questions are spread over the run, so every document stays in the working set)",
        "a document's first question prefills it; later questions reuse it as a prefix; "
        "answers exponential with a mean of 64 tokens",
    )


def _agentic(context: int, seed: int, sessions: int = 40
             ) -> tuple[RequestTrace, str, tuple[str, ...]]:
    rng = np.random.default_rng(seed)
    system = 8192
    limit = min(context, 100_000)
    builder = TraceBuilder()
    system_ids = list(range(system // BLOCK_TOKENS))
    next_id = len(system_ids)
    events: list[tuple[float, int, int, list[int], list[int], int]] = []
    for session in range(sessions):
        turns = int(rng.integers(8, 25))
        start = float(rng.uniform(0.0, 5.0))
        added = [int(_lognormal(rng, 6000, 0.6, 1)[0])] + \
            [int(x) for x in _lognormal(rng, 1200, 0.8, turns - 1)]
        replies = output_lengths("exp:250", turns, int(rng.integers(0, 2**31)))
        prompt = system
        ids = list(system_ids)
        ends = [BLOCK_TOKENS * (j + 1) for j in range(len(system_ids))]
        time = start
        for turn in range(turns):
            prompt += added[turn] + (int(replies[turn - 1]) if turn else 0)
            if prompt + int(replies[turn]) > limit:
                break
            while ends[-1] + BLOCK_TOKENS <= prompt:  # the session's full blocks so far
                ids.append(next_id)
                ends.append(ends[-1] + BLOCK_TOKENS)
                next_id += 1
            chain_ids, chain_ends = list(ids), list(ends)
            if chain_ends[-1] < prompt:  # the partial last block is this request's own
                chain_ids.append(next_id)
                chain_ends.append(prompt)
                next_id += 1
            events.append((time, session, turn, chain_ids, chain_ends, int(replies[turn])))
            time += float(rng.exponential(0.1))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    for _, session, _, chain_ids, chain_ends, reply in events:
        builder.add(chain_ends[-1], reply, chain_ids, chain_ends, 0, len(builder.inputs) + 1,
                    f"session{session}")
    trace = builder.build(False, record_unit="request", name="agentic", synthetic=True,
                          source="SYNTHETIC agentic coding sessions (kvroof plan preset)")
    return trace, PRESETS["agentic"], (
        f"SYNTHETIC: {sessions} agentic coding sessions (seed {seed}); kvroof's assumptions, "
        "not measurements",
        f"a system prompt with tool definitions of {system:,} tokens shared by every session; "
        "a first turn adding the task and repository context (lognormal, median 6,000 "
        "tokens); each later turn adding the previous reply and a tool result (lognormal, "
        "median 1,200 tokens)",
        f"8 to 24 turns a session, stopping before the prompt passes {limit:,} tokens; replies "
        "exponential with a mean of 250 tokens; about ten sessions interleaved at any time",
    )


def _summary(summary: WorkloadSummary, context: int
             ) -> tuple[RequestTrace, str, tuple[str, ...]]:
    rng = np.random.default_rng(summary.seed)
    n = summary.requests
    contexts = max(1, round(summary.reuse_distance))
    share = summary.reused_share
    sigma = summary.prompt_sigma
    cap = max(2, context - 1)
    prefix_len = _lognormal(rng, summary.prompt_tokens * share, sigma, contexts) if share \
        else np.zeros(contexts, dtype=np.int64)
    own = _lognormal(rng, summary.prompt_tokens * (1 - share), sigma, n)
    which = rng.integers(0, contexts, n)
    outputs = output_lengths(summary.output_tokens, n, summary.seed + 1)
    builder = TraceBuilder()
    keyed: dict[tuple[int, int, int], int] = {}
    next_id = 0
    for i in range(n):
        c = int(which[i])
        prefix = int(min(prefix_len[c], cap - 1))
        prompt = int(min(prefix + int(own[i]), cap))
        ids: list[int] = []
        ends: list[int] = []
        start = 0
        while start < prefix:
            end = min(start + BLOCK_TOKENS, prefix)
            key = (c, len(ids), end)
            if key not in keyed:
                keyed[key] = next_id
                next_id += 1
            ids.append(keyed[key])
            ends.append(end)
            start = end
        while start < prompt:
            end = min(start + BLOCK_TOKENS, prompt)
            ids.append(next_id)
            ends.append(end)
            next_id += 1
            start = end
        builder.add(prompt, int(outputs[i]), ids, ends, 0, i + 1, f"prefix{c}" if share else "")
    trace = builder.build(False, record_unit="request", name="summary", synthetic=True,
                          source="SYNTHETIC workload from a summary (kvroof plan)")
    return trace, (f"summary: prompts of median {summary.prompt_tokens:,.0f} tokens, "
                   f"{share:.0%} a shared prefix, reused every {contexts:,} requests"), (
        f"SYNTHETIC: {n:,} requests (seed {summary.seed}), prompt lengths lognormal "
        f"(median {summary.prompt_tokens:,.0f} tokens, log-sd {sigma:g})",
        f"{contexts:,} distinct prefixes, each request picking one at random (a prefix is "
        f"reused every {contexts:,} requests on average); a prefix is {share:.0%} of a median "
        "prompt (lognormal lengths), the rest of the prompt is the request's own",
        f"outputs {summary.output_tokens}",
    )


def load_plan_workload(workload: str | Path | WorkloadSummary | RequestTrace, *,
                       context: int | None = None, output_tokens: str | None = None,
                       format: str | None = None, skip_bad: bool = False,
                       seed: int = 0) -> PlanWorkload:
    """The workload ``workload`` names: a :class:`WorkloadSummary`, a request trace, a preset
    name (``PRESETS``), or a trace file in any format kvroof reads (``format`` guessed when
    ``None``). ``context``: the model's context (synthetic prompts stay inside it);
    ``output_tokens``: output lengths replacing the trace's (``N``, ``exp:MEAN``,
    ``uniform:LO:HI``)."""
    ctx = context or 131_072
    target = None
    synthetic = False
    if isinstance(workload, WorkloadSummary):
        trace, description, assumptions = _summary(workload, ctx)
        kind, name, target, synthetic = "summary", "summary", workload.rps, True
    elif isinstance(workload, RequestTrace):
        trace, kind, name = workload, "file", workload.name
        description, assumptions = workload.source or workload.name, ()
        synthetic = workload.synthetic
    elif isinstance(workload, str) and workload in PRESETS:
        if Path(workload).exists():
            raise KvroofError(f"workload: {workload!r} is both a preset and a file here; "
                              f"write ./{workload} for the file")
        if workload == "chat":
            trace, description, assumptions = _chat()
        elif workload == "docqa":
            trace, description, assumptions = _docqa(ctx, seed)
            synthetic = True
        else:
            trace, description, assumptions = _agentic(ctx, seed)
            synthetic = True
        kind, name = "preset", workload
    elif isinstance(workload, str | Path):
        path = Path(workload)
        if not path.exists():
            raise KvroofError(f"workload: no file {str(workload)!r} and no preset of that "
                              f"name (presets: {', '.join(PRESETS)}; or summary:prompt=...)")
        trace = load_requests(path, format, skip_bad=skip_bad)
        kind, name = "file", path.stem
        description, assumptions = trace.source or str(path), ()
        synthetic = trace.synthetic
    else:
        raise KvroofError(f"workload: expected a file, a preset ({', '.join(PRESETS)}), a "
                          f"summary or a request trace, got {short_repr(workload)}")
    if output_tokens is not None:
        trace = trace.with_outputs(output_lengths(output_tokens, len(trace), seed + 1),
                                   f"output lengths {output_tokens} (seed {seed + 1})")
        assumptions = (*assumptions, f"output lengths replaced: {output_tokens}")
    if len(trace) and not trace.output_known.all():
        missing = int((~trace.output_known).sum())
        raise KvroofError(f"{trace.where(int(np.flatnonzero(~trace.output_known)[0]))}: output "
                          f"length unknown ({missing:,} of {len(trace):,} requests); give "
                          "output lengths: output_tokens takes N, exp:MEAN or uniform:LO:HI")
    return PlanWorkload(trace, name, kind, description, tuple(assumptions),
                        reuse_stats(trace), target, synthetic)
