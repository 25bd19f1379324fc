"""The result of kappa_crit in full mode (:class:`KappaResult`): kappa_crit and the crossover
``K*`` for each ``T``, and why it is ``inf`` where prefill is never transfer-bound.
:func:`kvroof.cost.kappa.kappa_crit` computes one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["KappaResult"]

_NEVER = "never transfer-bound at this T: each cached token adds at least as much compute " \
         "time (attention over it, or reading its KV from HBM) as it costs to load"
_BAND = "not transfer-bound at large K: a fixed per-request transfer cost makes small K " \
        "transfer-bound, but each cached token adds more compute than transfer"


class KappaResult:
    """kappa_crit (full mode) for each T: ``inf`` where prefill is never transfer-bound.

    ``reason`` (why kappa_crit is ``inf``; ``""`` where it is finite) is built when read: a
    string for a scalar, an object array of references to two shared strings for an array."""

    __slots__ = ("_band", "crossover_tokens", "kappa_crit", "method", "never_transfer_bound",
                 "new_tokens")

    def __init__(self, new_tokens: Any, kappa_crit: Any, crossover_tokens: Any,
                 never_transfer_bound: Any, band: Any, method: str) -> None:
        self.new_tokens = new_tokens
        self.kappa_crit = kappa_crit
        self.crossover_tokens = crossover_tokens
        self.never_transfer_bound = never_transfer_bound
        self._band = band
        self.method = method

    def __repr__(self) -> str:
        return (f"KappaResult(new_tokens={self.new_tokens!r}, kappa_crit={self.kappa_crit!r}, "
                f"never_transfer_bound={self.never_transfer_bound!r}, method={self.method!r})")

    @property
    def reason(self) -> Any:
        never = self.never_transfer_bound
        if isinstance(never, bool):
            return (_BAND if self._band else _NEVER) if never else ""
        reasons = _reasons(never, self._band)
        return reasons

    def _repr_html_(self) -> str:
        from kvroof.display import array_summary, html_table, number

        if isinstance(self.never_transfer_bound, bool):
            rows = [["new tokens T", number(self.new_tokens)],
                    ["kappa_crit", "never transfer-bound" if self.never_transfer_bound
                     else number(self.kappa_crit)],
                    ["crossover K*", number(self.crossover_tokens)],
                    ["method", self.method]]
            if self.reason:
                rows.append(["why", self.reason])
            return html_table(rows, "kappa_crit (full mode)")
        never = np.asarray(self.never_transfer_bound)
        rows = [array_summary("kappa_crit", self.kappa_crit),
                ["never transfer-bound", f"{int(never.sum())} of {never.size}"],
                ["method", self.method]]
        return html_table(rows, "kappa_crit grid (full mode); to_frame() for every point")

    def to_frame(self) -> Any:
        """A pandas DataFrame with one row per point: ``new_tokens``, ``kappa_crit``,
        ``crossover_tokens``, ``never_transfer_bound`` and ``reason``."""
        from kvroof.display import require_pandas

        pandas = require_pandas()
        shape = np.shape(self.kappa_crit)
        columns = {name: np.broadcast_to(np.asarray(value), shape).ravel()
                   for name, value in self.as_dict().items() if name != "method"}
        frame = pandas.DataFrame(columns)
        frame["method"] = self.method
        return frame

    def as_dict(self) -> dict[str, Any]:
        return {
            "new_tokens": self.new_tokens,
            "kappa_crit": self.kappa_crit,
            "crossover_tokens": self.crossover_tokens,
            "never_transfer_bound": self.never_transfer_bound,
            "reason": self.reason,
            "method": self.method,
        }


def _reasons(never: Any, band: Any = False) -> Any:
    """Why each kappa_crit is inf ('' where it is finite), as an object array (one reference
    per element, not a copy of the text)."""
    never_arr = np.asarray(never, dtype=bool)
    reasons = np.full(never_arr.shape, "", dtype=object)
    reasons[never_arr] = _NEVER
    reasons[np.broadcast_to(np.asarray(band, dtype=bool), never_arr.shape) & never_arr] = _BAND
    return reasons
