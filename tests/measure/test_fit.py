"""The pure parts of kvroof.measure (no torch needed): the latency + bandwidth fit, the measured
kappa_crit interpolation, the synthetic layer shapes, the layer count, progress and timer."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest

from kvroof.cost.kv import kv_bytes_per_token_per_layer
from kvroof.errors import KvroofError
from kvroof.measure import (
    PrefillSettings,
    Timer,
    choose_layers,
    ffn_width,
    fit_latency_bandwidth,
    layer_shape,
    measured_kappa_crit,
)
from kvroof.measure.progress import Progress
from kvroof.specs.registry import Registry

# 4 KiB ... 1 GiB in powers of 4: the full link sweep's sizes
SIZES = np.array([4096 * 4**i for i in range(10)], dtype=np.float64)
LATENCY, BANDWIDTH = 5e-6, 20e9  # the synthetic link: time = 5 us + bytes / 20 GB/s


def test_fit_recovers_exact_synthetic_link() -> None:
    seconds = LATENCY + SIZES / BANDWIDTH  # no noise: the fit must be exact to rounding
    fit = fit_latency_bandwidth(SIZES, seconds)
    assert fit.latency_s == pytest.approx(LATENCY, rel=1e-9)
    assert fit.bandwidth == pytest.approx(BANDWIDTH, rel=1e-9)
    assert fit.rel_rms < 1e-9 and fit.rel_max < 1e-9
    assert fit.points == 10
    # 64 copies moving 4 MiB: 64 x 5 us + 4,194,304 B / 20e9 B/s = 320 us + 209.7152 us
    assert fit.predict(4 * 2**20, copies=64) == pytest.approx(529.7152e-6, rel=1e-9)


def test_fit_recovers_noisy_synthetic_link() -> None:
    # 1% multiplicative Gaussian noise (seed 0). Over 200 seeds the worst errors were 2.2%
    # (latency) and 1.1% (bandwidth); the tolerances leave room above that.
    rng = np.random.default_rng(0)
    seconds = (LATENCY + SIZES / BANDWIDTH) * (1 + rng.normal(0.0, 0.01, SIZES.size))
    fit = fit_latency_bandwidth(SIZES, seconds)
    assert fit.latency_s == pytest.approx(LATENCY, rel=0.05)
    assert fit.bandwidth == pytest.approx(BANDWIDTH, rel=0.025)
    # the residuals are the noise: RMS near 1%, none far above 3 sigma
    assert 0.002 < fit.rel_rms < 0.02
    assert fit.rel_max < 0.04


def test_fit_shrinking_times_give_infinite_bandwidth() -> None:
    # the larger copy was faster (caches): the slope is negative, so no finite bandwidth
    fit = fit_latency_bandwidth([1e3, 1e6], [1e-5, 0.9e-5])
    assert fit.bandwidth == math.inf


@pytest.mark.parametrize(
    ("sizes", "seconds", "message"),
    [
        ([4096, 4096], [1e-6, 2e-6], "two different transfer sizes"),
        ([4096, 8192], [1e-6], "same length"),
        ([4096, 8192], [1e-6, 0.0], "positive and finite"),
    ],
)
def test_fit_rejects_bad_input(sizes: list[float], seconds: list[float], message: str) -> None:
    with pytest.raises(KvroofError, match=message):
        fit_latency_bandwidth(sizes, seconds)


def test_kappa_crit_log_linear_between_grid_points() -> None:
    # Hand-made series at T = 256: P_OH crosses 1 between K = 4096 (0.8) and 8192 (1.6).
    # share = (1 - 0.8) / (1.6 - 0.8) = 0.25, so log2 K* = 12 + 0.25 and K* = 2**12.25
    # = 4870.99; kappa_crit = K* / T = 19.027.
    kappa = measured_kappa_crit(256, [8192, 1024, 2048, 4096], [1.6, 0.25, 0.5, 0.8])
    assert kappa.status == "crossed"
    assert kappa.k_star == pytest.approx(2**12.25, rel=1e-12)
    assert kappa.kappa_crit == pytest.approx(4870.99 / 256, rel=1e-5)


def test_kappa_crit_first_upward_crossing_and_k_zero() -> None:
    # From K = 0 the interpolation is linear: P_OH 0 -> 2 over K 0 -> 1000 reaches 1 at 500.
    kappa = measured_kappa_crit(100, [0, 1000, 2000], [0.0, 2.0, 0.5])
    assert kappa.k_star == pytest.approx(500.0)
    assert kappa.kappa_crit == pytest.approx(5.0)


def test_kappa_crit_outside_the_grid() -> None:
    never = measured_kappa_crit(64, [1024, 2048], [0.1, 0.2])
    assert never.status == "never" and never.kappa_crit == math.inf and never.k_star is None
    below = measured_kappa_crit(64, [1024, 2048], [1.5, 3.0])
    assert below.status == "below-grid" and below.kappa_crit is None
    with pytest.raises(KvroofError, match="as many P_OH values"):
        measured_kappa_crit(64, [1024, 2048], [0.5])


def test_layer_shape_matches_registry_kv_bytes(registry: Registry) -> None:
    model = registry.model("llama-3.1-8b")
    shape, notes = layer_shape(model)
    # kvroof.cost: 2 x 8 KV heads x 128 x 2 B = 4096 B per token per layer (Llama-3.1-8B config)
    assert shape.kv_elements_per_token * 2 == kv_bytes_per_token_per_layer(model) == 4096
    assert (shape.hidden, shape.num_heads, shape.intermediate) == (4096, 32, 14336)
    assert notes == []


def test_layer_shape_quick_scale(registry: Registry) -> None:
    shape, notes = layer_shape(registry.model("llama-3.1-8b"), scale=16)
    # hidden 4096 / 16, FFN 14336 / 16, KV heads 8 / 4 and head_dim 128 / 4, group of 4 kept
    assert (shape.hidden, shape.intermediate) == (256, 896)
    assert (shape.num_heads, shape.num_kv_heads, shape.head_dim) == (8, 2, 32)
    assert shape.kv_elements_per_token == 4096 // 2 // 16  # KV bytes per token fall by 16
    assert "scaled down" in notes[0]
    with pytest.raises(KvroofError, match="must be a square"):
        layer_shape(registry.model("llama-3.1-8b"), scale=8)


def test_layer_shape_moe_uses_active_width(registry: Registry) -> None:
    model = registry.model("qwen3-30b-a3b")
    width, note = ffn_width(model)
    assert width == 8 * 768  # 8 experts per token x 768 (model_specs/qwen3-30b-a3b.yaml)
    assert note is not None and "active width 6144" in note
    shape, notes = layer_shape(model)
    assert shape.intermediate == 6144
    assert any("QK-norm" in n for n in notes)


def test_layer_shape_rejects_mla(registry: Registry) -> None:
    with pytest.raises(KvroofError) as caught:
        layer_shape(registry.model("deepseek-v3"))
    assert str(caught.value) == (
        "deepseek-v3 uses MLA attention; only GQA models are supported by the prefill "
        "benchmark, for now"
    )


def test_layer_flops_formula(registry: Registry) -> None:
    shape, _ = layer_shape(registry.model("llama-3.1-8b"))
    # T = 1, K = 0: projections 2 x (4096*4096 + 2*4096*1024 + 4096*4096) = 83,886,080;
    # FFN 6 x 4096 x 14336 = 352,321,536; attention 4 x 32 x 128 x 1 pair = 16,384
    assert shape.flops(1, 0) == 83_886_080 + 352_321_536 + 16_384
    # each extra cached token adds T pairs of 4 x 32 x 128 FLOP
    assert shape.flops(4, 10) - shape.flops(4, 0) == 4 * 10 * 4 * 32 * 128


def test_choose_layers_by_device_memory(registry: Registry) -> None:
    shape, _ = layer_shape(registry.model("llama-3.1-8b"))
    settings = PrefillSettings(tokens=(64, 2048), cached=(1024, 65536))
    # Per layer: 2 B x (218,112,000 weights + (65536 + 2048) x 2048 KV elements)
    # = 713,048,064 B. Activations: 2 x 2 B x 2048 x (6*4096 + 48*128 + 3*14336) = 603,979,776.
    # (10e9 x 0.8 - 603,979,776) / 713,048,064 = 10.37 -> 10 layers.
    assert shape.weight_elements == 218_112_000
    layers, reason = choose_layers(shape, settings, 32, device_free=10e9, host_free=1e12)
    assert layers == 10 and reason.startswith("device memory")
    layers, reason = choose_layers(shape, settings, 32, device_free=1e12, host_free=1e12)
    assert (layers, reason) == (32, "all 32 layers of the model")
    # host: 2 B x 65536 x 2048 = 268,435,456 B of KV per layer; 0.5 x 1e9 / that = 1.86 -> 1
    layers, reason = choose_layers(shape, settings, 32, device_free=1e12, host_free=1e9)
    assert layers == 1 and reason.startswith("host memory")
    with pytest.raises(KvroofError, match="not even one layer fits"):
        choose_layers(shape, settings, 32, device_free=1e9, host_free=1e12)


def test_progress_lines_and_quiet() -> None:
    stream = io.StringIO()
    progress = Progress("link", 10.0, stream=stream)
    assert progress.time_left() is None
    for _ in range(10):
        progress.advance(1.0, "step")
    progress.done()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("link [##")  # one line per tenth when not a terminal
    assert "elapsed" in lines[0] and "left" in lines[0] and lines[0].endswith("step")
    assert lines[-1].startswith("link done in")
    silent = io.StringIO()
    quiet = Progress("link", 1.0, quiet=True, stream=silent)
    quiet.advance(1.0)
    quiet.done()
    assert silent.getvalue() == ""


def test_timer_repeats_and_budget() -> None:
    calls: list[int] = []
    timing = Timer("cpu", warmup=2, repeats=4, max_seconds=10.0).measure(lambda: calls.append(1))
    assert len(calls) == 6 and timing.repeats == 4  # 2 warmup + 4 timed
    assert 0 <= timing.min_s <= timing.median_s
    # a zero budget stops after the minimum of three timed calls
    timing = Timer("cpu", warmup=0, repeats=50, max_seconds=0.0).measure(lambda: None)
    assert timing.repeats == 3
