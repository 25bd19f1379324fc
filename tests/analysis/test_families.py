"""kappa_crit by attention family: the per-kind split adds up to the cost model's own totals,
and the family table's cells are the library's kappa_crit (or "does not fit")."""

from __future__ import annotations

import numpy as np
import pytest

from kvroof.analysis.families import FAMILIES, Family, Placement, family_kappas, kind_shares
from kvroof.cost.deployment import deployment
from kvroof.cost.flops import prefill_flops
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.kv import kv_bytes
from kvroof.cost.memory_fit import fit_problem
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.model)
def test_kind_shares_add_up_to_the_totals(family: Family) -> None:
    """Bytes per kind x K sum to kv_bytes(K); attention FLOPs per kind sum to the prefill's
    context-dependent FLOPs (core, indexer scores, MLA up-projection) minus those at K = 0."""
    model = REG.model(family.model)
    t, k = 128.0, 30_000.0
    shares = kind_shares(model, t, k)
    assert sum(s.bytes_per_cached_token for s in shares) * k == pytest.approx(kv_bytes(model, k))
    at_k, at_0 = prefill_flops(model, t, k), prefill_flops(model, t, 0)
    # per-token parts (the indexer's projections, MLA absorbed folding) cancel in the difference
    expected = sum(float(getattr(at_k, part)) - float(getattr(at_0, part))
                   for part in ("attention_core", "mla_up", "indexer"))
    assert sum(s.flops_per_cached_token for s in shares) * k == pytest.approx(expected, rel=1e-9)


def test_marginal_bytes_are_the_layers_that_keep_every_token() -> None:
    """Far beyond the caps only full layers (and a sparse layer's latent and key) grow: Gemma 3's
    10 global layers x 8,192 B, Llama 4's 12 NoPE layers x 4,096 B, Qwen3-Next's 12 x 2,048 B."""
    for name, expected in (("gemma-3-27b", 81_920), ("llama-4-scout-17b-16e", 49_152),
                           ("qwen3-next-80b-a3b", 24_576), ("deepseek-v3.2", 78_324)):
        shares = kind_shares(REG.model(name), 128, 30_000)
        assert sum(s.marginal_bytes for s in shares) == pytest.approx(expected), name


def test_kind_shares_need_a_cached_token() -> None:
    """Shares are per cached token: K = 0 is an error naming the argument (it was a
    ZeroDivisionError)."""
    from kvroof.errors import KvroofError

    with pytest.raises(KvroofError, match="cached_tokens: must be positive"):
        kind_shares(REG.model("gemma-3-27b"), 128, 0)


def test_family_kappas_are_the_librarys() -> None:
    placements = (Placement("dgx-h100", 8), Placement("gh200", 1))
    rows = family_kappas(128, 8192, FAMILIES[2:5], placements, REG)
    for row in rows:
        dep = deployment(row.family.model, system=row.placement.system, tp=row.placement.tp,
                         registry=REG)
        if fit_problem(dep):
            assert row.alone is None and row.fit.startswith("does not fit")
            continue
        assert row.alone == float(kappa_crit(dep, 128).kappa_crit)
        busy = deployment(row.family.model, system=row.placement.system, tp=row.placement.tp,
                          registry=REG, iteration_tokens=8192)
        assert row.busy == float(kappa_crit(busy, 128).kappa_crit)
    assert any(r.alone is None for r in rows) and any(r.alone is not None for r in rows)
    assert np.isfinite([r.alone for r in rows if r.alone is not None]).all()
