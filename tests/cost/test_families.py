"""Attention families (issue 11): linear, sparse, chunked and shared layers.

Hand derivations at a chosen (T, K) for one model of each new kind (numbers from its
config.json, written out in each test), property tests against independent counts, and
kappa_crit against the closed form (where affine) and token-by-token scans (where not)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvroof.cost.deployment import Deployment, deployment
from kvroof.cost.flops import attention_pairs, prefill_flops
from kvroof.cost.iteration import IterationModel, iteration_cost
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.kv import kv_bytes, kv_bytes_per_token, state_bytes
from kvroof.cost.timing import compute_time
from kvroof.cost.transfer import kv_bytes_per_rank, load_bytes_per_rank, transfer_time
from kvroof.specs.model import ModelSpec
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


def h100(model: str | ModelSpec, **settings: object) -> Deployment:
    return deployment(model, accelerator="h100", registry=REG, **settings)


def h100_roofline(model: str | ModelSpec, **settings: object) -> Deployment:
    """An H100 deployment timed by the whole-model roofline, for the tests of the closed form
    and of the simulator's fast path (both are roofline formulas)."""
    return h100(model, compute_model="roofline", **settings)


# -- hand derivations ----------------------------------------------------------------------------
def test_linear_layers_by_hand_qwen3_next() -> None:
    """Qwen3-Next-80B-A3B (hidden 2048; Gated DeltaNet: 16 key heads, 32 value heads, 128 x
    128, conv kernel 4; full layers: 16 heads, 2 KV heads, head_dim 256) at T = 128, K = 5000.

    One Gated DeltaNet layer per new token: in_proj_qkvz 2 x 2048 x (2 x 16 x 128 + 2 x 32 x 128)
    = 50,331,648; in_proj_ba 2 x 2048 x 64 = 262,144; out_proj 2 x 4096 x 2048 = 16,777,216;
    convolution 2 x 8,192 channels x 4 = 65,536; core 32 x (64 x (6 x 128 + 4 x 128) + 6 x 128 x
    128) = 5,767,168 (derived in test_linear_core_by_hand): 73,203,712 in all, whatever K. The 12
    full layers score 128 x 5000 + 128 x 129 / 2 = 648,256 pairs each at 4 x 16 x 256 = 16,384
    FLOPs."""
    model = REG.model("qwen3-next-80b-a3b")
    per_layer = 50_331_648 + 262_144 + 16_777_216 + 65_536 + 5_767_168
    assert per_layer == 73_203_712
    for k in (0, 5000, 1_000_000):
        assert prefill_flops(model, 128, k).linear_attention == 36 * per_layer * 128
    assert prefill_flops(model, 128, 5000).attention_core == 12 * 16_384 * 648_256
    # The state is loaded once per request: 36 x 2,146,304 bytes (test_kv), then 24,576 per token.
    dep = h100(model)
    assert load_bytes_per_rank(dep, 5000) == 24_576 * 5000 + 77_266_944
    assert load_bytes_per_rank(dep, 0) == 0
    # TP 8 splits the value heads (32 / 8 = 4 a rank) and the 2 KV heads over 8 ranks (1/2 each)
    tp8 = h100(model, tp=8)
    assert load_bytes_per_rank(tp8, 5000) == 24_576 * 5000 / 2 + 77_266_944 / 8


def test_linear_core_by_hand() -> None:
    """The chunkwise gated delta rule as FLA runs it (fla/ops/gated_delta_rule/chunk.py
    chunk_gated_delta_rule_fwd), per chunk of c = 64 tokens and value head, d_k = d_v = 128:
    chunk_scaled_dot_kkt_fwd (beta k) k^T, a (c x d_k)(d_k x c) product, 2 c^2 d_k = 1,048,576;
    solve_tril inverts the unit-lower-triangular result (not counted); recompute_w_u_fwd
    w = A (beta k e^g) and u = A (beta v), (c x c)(c x d_k) and (c x c)(c x d_v) tile products
    (wy_fast.py recompute_w_u_fwd_kernel: tl.dot(b_A, ...)), 2 c^2 d_k + 2 c^2 d_v = 2,097,152;
    chunk_gated_delta_rule_fwd_h v_new = u - w h and h += k^T v_new, (c x d_k)(d_k x d_v) and
    (d_k x c)(c x d_v), 4 c d_k d_v = 4,194,304; chunk_fwd_o q h, (q k^T) v_new, 2 c d_k d_v +
    2 c^2 d_k + 2 c^2 d_v = 4,194,304. 11,534,336 a chunk, 180,224 a token, x 32 value heads =
    5,767,168 for Qwen3-Next; a decode's recurrent step reads, corrects and writes the d_k x d_v
    state, 3 x 2 d_k d_v = 98,304 a head. Kimi Linear's KDA (chunk_kda) runs the same products
    with 32 heads of 128 x 128."""
    from kvroof.cost.groups import linear_core_flops
    from kvroof.specs.layers import LinearLayer

    per_chunk = (2 * 64**2 * 128 + 2 * 64**2 * (128 + 128) + 4 * 64 * 128 * 128
                 + 2 * 64 * 128 * 128 + 2 * 64**2 * (128 + 128))
    assert per_chunk == 11_534_336 and per_chunk // 64 == 180_224
    for name in ("qwen3-next-80b-a3b", "kimi-linear-48b-a3b"):
        layer = next(kind for _, kind in REG.model(name).layer_kinds if kind.kind == "linear")
        assert isinstance(layer, LinearLayer) and layer.num_value_heads == 32
        assert linear_core_flops(layer) == 32 * 180_224 == 5_767_168
        assert linear_core_flops(layer, decode=True) == 32 * 98_304


