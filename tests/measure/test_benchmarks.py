"""The benchmarks themselves, run on the CPU with tiny settings (a few seconds in all), and the
`kvroof measure` command line. Skipped as a whole when torch is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip(
    "torch", reason="torch is not installed: `pip install 'kvroof[measure]'` runs these tests"
)

from kvroof.cli import main  # noqa: E402
from kvroof.measure import (  # noqa: E402
    ComputeRow,
    ComputeSettings,
    LinkRow,
    LinkSettings,
    PrefillRow,
    PrefillSettings,
    layer_shape,
    machine_info,
    pick_device,
    read_results,
    read_results_dir,
    run_compute,
    run_link,
    run_prefill,
)
from kvroof.specs.registry import Registry  # noqa: E402


def test_link_on_cpu(registry: Registry) -> None:
    settings = LinkSettings(sizes=(4096, 65536, 2**20), warmup=0, repeats=2, max_seconds=0.05,
                            block_tokens=(16, 32), chunk_bytes=2**20)
    result = run_link(registry.model("llama-3.1-8b"), "cpu", settings)
    rows = [r for r in result.rows if isinstance(r, LinkRow)]
    # 2 directions x 3 sizes, one copy of the chunked total, 2 chunked patterns; pageable only
    assert len(rows) == 9 and not any(r.pinned for r in rows)
    chunked = [r for r in rows if r.pattern == "chunked"]
    # llama-3.1-8b: 4096 B per token per layer, 32 layers; the largest block (32 tokens) fixes
    # the chunk at 32 tokens: 32 x 32 x 4096 B = 4 MiB, in 64 copies of 16 x 4096 B or 32 of
    # 32 x 4096 B
    assert [(r.copies, r.bytes_per_copy, r.bytes_total) for r in chunked] == [
        (64, 65536, 4 * 2**20), (32, 131072, 4 * 2**20)
    ]
    assert all(r.bandwidth == pytest.approx(r.bytes_total / r.median_s) for r in rows)
    fits = result.summary["fits"]
    assert [(f["direction"], f["pinned"], f["points"]) for f in fits] == [
        ("h2d", False, 3), ("d2h", False, 3)
    ]
    assert "skipped" in result.summary["all_gpus"]


def test_compute_on_cpu(registry: Registry) -> None:
    settings = ComputeSettings(tokens=(16, 32), dtypes=("bf16", "fp8"), scale=16, warmup=0,
                               repeats=2, max_seconds=0.05)
    h200 = registry.accelerator("h200")
    result = run_compute(registry.model("llama-3.1-8b"), "cpu", settings, h200)
    rows = [r for r in result.rows if isinstance(r, ComputeRow)]
    assert [(r.dtype, r.T, r.hidden, r.intermediate) for r in rows] == [
        ("bf16", 16, 256, 896), ("bf16", 32, 256, 896)  # 4096 / 16 and 14336 / 16
    ]
    row = rows[0]
    assert row.flops == 2 * 16 * 256 * 896
    assert row.achieved_flops == pytest.approx(row.flops / row.median_s)
    assert row.peak_flops == 989e12  # hardware_specs/accelerators/h200.yaml, bf16 dense
    assert row.efficiency == pytest.approx(row.achieved_flops / 989e12)
    (skip,) = result.summary["skipped"]
    assert skip["dtype"] == "fp8" and "needs a CUDA device" in skip["reason"]


def test_prefill_on_cpu(registry: Registry) -> None:
    model = registry.model("llama-3.1-8b")
    settings = PrefillSettings(tokens=(8, 16), cached=(16, 64), scale=16, max_layers=1,
                               warmup=0, repeats=2, max_seconds=0.05)
    result = run_prefill(model, "cpu", settings)
    rows = [r for r in result.rows if isinstance(r, PrefillRow)]
    assert [(r.T, r.K) for r in rows] == [(8, 16), (8, 64), (16, 16), (16, 64)]
    shape, _ = layer_shape(model, 16)
    for row in rows:
        assert (row.layers_run, row.layers_model) == (1, 32)
        # one layer of 2 x 2 KV heads x 32 head_dim x 2 B = 256 B per token
        assert row.kv_bytes == row.K * 256
        assert row.flops == shape.flops(row.T, row.K)
        assert row.p_oh == pytest.approx(row.transfer_s / row.compute_s)
        assert row.overlap_s is None  # no CUDA streams on the CPU
    summary = result.summary
    assert [k["T"] for k in summary["kappa_crit"]] == [8, 16]
    assert summary["layers_reason"] == "max_layers = 1 (settings)"
    assert "enable_gqa" in summary["attention"] or summary["attention_rejected"]


def test_prefill_attention_matches_reference(registry: Registry) -> None:
    # _pick_attention only accepts a variant that matches a float32 reference; on the CPU
    # the first one (lower-right causal bias with enable_gqa) must pass.
    from kvroof.measure.prefill import _pick_attention

    shape, _ = layer_shape(registry.model("llama-3.1-8b"), 16)
    mask_kind, gqa, rejected = _pick_attention(torch, shape, "cpu")
    assert (mask_kind, gqa, rejected) == ("causal_lower_right", True, [])


def test_machine_info_cpu() -> None:
    info = machine_info("cpu")
    assert info["device"] == "cpu" and info["torch_version"] == str(torch.__version__)
    assert info["host_memory_bytes"] is None or info["host_memory_bytes"] > 0
    assert info["timestamp_utc"].endswith("+00:00")
    assert pick_device("cpu") == "cpu"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_link_quick(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "measure", "link", "--quick", "--device", "cpu", "--quiet",
                         "-o", str(tmp_path))
    assert code == 0, err
    assert err == ""  # --quiet: no progress bar
    assert "link: wrote" in out and "h2d pageable" in out
    results = read_results_dir(tmp_path)
    assert set(results) == {"link"}
    header = results["link"].header
    assert header is not None
    assert header["settings"]["command"].startswith("kvroof measure link --device cpu")
    assert read_results(tmp_path / "link.csv").rows


def test_cli_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "measure", "prefill", "--model", "deepseek-v3", "--device",
                       "cpu", "-o", str(tmp_path))
    assert code == 2
    assert err == ("kvroof: error: deepseek-v3 uses MLA attention; only GQA models are "
                   "supported by the prefill benchmark, for now\n")
    afile = tmp_path / "file"
    afile.write_text("")
    code, _, err = run(capsys, "measure", "link", "--device", "cpu", "-o", str(afile))
    assert code == 2 and err.endswith("exists and is not a folder\n")
    if not torch.cuda.is_available():
        code, _, err = run(capsys, "measure", "link", "--device", "cuda", "-o",
                           str(tmp_path / "out"))
        assert code == 2 and err.count("\n") == 1
        assert "sees no CUDA device; use --device cpu" in err
