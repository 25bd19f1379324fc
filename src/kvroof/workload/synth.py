"""Synthetic workloads that match the published summary statistics (Meng, Lee, Wang, arXiv
2601.19910, workload characterization, LLaMA-3.1 tokenizer). Every one is labelled
``synthetic=True`` and named ``synthetic-<kind>``; rows are independent draws from a seeded
``numpy.random.Generator``.

The model: (ln T, ln kappa) is bivariate normal; ``T = max(1, round(e^lnT))`` and
``K = round(kappa * T)``, so the drawn kappa is kept (up to K's rounding) and K follows from
T and kappa. All parameters are computed below from the published figures in closed form;
``z(p)`` is the standard normal quantile (z(0.75) = 0.6745, z(0.9) = 1.2816, z(0.95) = 1.6449).
The values in the comments are rounded; the code keeps full precision.

Document QA (NarrativeQA, DocFinQA): K is the document (the paper's convention: the document
is cached, T is the question), and question length is taken as independent of document
length (corr(ln K, ln T) = 0).

- ln K: median = the published median document; the published range is read as the central
  90% (p5-p95), so ``s_K = ln(hi/lo) / (2 z(0.95))``.
- ln kappa: median = the published median, ``s_kappa = ln(p75/p25) / (2 z(0.75))``.
- ln T = ln K - ln kappa, so ``median T = median K / median kappa`` and
  ``s_T = sqrt(s_kappa^2 - s_K^2)`` (independence); ``corr(ln T, ln kappa) = -s_T / s_kappa``.

  NarrativeQA: K 57K (15K-190K) -> s_K = ln(12.67)/3.290 = 0.772; kappa 5000 (2400-11000)
  -> s_kappa = ln(4.583)/1.349 = 1.129; T median 57000/5000 = 11.4 (published "~12"),
  s_T = 0.823.
  DocFinQA: K 167K (60K-450K) -> s_K = ln(7.5)/3.290 = 0.612; kappa 10000 (5000-17000)
  -> s_kappa = ln(3.4)/1.349 = 0.907; T median 16.7, s_T = 0.669, mean 16.7 e^(s_T^2/2) =
  20.9 (published "~23", which fits a mean better than a median: 167000/23 = 7261, far from
  the published median kappa of 10000). The lognormal IQR is symmetric in ln kappa, so
  p25/p75 come out at 5420/18400 against the published 5000/17000 (the IQR width is kept).

ShareGPT: K is the conversation so far and T the new user message. The published figures
(median T < 20, p90 T < 133; median K > 3.2K, p90 K > 30K; median kappa 100) cannot all hold
for a joint lognormal, where median kappa = median K / median T > 3200/20 = 160. What
resolves it is that a conversation's first request has no history: K = 0 and kappa = 0.
With ~685k turns (user + assistant) over 90k conversations there are 685k / 2 / 90k = 3.8
user turns per conversation, so a share ``f = 90k / 342.5k = 0.263`` of requests are first
turns. Targets, just inside the published bounds: T median 19, p90 130; K median 3300,
p90 31000; kappa median 100.

- T (all requests): ``s_T = ln(130/19) / z(0.9) = 1.501``, median 19.
- K of the other requests (share 1 - f) is lognormal; the overall median and p90 sit at its
  quantiles ``a = (0.5 - f)/(1 - f) = 0.322`` and ``b = (0.9 - f)/(1 - f) = 0.864``:
  ``s_K = ln(31000/3300) / (z(b) - z(a)) = 2.240 / 1.562 = 1.433``,
  ``mu_K = ln 3300 - s_K z(a) = 8.766``.
- kappa of those requests: ``mu_kappa = mu_K - ln 19 = 5.821`` and its a-quantile is 100:
  ``s_kappa = (ln 100 - mu_kappa) / z(a) = 2.625``. That fixes
  ``corr(ln K, ln T) = (s_K^2 + s_T^2 - s_kappa^2) / (2 s_K s_T) = -0.60`` (long histories go
  with short follow-up messages) and ``corr(ln T, ln kappa) = (rho s_K - s_T)/s_kappa = -0.90``.
- Not matched: the published share of kappa above 1000 is 20%; this model gives 25%
  (``(1 - f) (1 - Phi((ln 1000 - mu_kappa)/s_kappa))``), the price of fitting the medians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, get_args

import numpy as np

from kvroof.errors import KvroofError
from kvroof.workload.records import Workload

__all__ = ["KINDS", "SyntheticKind", "SyntheticModel", "context_cut", "model", "synthesize"]

SyntheticKind = Literal["sharegpt", "narrativeqa", "docfinqa"]
KINDS: tuple[str, ...] = get_args(SyntheticKind)

_Z = NormalDist().inv_cdf


@dataclass(frozen=True)
class SyntheticModel:
    """Parameters of one synthetic workload (natural logs of token counts)."""

    kind: str
    mu_t: float
    sigma_t: float
    mu_kappa: float
    sigma_kappa: float
    corr: float
    """Correlation of ln T and ln kappa."""
    first_turn_share: float
    """Share of requests with K = 0 (ShareGPT's first turns)."""
    targets: dict[str, float]
    """The published (or just-inside-the-bound) figures the parameters come from."""

    def kappa_quantile(self, p: float) -> float:
        """The model's kappa_ratio quantile (exact, before rounding T and K)."""
        f = self.first_turn_share
        if p <= f:
            return 0.0
        return math.exp(self.mu_kappa + self.sigma_kappa * _Z((p - f) / (1 - f)))

    def kappa_share_above(self, kappa: float) -> float:
        """The model's share of requests with kappa_ratio above ``kappa`` (> 0)."""
        z = (math.log(kappa) - self.mu_kappa) / self.sigma_kappa
        return (1 - self.first_turn_share) * (1 - NormalDist().cdf(z))


def _document_model(kind: str, k_median: float, k_lo: float, k_hi: float,
                    kappa_median: float, kappa_p25: float, kappa_p75: float) -> SyntheticModel:
    sigma_k = math.log(k_hi / k_lo) / (2 * _Z(0.95))
    sigma_kappa = math.log(kappa_p75 / kappa_p25) / (2 * _Z(0.75))
    sigma_t = math.sqrt(sigma_kappa**2 - sigma_k**2)
    return SyntheticModel(
        kind=kind,
        mu_t=math.log(k_median / kappa_median),
        sigma_t=sigma_t,
        mu_kappa=math.log(kappa_median),
        sigma_kappa=sigma_kappa,
        corr=-sigma_t / sigma_kappa,
        first_turn_share=0.0,
        targets={"cached_median": k_median, "cached_p5": k_lo, "cached_p95": k_hi,
                 "kappa_median": kappa_median, "kappa_p25": kappa_p25,
                 "kappa_p75": kappa_p75},
    )


def _sharegpt_model() -> SyntheticModel:
    f = 90_000 / (685_000 / 2)  # first user turns / all user turns
    t_median, t_p90 = 19.0, 130.0
    k_median, k_p90 = 3300.0, 31_000.0
    kappa_median = 100.0
    sigma_t = math.log(t_p90 / t_median) / _Z(0.9)
    z_a = _Z((0.5 - f) / (1 - f))
    z_b = _Z((0.9 - f) / (1 - f))
    sigma_k = math.log(k_p90 / k_median) / (z_b - z_a)
    mu_k = math.log(k_median) - sigma_k * z_a
    mu_kappa = mu_k - math.log(t_median)
    sigma_kappa = (math.log(kappa_median) - mu_kappa) / z_a
    rho = (sigma_k**2 + sigma_t**2 - sigma_kappa**2) / (2 * sigma_k * sigma_t)
    return SyntheticModel(
        kind="sharegpt",
        mu_t=math.log(t_median),
        sigma_t=sigma_t,
        mu_kappa=mu_kappa,
        sigma_kappa=sigma_kappa,
        corr=(rho * sigma_k - sigma_t) / sigma_kappa,
        first_turn_share=f,
        targets={"new_median": t_median, "new_p90": t_p90, "cached_median": k_median,
                 "cached_p90": k_p90, "kappa_median": kappa_median},
    )


def model(kind: str) -> SyntheticModel:
    """The parameters of a synthetic workload kind (derivations in the module docstring)."""
    if kind == "sharegpt":
        return _sharegpt_model()
    if kind == "narrativeqa":
        return _document_model(kind, 57_000, 15_000, 190_000, 5000, 2400, 11_000)
    if kind == "docfinqa":
        return _document_model(kind, 167_000, 60_000, 450_000, 10_000, 5000, 17_000)
    raise KvroofError(f"unknown synthetic workload {kind!r} (expected one of {', '.join(KINDS)})")


MAX_REQUESTS = 100_000_000
"""About 2.4 GB of columns: more is almost certainly a typo."""


DEFAULT_MAX_CONTEXT = 131072
"""The 128K-token context of Llama-3.1, DeepSeek-V3 and YaRN-extended Qwen3: no request of a
synthetic workload is longer by default (a lognormal tail would otherwise draw K of millions)."""


def synthesize(kind: str, n: int, seed: int = 0,
               max_context: int | None = DEFAULT_MAX_CONTEXT) -> Workload:
    """``n`` synthetic requests of ``kind`` (sharegpt, narrativeqa, docfinqa), reproducible
    from ``seed``. Output lengths, arrival times and group ids are unknown (not published).

    A request with ``T + K`` above ``max_context`` (``None``: no cap) has its K cut to
    ``max_context - T`` (and T to ``max_context`` if T alone exceeds it); the workload's
    source says how many were cut."""
    params = model(kind)
    if max_context is not None and (isinstance(max_context, bool)
                                    or not isinstance(max_context, int) or max_context < 2):
        raise KvroofError(f"max_context must be an integer of at least 2 tokens, got "
                          f"{max_context!r}")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_REQUESTS:
        raise KvroofError(f"number of requests must be an integer from 1 to {MAX_REQUESTS:,}, "
                          f"got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise KvroofError(f"seed must be a non-negative integer, got {seed!r}")
    rng = np.random.default_rng(seed)
    z_t = rng.standard_normal(n)
    z_kappa = params.corr * z_t + math.sqrt(1 - params.corr**2) * rng.standard_normal(n)
    new = np.maximum(1, np.rint(np.exp(params.mu_t + params.sigma_t * z_t))).astype(np.int64)
    kappa = np.exp(params.mu_kappa + params.sigma_kappa * z_kappa)
    cached = np.rint(kappa * new).astype(np.int64)
    if params.first_turn_share > 0:
        cached[rng.random(n) < params.first_turn_share] = 0
    capped_note = ""
    if max_context is not None:
        too_long = new + cached > max_context
        new = np.minimum(new, max_context)
        cached = np.minimum(cached, max_context - new)
        count = int(too_long.sum())
        capped_note = (f"; {count:,} of {n:,} ({100 * count / n:.1f}%){_CUT_TO}"
                       f"{max_context:,}-token context")
    return Workload.from_columns(
        new,
        cached,
        name=f"synthetic-{kind}",
        synthetic=True,
        source=(
            f"SYNTHETIC: {n} requests drawn (seed {seed}) from a lognormal model of the "
            f"published {kind} statistics (kvroof.workload.synth); not measured "
            f"data{capped_note}"
        ),
    )


_CUT_TO = " cut to a "


def context_cut(workload: Workload) -> str | None:
    """What :func:`synthesize` says it cut to the context, as the last part of the workload's
    source ("13,092 of 20,000 (65.5%) cut to a 131,072-token context"), or None where it cut
    nothing or the workload was not drawn with a cap."""
    last = workload.source.rsplit("; ", 1)[-1]
    return last if workload.synthetic and _CUT_TO in last else None