def test_sparse_layers_by_hand_deepseek_v32() -> None:
    """DeepSeek-V3.2 (61 DSA layers; MLA 128 heads, kv_lora 512, rope 64; indexer 64 heads x 128,
    top-k 2048) at T = 128, K = 10,000.

    Main attention: every new query sees min(p + 1, 2048) = 2048 keys (K >= 2048), 128 x 2048 =
    262,144 pairs per layer, absorbed at 2 x 128 x (512 + 64) + 2 x 128 x 512 = 278,528 FLOPs.
    Indexer: every causal pair, 128 x 10,000 + 128 x 129 / 2 = 1,288,256 per layer at 2 x 64 x
    (128 + 1) = 16,512 FLOPs, plus per token wq_b 2 x 1536 x 64 x 128 + wk 2 x 7168 x 128 +
    weights_proj 2 x 7168 x 64 = 27,918,336."""
    model = REG.model("deepseek-v3.2")
    flops = prefill_flops(model, 128, 10_000)
    assert flops.attention_core == 61 * 262_144 * 278_528
    assert 2 * 1536 * 64 * 128 + 2 * 7168 * 128 + 2 * 7168 * 64 == 27_918_336
    assert flops.indexer == 61 * (16_512 * 1_288_256 + 27_918_336 * 128)
    # Loads: 1,152 B of latent + 132 B of indexer key per token per layer; a selected share s of
    # the latents (what-if) keeps the indexer keys whole: 61 x (132 + 0.25 x 1,152) = 25,620.
    assert load_bytes_per_rank(h100(model), 10_000) == 61 * 1284 * 10_000
    assert load_bytes_per_rank(h100(model, sparse_load=0.25), 10_000) == 25_620 * 10_000


def test_chunked_layers_by_hand_llama4_scout() -> None:
    """Llama-4-Scout (36 chunked layers of C = 8192, 12 NoPE full layers; 40 heads, 8 KV heads,
    head_dim 128) at T = 128, K = 10,000.

    A chunked layer's queries at p = 10,000 .. 10,127 see (p mod 8192) + 1 = 1809 .. 1936 keys:
    128 x (1809 + 1936) / 2 = 239,680 pairs; a full layer 128 x 10,000 + 8,256 = 1,288,256; each
    at 4 x 40 x 128 = 20,480 FLOPs. A load brings back every token of the full layers and the
    current chunk's 10,000 mod 8192 = 1808 of the chunked ones (4,096 B per token per layer), or
    every token with local_kv all."""
    model = REG.model("llama-4-scout-17b-16e")
    assert prefill_flops(model, 128, 10_000).attention_core == 20_480 * (
        12 * 1_288_256 + 36 * 239_680)
    held = h100(model)
    assert load_bytes_per_rank(held, 10_000) == 4096 * (12 * 10_000 + 36 * 1808)
    every = h100(model, local_kv="all")
    assert load_bytes_per_rank(every, 10_000) == 4096 * 48 * 10_000
    # What must fit: the current chunk can fill up to 8,192 tokens of each chunked layer.
    assert kv_bytes_per_rank(held, 8192) == 4096 * 12 * 8192  # 8192 mod 8192 = 0 held now ...
    from kvroof.cost.memory_fit import memory_fit
    assert memory_fit(held).kv_reserve == 4096 * 48 * 8192  # ... but up to 8192 before


