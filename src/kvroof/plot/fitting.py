"""The figures' rule for deployments that do not fit in memory, the same as ``kvroof kappa``
and ``kvroof ttft``: nothing is priced for a deployment whose weights and KV reserve do not
fit. A figure of one deployment refuses it with :func:`~kvroof.cost.memory_fit.check_fit`'s
one-line error; a figure of several draws those that fit, says which it left out (a warning,
and the figure's footer), and refuses when none fits."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from kvroof.cost.deployment import Deployment
from kvroof.cost.memory_fit import check_fit, fit_problem

__all__ = ["NotDrawnWarning", "require_fit", "split_by_fit"]

class NotDrawnWarning(UserWarning):
    """A figure left out deployments that do not fit."""


def require_fit(dep: Deployment) -> None:
    """Refuse a deployment that does not fit (a figure of that one deployment)."""
    check_fit(dep)


def split_by_fit(deps: Sequence[Deployment], labels: Sequence[str] | None = None,
                 ) -> tuple[list[Deployment], str]:
    """The deployments that fit, in order, and a note naming the others ("" when all fit),
    also issued as a :class:`NotDrawnWarning`; when none fits, the first one's error."""
    names = list(labels) if labels is not None else [dep.short_label for dep in deps]
    kept: list[Deployment] = []
    left_out: list[str] = []
    for dep, name in zip(deps, names, strict=True):
        problem = fit_problem(dep)
        if problem:
            detail = problem.removeprefix("does not fit (").removesuffix(")")
            left_out.append(f"{name} ({detail})")
        else:
            kept.append(dep)
    if deps and not kept:
        require_fit(deps[0])
    note = f"not drawn, the weights do not fit: {'; '.join(left_out)}" if left_out else ""
    if note:
        warnings.warn(note, NotDrawnWarning, stacklevel=3)
    return kept, note
