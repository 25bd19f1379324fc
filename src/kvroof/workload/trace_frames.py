"""A request trace for people and for pandas: the per-request columns with their units, the HTML
and text reprs of :class:`kvroof.workload.trace.RequestTrace`.

Columns (:func:`trace_columns`; names with units as every ``to_frame()`` in kvroof):
``input_tokens``, ``output_tokens`` (-1 where unknown), ``arrival_time_s`` (when the trace has
times), ``group_id``, ``record`` (the line, row or conversation in the source; the frame's
``attrs["record_unit"]`` says which), ``blocks`` (prefix blocks in the prompt's chain),
``preload_blocks`` and ``preloaded_tokens`` (the leading blocks in the host tier whenever the
request looks for them, and their tokens) and ``seen_prefix_tokens`` (the prompt's leading
tokens in blocks an earlier request's chain already named: what an unlimited prefix cache
would hold when the request arrives).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from kvroof.display import count, duration, html_table, require_pandas

__all__ = ["trace_columns", "trace_frame", "trace_html", "trace_repr"]


def _block_tokens(trace: Any) -> NDArray[np.int64]:
    """Tokens per block (its end minus the previous block's end in the same chain)."""
    ends = np.asarray(trace.block_ends, dtype=np.int64)
    if not ends.size:
        return np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    offsets = np.asarray(trace.block_offsets, dtype=np.int64)
    firsts = offsets[:-1][np.diff(offsets) > 0]
    starts[firsts] = 0
    tokens: NDArray[np.int64] = ends - starts
    return tokens


def _per_request(trace: Any, values: NDArray[np.int64]) -> NDArray[np.int64]:
    """The sum of a per-block column over each request's blocks."""
    offsets = np.asarray(trace.block_offsets, dtype=np.int64)
    total = np.concatenate([[0], np.cumsum(values)]).astype(np.int64)
    summed: NDArray[np.int64] = total[offsets[1:]] - total[offsets[:-1]]
    return summed


def _seen_before(trace: Any) -> NDArray[np.bool_]:
    """Per block: whether an earlier block of the trace has its id (a chain names each block
    once, so "earlier" means an earlier request's)."""
    ids = np.asarray(trace.block_ids, dtype=np.int64)
    seen = np.ones(ids.size, dtype=bool)
    if ids.size:
        _, first = np.unique(ids, return_index=True)
        seen[first] = False
    return seen


def trace_columns(trace: Any) -> dict[str, Any]:
    """The per-request columns of a trace (module docstring), numpy arrays by name."""
    blocks = np.diff(np.asarray(trace.block_offsets, dtype=np.int64))
    tokens = _block_tokens(trace)
    owner_index = np.asarray(trace.block_offsets[:-1], dtype=np.int64)
    preload = np.asarray(trace.preload_blocks, dtype=np.int64)
    ends = np.asarray(trace.block_ends, dtype=np.int64)
    last = owner_index + np.minimum(preload, blocks) - 1
    preloaded = np.where(np.minimum(preload, blocks) > 0, ends[np.clip(last, 0, None)]
                         if ends.size else 0, 0)
    # leading blocks seen before: a chain's blocks are seen before up to its first new one
    leading = _leading_true(trace, _seen_before(trace))
    columns: dict[str, Any] = {
        "input_tokens": trace.input_tokens,
        "output_tokens": trace.output_tokens,
    }
    if trace.arrival_time is not None:
        columns["arrival_time_s"] = trace.arrival_time
    columns.update(
        group_id=trace.group_id,
        record=trace.record,
        blocks=blocks,
        preload_blocks=preload,
        preloaded_tokens=preloaded.astype(np.int64),
        seen_prefix_tokens=_per_request(trace, np.where(leading, tokens, 0)),
    )
    return columns


def _leading_true(trace: Any, flags: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Per block: whether it and every block before it in its chain are flagged."""
    offsets = np.asarray(trace.block_offsets, dtype=np.int64)
    if not flags.size:
        return flags
    misses = np.concatenate([[0], np.cumsum(~flags)]).astype(np.int64)
    owner = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    before = misses[1:] - misses[offsets[:-1]][owner]  # misses in the chain up to each block
    leading: NDArray[np.bool_] = before == 0
    return leading


def trace_frame(trace: Any) -> Any:
    """A pandas DataFrame with one row per request (:func:`trace_columns`); ``attrs`` hold the
    trace's ``name``, ``source`` and ``record_unit``."""
    pandas = require_pandas()
    frame = pandas.DataFrame(trace_columns(trace))
    frame.attrs.update(name=trace.name, source=trace.source, record_unit=trace.record_unit)
    return frame


def _spread(values: NDArray[Any], unit: str) -> str:
    if not values.size:
        return "-"
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return (f"p50 {count(p50, unit)}, p90 {count(p90)}, p99 {count(p99)}, max "
            f"{count(values.max())}; {count(values.sum())} in all")


def _arrivals(trace: Any) -> str:
    times = trace.arrival_time
    if times is None:
        return "none in the source (a simulation draws them: rps, burstiness)"
    known = times[np.isfinite(times)]
    if not known.size:
        return "unknown"
    span = float(known.max() - known.min())
    rate = f", {len(known) / span:.3g} requests/s" if span > 0 else ""
    return f"over {duration(span)} ({duration(float(known.min()))} to " \
           f"{duration(float(known.max()))}){rate}"


def trace_html(trace: Any) -> str:
    """The HTML table of a trace: source, requests, arrivals, token counts, prefix sharing."""
    n = len(trace)
    title = (f"trace {trace.name}{' (SYNTHETIC)' if trace.synthetic else ''}: {count(n)} "
             "requests; to_frame() for every request")
    if not n:
        return html_table([("source", trace.source)], title)
    columns = trace_columns(trace)
    known = trace.output_tokens[trace.output_known]
    prompt = int(trace.input_tokens.sum())
    seen = int(columns["seen_prefix_tokens"].sum())
    rows = [
        ("source", trace.source),
        ("requests", f"{count(n)} ({count(trace.skipped)} bad records skipped)"),
        ("arrivals", _arrivals(trace)),
        ("input tokens", _spread(trace.input_tokens, "tokens")),
        ("output tokens", f"{_spread(known, 'tokens')} (known for {count(known.size)})"
         if known.size else "unknown (a simulation draws them)"),
        ("prefix blocks", f"{count(trace.block_ids.size)} in chains, "
                          f"{count(np.unique(trace.block_ids).size)} distinct"),
        ("prefix seen before", f"{count(seen)} of {count(prompt)} input tokens "
                               f"({100 * seen / max(prompt, 1):.1f} %): what an unlimited "
                               "prefix cache would hold"),
    ]
    preloaded = int(columns["preloaded_tokens"].sum())
    if preloaded:
        users = int((columns["preload_blocks"] > 0).sum())
        rows.append(("preloaded", f"{count(preloaded)} tokens in {count(users)} requests (in "
                                  "the host tier whenever the request looks)"))
    groups = {g for g in trace.group_id.tolist() if g}
    if groups:
        rows.append(("groups", f"{count(len(groups))} conversations or documents"))
    return html_table(rows, title)


def trace_repr(trace: Any) -> str:
    """One line: name, requests, arrival span and source file."""
    timed = ""
    if trace.arrival_time is not None and len(trace):
        known = trace.arrival_time[np.isfinite(trace.arrival_time)]
        if known.size:
            timed = f" over {duration(float(known.max() - known.min()))}"
    synthetic = " (SYNTHETIC)" if trace.synthetic else ""
    return (f"<RequestTrace {trace.name}{synthetic}: {count(len(trace))} requests{timed}, "
            f"{count(trace.block_ids.size)} prefix blocks"
            + (f", from {trace.path}" if trace.path else "") + ">")