def test_shared_layers_by_hand_gemma4_e2b() -> None:
    """Gemma-4-E2B: layers 0-14 keep KV (12 sliding of 512 tokens, 1 KV head x 256; 3 full, 1 x
    512), layers 15-34 reuse layers 13 and 14. For K = 1000: 3 x 2 x 512 x 2 B x 1000 + 12 x 2 x
    256 x 2 B x min(1000, 511) = 6,144,000 + 6,279,168 bytes (a window-512 query sees its own key
    and 511 earlier ones), nothing for the 20 sharing layers.
    Their attention costs as their source's: 16 + 12 sliding layers and 4 + 3 full layers score
    pairs at 4 x 8 x 256 = 8,192 and 4 x 8 x 512 = 16,384 FLOPs; a sharing layer projects only
    its query and output (2 x 2 x 1536 x 8 x 256 = 12,582,912 FLOPs a token for a sliding one)."""
    model = REG.model("gemma-4-e2b")
    assert kv_bytes(model, 1000) == 6_144_000 + 6_279_168
    t, k = 64, 1000
    sliding = attention_pairs(t, k, window=512)
    full = attention_pairs(t, k)
    assert prefill_flops(model, t, k).attention_core == 28 * 8192 * sliding + 7 * 16_384 * full
    from kvroof.cost.groups import layer_groups
    shared = {g.name: g for g in layer_groups(model)}["shared_sliding"]
    assert (shared.count, shared.projections, shared.kv_elements) == (16, 12_582_912, 0)


# -- properties ----------------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 10**7),
       name=st.sampled_from(["qwen3-next-80b-a3b", "kimi-linear-48b-a3b", "qwen3.5-27b"]))
def test_hybrid_bytes_are_full_layers_times_k_plus_state(k: int, name: str) -> None:
    """A hybrid's bytes for K cached tokens = the full-attention layers' bytes x K + the fixed
    state (the per-token and state figures are derived by hand in test_kv.FAMILIES)."""
    model = REG.model(name)
    assert kv_bytes(model, k) == kv_bytes_per_token(model) * k + state_bytes(model)


