"""The sentence each report figure's caption ends with: which compute model timed the figure's
compute (``roofline``, ``kernels``, or ``auto`` and which of the two applied on each accelerator)
and, where kernel tables timed it, the tables' source (repository, commit, kernels' engine).

The rule is :func:`kvroof.cost.compute_figures.uses_kernels`: ``kernels`` times every op from
the tables (an op on an accelerator without tables falls back to its own roofline), ``auto``
uses the tables where they cover the accelerator and the roofline elsewhere."""

from __future__ import annotations

from collections.abc import Iterable

from kvroof.specs.hardware import Accelerator

__all__ = ["MEASUREMENT_SENTENCE", "PAPER_SENTENCE", "compute_model_sentence",
           "table_source"]

PAPER_SENTENCE = ("Compute: the paper's Eq. 6 with the paper's own C (a formula, not one of "
                  "kvroof's compute models).")
MEASUREMENT_SENTENCE = "Compute: none drawn (host-link copies only)."


def table_source(accelerator: Accelerator) -> str:
    """Where an accelerator's kernel tables come from, in words: ``repository @commit (GEMMs
    timed on ENGINE VERSION)``."""
    from kvroof.kernels.lookup import provenance

    table = provenance(accelerator, "gemm")
    repository = str(table.get("repository", "?")).removeprefix("https://github.com/")
    commit = str(table.get("commit", "?"))[:7]
    return (f"{repository} @{commit} (GEMMs timed on {table.get('framework', '?')} "
            f"{table.get('version', '?')})")


def _names(accelerators: Iterable[Accelerator]) -> str:
    return ", ".join(dict.fromkeys(a.name for a in accelerators))


def compute_model_sentence(setting: str, accelerators: Iterable[Accelerator]) -> str:
    """One sentence naming the compute model ``setting`` (``roofline``, ``kernels`` or
    ``auto``) and what applied on each of ``accelerators`` (the ones the figure draws), with
    the kernel tables' source where they timed the compute."""
    chosen = list({a.name: a for a in accelerators}.values())
    if setting == "roofline" or not chosen:
        return ("Compute model: roofline (one whole-model roofline at each accelerator's "
                "achievable compute).")
    from kvroof.kernels.lookup import covered

    with_tables = [a for a in chosen if covered(a)]
    without = [a for a in chosen if not covered(a)]
    sources = "; ".join(dict.fromkeys(table_source(a) for a in with_tables))
    parts = []
    if with_tables:
        parts.append(f"kernels on {_names(with_tables)}, from the measured tables of {sources}")
    if without:
        parts.append(f"{'roofline' if setting == 'auto' else 'every op at its roofline'} on "
                     f"{_names(without)} (no kernel tables)")
    return f"Compute model: {setting}: " + "; ".join(parts) + "."