@settings(max_examples=30, deadline=None)
@given(t=st.integers(1, 4096), k1=st.integers(2048, 10**6), extra=st.integers(1, 10**6))
def test_sparse_attention_stops_growing_beyond_topk(t: int, k1: int, extra: int) -> None:
    """Beyond top-k cached tokens the main attention's FLOPs no longer grow; the indexer's grow
    by 61 layers x 16,512 FLOPs x T per cached token."""
    model = REG.model("deepseek-v3.2")
    a, b = prefill_flops(model, t, k1), prefill_flops(model, t, k1 + extra)
    assert a.attention_core == b.attention_core
    assert b.indexer - a.indexer == pytest.approx(61 * 16_512 * t * extra, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(t=st.integers(0, 300), k=st.integers(0, 2000), chunk=st.integers(1, 300))
def test_chunked_pairs_equal_a_brute_force_count(t: int, k: int, chunk: int) -> None:
    """Query at absolute position p sees floor(p / C) x C .. p: count them one by one."""
    brute = sum(p - (p // chunk) * chunk + 1 for p in range(k, k + t))
    assert attention_pairs(t, k, chunk=chunk) == brute


def test_chunked_arrays_broadcast() -> None:
    t = np.array([[1.0], [100.0]])
    k = np.array([0.0, 8191.0, 8192.0, 20_000.0])
    grid = attention_pairs(t, k, chunk=8192)
    assert grid.shape == (2, 4)
    assert grid[1, 3] == attention_pairs(100, 20_000, chunk=8192)


# -- kappa_crit ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "kimi-linear-48b-a3b",
                                  "qwen3.5-35b-a3b", "minimax-m2.5"])
@pytest.mark.parametrize("tp", [1, 8])
def test_hybrids_have_a_closed_form_equal_to_root_finding(name: str, tp: int) -> None:
    """A fixed state is a constant in the transfer, so the sides stay affine in K."""
    dep = h100_roofline(name, tp=tp)
    t = np.array([16.0, 128.0, 1024.0])
    closed = kappa_crit(dep, t)
    assert closed.method == "closed-form"
    numeric = kappa_crit(dep, t, "root-finding").kappa_crit
    np.testing.assert_allclose(numeric, closed.kappa_crit, rtol=1e-8)


def _last_compute_bound(dep: Deployment, t: float, top: int) -> int:
    """The last integer K in [1, top) at which compute exceeds transfer, by a scan."""
    ks = np.arange(1, top, dtype=float)
    below = np.asarray(transfer_time(dep, ks, t)) < np.asarray(compute_time(dep, t, ks))
    return int(ks[np.nonzero(below)[0][-1]]) if below.any() else 0


@pytest.mark.parametrize(("name", "settings"), [
    ("llama-4-scout-17b-16e", {"tp": 8}),
    ("llama-4-scout-17b-16e", {"tp": 8, "local_kv": "all"}),
    ("deepseek-v3.2", {"tp": 8}),
    ("deepseek-v3.2", {"tp": 8, "sparse_load": 0.3}),
    ("gemma-3-27b", {"tp": 1}),
    # the roofline: with the kernel tables gemma-4-e2b at T = 512 is never transfer-bound (each
    # cached token adds more measured attention time than it takes to load), so no K* to scan
    ("gemma-4-e2b", {"tp": 1, "compute_model": "roofline"}),
])
def test_root_finding_against_a_token_scan(name: str, settings: dict[str, object]) -> None:
    """K* is one past the last K at which prefill is compute-bound (a scan of every K up to
    twice K*); chunked layers make the sides saw-toothed, so K* is an integer there."""
    dep = h100(name, **settings)
    for t in (64, 512):
        k_star = float(kappa_crit(dep, t).crossover_tokens)
        assert np.isfinite(k_star)
        last = _last_compute_bound(dep, t, int(2 * k_star) + 20_000)
        assert last <= k_star <= last + 1, (name, t, last, k_star)


def test_saw_tooth_teeth_below_kappa_do_not_count() -> None:
    """A small chunked model whose chunked layers dominate the bytes: within each chunk the load
    grows past the compute and falls back at the chunk's end, so K is transfer-bound on
    stretches well below K*; kappa_crit is where it stays transfer-bound (the scan agrees)."""
    base = REG.model("llama-4-scout-17b-16e")
    layers = base.layers
    assert layers is not None
    small = base.model_copy(update={"layers": layers.model_copy(update={
        "kinds": {"chunked": layers.kinds["chunked"].model_copy(update={"chunk": 512})}})})
    dep = h100(small, tp=8, bandwidth=3e9)
    t = 32
    k_star = float(kappa_crit(dep, t).crossover_tokens)
    ks = np.arange(1, int(2 * k_star), dtype=float)
    bound = np.asarray(transfer_time(dep, ks, t)) >= np.asarray(compute_time(dep, t, ks))
    assert bound[ks < k_star].any() and (~bound[ks < k_star]).any()  # teeth below K*
    assert bound[ks >= k_star].all()
    assert not bound[int(k_star) - 2]  # the last compute-bound K is K* - 1


def test_sparse_share_moves_kappa() -> None:
    """Loading a selected share of the latents raises kappa_crit (less to load per token)."""
    t = 128
    full = kappa_crit(h100("deepseek-v3.2", tp=8), t).kappa_crit
    part = kappa_crit(h100("deepseek-v3.2", tp=8, sparse_load=0.1), t).kappa_crit
    assert part > full


def test_sparse_load_must_be_a_share() -> None:
    from kvroof.errors import KvroofError
    for bad in (0.0, 1.5, "some", True):
        with pytest.raises(KvroofError, match="sparse_load"):
            h100("deepseek-v3.2", sparse_load=bad)
    with pytest.raises(KvroofError, match="local_kv"):
        h100("gemma-3-27b", local_kv="window")


# -- the serving iteration ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["llama-4-scout-17b-16e", "deepseek-v3.2", "gemma-4-e2b",
                                  "qwen3-next-80b-a3b"])
def test_iteration_model_matches_iteration_cost(name: str) -> None:
    """The simulator's fast path (a roofline) equals iteration_cost's roofline."""
    dep = h100_roofline(name, tp=8) if name != "gemma-4-e2b" else h100_roofline(name)
    fast = IterationModel(dep)
    contexts = np.array([10.0, 3000.0, 9000.0, 20_000.0])
    sums = fast.capped_sums(contexts)
    flops_d, kv_d = fast.decode_batch(contexts.size, float(contexts.sum()), sums)
    flops_p, kv_p = fast.prefill_chunk(256, 5000.0)
    want = iteration_cost(dep, [256], [5000], contexts)
    got = fast.time(256 + contexts.size, flops_d + flops_p, kv_d + kv_p)
    assert got == pytest.approx(want.time, rel=1e-12)


def test_decode_sums_must_match_the_rules() -> None:
    from kvroof.errors import KvroofError
    fast = IterationModel(h100("gemma-4-e2b"))
    assert fast.caps == (("window", 512.0),) and fast.window == 512.0
    fast.decode_batch(2, 100.0, 100.0)
    chunked = IterationModel(h100("llama-4-scout-17b-16e", tp=8))
    assert chunked.window is None and chunked.caps == (("chunk", 8192.0),)
    with pytest.raises(KvroofError, match="capped_sums"):
        IterationModel(dataclasses.replace(h100("gemma-3-27b"))).decode_batch(
            1, 10.0, (1.0, 2.0))
