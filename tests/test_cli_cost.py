"""`kvroof kappa` and `kvroof ttft`: the numbers equal the library's, JSON keys, bad flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.cost.kappa import kappa_crit
from kvroof.cost.timing import ttft


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_kappa_full_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kappa", "--model", "qwen3-235b-a22b", "--system", "dgx-h100",
                       "--tp", "8", "--new-tokens", "256", "--json")
    assert code == 0
    data = json.loads(out)
    expected = kappa_crit(deployment("qwen3-235b-a22b", system="dgx-h100", tp=8), 256)
    assert data["kappa_crit"] == pytest.approx(expected.kappa_crit)
    for key in ("kappa_crit", "kappa_model", "kappa_hw", "kv_bytes_per_token",
                "flops_per_token", "bandwidth", "compute", "mode"):
        assert key in data
    assert data["mode"] == "full"


def test_kappa_paper_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The paper's Qwen3-235B inputs: 2 x 22e9 / 192512 x 64e9 / 2000e12 = 7.31."""
    code, out, _ = run(capsys, "kappa", "--model", "Qwen/Qwen3-235B-A22B", "--accelerator",
                       "h100", "--mode", "paper", "--bandwidth", "64 GB/s", "--compute",
                       "2000 TFLOPS", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kappa_crit"] == pytest.approx(2 * 22e9 / 192512 * 64e9 / 2000e12)
    assert data["bandwidth"] == 64e9 and data["compute"] == 2000e12


def test_kappa_never_transfer_bound(capsys: pytest.CaptureFixture[str]) -> None:
    """Llama-3.1-8B on one H100 at T = 8192: attention of 8,192 queries over each cached token
    costs more than loading it (the crossover ends near T = 3,500)."""
    code, out, _ = run(capsys, "kappa", "--model", "llama-3.1-8b", "--accelerator", "h100",
                       "--new-tokens", "8192", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["kappa_crit"] is None
    assert data["never_transfer_bound"] is True
    assert "never transfer-bound" in data["reason"]


def test_kappa_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "kappa", "--model", "llama-3.1-70b", "--accelerator", "h100",
                       "--tp", "4", "--kv-dtype", "fp8")
    assert code == 0
    assert "kappa_crit" in out and "163.8 kB" in out  # fp8 halves 327,680 B


def test_ttft_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ttft", "--model", "qwen3-235b-a22b", "--system", "dgx-h100",
                       "--tp", "8", "--new-tokens", "64", "--cached-tokens", "65536",
                       "--overlap", "layerwise", "--json")
    assert code == 0
    data = json.loads(out)
    expected = ttft(deployment("qwen3-235b-a22b", system="dgx-h100", tp=8), 64, 65536,
                    "layerwise")
    assert data["ttft_s"] == pytest.approx(expected.ttft)
    for key in ("ttft_s", "compute_s", "transfer_s", "exposed_transfer_s", "p_oh",
                "transfer_share", "bound"):
        assert key in data
    assert data["bound"] == "transfer"


def test_ttft_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ttft", "--model", "llama-3.1-8b", "--accelerator", "b200",
                       "--new-tokens", "512", "--cached-tokens", "4096")
    assert code == 0
    assert "TTFT" in out and "bound" in out and " ms" in out


def test_kappa_refuses_what_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3 on one H100: 672.9 GB of FP8 weights (671B parameters at 1 B, embedding and
    head at 2 B) against 80 GB x 0.9 = 72 GB usable."""
    code, out, err = run(capsys, "kappa", "--model", "deepseek-v3", "--accelerator", "h100")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "does not fit" in err and "672.9 GB" in err and "72 GB usable" in err
    assert "TP 16" in err  # what would fit
    # On 8x H200 (141 GB each) it fits.
    code, out, _ = run(capsys, "kappa", "--model", "deepseek-v3", "--system", "hgx-h200",
                       "--tp", "8")
    assert code == 0 and "kappa_crit" in out
    # Paper mode is the paper's formula: it warns and computes.
    code, out, err = run(capsys, "kappa", "--model", "deepseek-v3", "--accelerator", "h100",
                         "--mode", "paper")
    assert code == 0 and "does not fit" in err


def test_kappa_shows_both_regimes(capsys: pytest.CaptureFixture[str]) -> None:
    """Alone by default with the full-iteration value beside it (8,192 tokens), and the other
    way round with --iteration-tokens; the JSON carries both."""
    base = ["kappa", "--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--tp", "8",
            "--new-tokens", "128"]
    code, out, _ = run(capsys, *base)
    assert code == 0 and "request alone" in out and "iteration of 8192 tokens" in out
    code, out, _ = run(capsys, *base, "--json")
    data = json.loads(out)
    alone = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8)
    busy = deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, iteration_tokens=8192)
    assert data["regime"] == "alone" and data["iteration_tokens"] is None
    assert data["kappa_crit"] == pytest.approx(kappa_crit(alone, 128).kappa_crit)
    assert data["other_regime"]["kappa_crit"] == pytest.approx(kappa_crit(busy, 128).kappa_crit)
    assert data["other_regime"]["kappa_crit"] < data["kappa_crit"]
    # the roofline's weight reads: shared by 8,192 tokens instead of read for 128 alone, they
    # bound compute far less, and kappa_crit falls more than tenfold
    code, out, _ = run(capsys, *base, "--compute-model", "roofline", "--json")
    roofline = json.loads(out)
    assert roofline["other_regime"]["kappa_crit"] < roofline["kappa_crit"] / 10
    code, out, _ = run(capsys, *base, "--iteration-tokens", "4096", "--json")
    data = json.loads(out)
    assert data["regime"] == "iteration" and data["iteration_tokens"] == 4096
    assert data["other_regime"]["regime"] == "alone"


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--iteration-tokens", "64"],
         "--iteration-tokens: 64.0 is fewer than the request's new tokens"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--iteration-tokens", "inf"],
         "argument --iteration-tokens: expected a whole number of tokens, got 'inf'"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--iteration-tokens", "0"],
         "argument --iteration-tokens: must be at least 1, got 0"),
        (["ttft", "--model", "qwen3-32b", "--accelerator", "h100", "--new-tokens", "10",
          "--cached-tokens", "3", "--iteration-tokens", "nan"],
         "argument --iteration-tokens: expected a whole number of tokens"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--token-budget", "0"],
         "--token-budget: must be at least 1"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--tp", "3"],
         "--tp: 3 does not divide the 64 attention heads"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--tp", "1000000000"],
         "--tp: 1000000000 does not divide"),
        (["kappa", "--model", "qwen3-235b-a22b", "--system", "dgx-h100", "--tp", "16"],
         "--tp: 16 exceeds the 8 GPUs"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--weight-dtype", "fp7"],
         "invalid choice"),
        (["kappa", "--model", "qwen3-32b", "--system", "gh200", "--host-memory-locality",
          "remote"], "--host-memory-locality: gh200 has one socket"),
    ],
)
def test_new_settings_bad_input(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert fragment in err, err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["kappa", "--model", "qwen9", "--accelerator", "h100"], "unknown model 'qwen9'"),
        (["kappa", "--model", "qwen3-32b", "--system", "nope"], "unknown system 'nope'"),
        (["kappa", "--model", "qwen3-32b"], "give --system or --accelerator"),
        (["kappa", "--model", "qwen3-32b", "--system", "dgx-h100", "--accelerator", "h100"],
         "not both"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--bandwidth", "fast"],
         "--bandwidth: 'fast' is not a number"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--tp", "0"], "--tp:"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--compute-efficiency",
          "1.5"], "--compute-efficiency: must be in (0, 1]"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--new-tokens", "0"],
         "argument --new-tokens: must be at least 1, got 0"),
        (["kappa", "--model", "qwen3-32b", "--accelerator", "h100", "--mode", "both"],
         "invalid choice"),
        (["ttft", "--model", "qwen3-32b", "--accelerator", "h100", "--new-tokens", "1",
          "--cached-tokens", "3", "--tier", "x"], "--tier"),
        (["ttft", "--model", "qwen3-32b", "--accelerator", "h100", "--new-tokens", "1",
          "--cached-tokens", "-3"], "argument --cached-tokens: must be at least 0, got -3"),
        (["ttft", "--model", "qwen3-32b", "--system", "dgx-h100", "--new-tokens", "1",
          "--cached-tokens", "3", "--tier", "tape=0.5"], "--tier: dgx-h100 has no tier 'tape'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert fragment in err, err


_LLAMA = ["--model", "llama-3.1-8b", "--accelerator", "h100"]


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        # token counts are whole numbers from 1 (new) or 0 (cached) to 1e15, named by flag
        (["kappa", *_LLAMA, "--new-tokens", "1e-320"],
         "argument --new-tokens: expected a whole number of tokens, got '1e-320'"),
        (["kappa", *_LLAMA, "--new-tokens", "16.5"],
         "argument --new-tokens: expected a whole number of tokens, got '16.5'"),
        (["kappa", *_LLAMA, "--new-tokens", "nan"], "expected a whole number of tokens"),
        (["ttft", *_LLAMA, "--new-tokens", "0", "--cached-tokens", "16384"],
         "argument --new-tokens: must be at least 1, got 0"),
        (["ttft", *_LLAMA, "--new-tokens", "99999999999999999999999", "--cached-tokens", "5"],
         "argument --new-tokens: at most 1e+15 tokens"),
        (["kappa", *_LLAMA, "--token-budget", "100.5"],
         "argument --token-budget: expected a whole number of tokens, got '100.5'"),
        (["kappa", *_LLAMA, "--iteration-tokens", "0"],
         "argument --iteration-tokens: must be at least 1, got 0"),
        # shares too small to compute with (a subnormal one overflowed to "never transfer-bound")
        (["kappa", *_LLAMA, "--link-efficiency", "1e-310"],
         "--link-efficiency: must be at least 1e-09"),
        (["ttft", *_LLAMA, "--new-tokens", "16", "--cached-tokens", "16",
          "--compute-efficiency", "1e-320"], "--compute-efficiency: must be at least 1e-09"),
        # an overflow inside the model is an error, never NaN read as "never transfer-bound"
        (["kappa", *_LLAMA, "--latency", "1e300 s"],
         "kappa_crit: not computable for llama-3.1-8b"),
        # paper mode has no T: a --new-tokens was ignored without a word
        (["kappa", *_LLAMA, "--mode", "paper", "--new-tokens", "512"],
         "--new-tokens: paper mode does not depend on it"),
        (["kappa", *_LLAMA, "--mode", "paper", "--iteration-tokens", "8192"],
         "--iteration-tokens: paper mode does not depend on it"),
        (["kappa", *_LLAMA, "--mode", "paper", "--token-budget", "4096"],
         "--token-budget: paper mode does not depend on it"),
        # a layer-kind setting for a model without those layers was ignored without a word
        (["kappa", *_LLAMA, "--mla", "absorbed"], "--mla: llama-3.1-8b has no MLA layers"),
        (["kappa", *_LLAMA, "--mla-tp-load", "rank0-broadcast"],
         "--mla-tp-load: llama-3.1-8b has no MLA layers"),
        (["ttft", *_LLAMA, "--new-tokens", "5", "--cached-tokens", "6", "--sparse-load", "0.5"],
         "--sparse-load: llama-3.1-8b has no DeepSeek Sparse Attention layers"),
        (["kappa", *_LLAMA, "--local-kv", "all"],
         "--local-kv: llama-3.1-8b has no sliding-window or chunked layers"),
        # a tier given twice kept the last value without a word
        (["ttft", "--model", "llama-3.1-8b", "--system", "dgx-h100", "--new-tokens", "5",
          "--cached-tokens", "6", "--tier", "local-nvme=0.5", "--tier", "local-nvme=0.6"],
         "--tier: tier 'local-nvme' given twice"),
        # no abbreviated flags: ttft has no --mode, and --mode is not --model
        (["ttft", *_LLAMA, "--mode", "paper", "--new-tokens", "5", "--cached-tokens", "6"],
         "unrecognized arguments: --mode paper"),
    ],
)
def test_bad_numbers_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    """Inputs a sweep found accepted, misreported or answered wrongly (issue 12, section 1)."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "", (code, out)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert fragment in err, err


def test_other_regime_holds_the_recomputed_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    """T = 9,000 on K = 100 with 256-token reuse blocks computes 9,100 tokens (the 100 cached
    ones are not a whole block), more than the 8,192-token budget: the other regime's iteration
    holds those 9,100 (it was refused as an --iteration-tokens the user never gave)."""
    code, out, err = run(capsys, "ttft", *_LLAMA, "--new-tokens", "9000", "--cached-tokens",
                         "100", "--reuse-block-tokens", "256", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["computed_tokens"] == 9100 and data["other_regime"]["iteration_tokens"] == 9100


def test_minus_zero_cached_tokens_is_zero(capsys: pytest.CaptureFixture[str]) -> None:
    """`--cached-tokens -0` is 0 (it printed "K = -0 cached")."""
    code, out, err = run(capsys, "ttft", *_LLAMA, "--new-tokens", "16", "--cached-tokens", "-0")
    assert code == 0 and "K = 0 cached (K/T = 0)" in out, err


def test_numpy_warnings_are_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A numpy floating-point warning inside a command (here an exp overflowing at a link of
    1e-300 GB/s) ends it with one error line, exit 2, and no figure, instead of a warning
    beside a figure."""
    target = tmp_path / "c.png"
    code, out, err = run(capsys, "plot", "ceilings", *_LLAMA, "--bandwidth", "1e-300 GB/s",
                         "-o", str(target))
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "out of the range kvroof can compute with (overflow encountered" in err
    assert not target.exists()


def test_family_settings_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """--local-kv and --sparse-load reach the deployment (the library's numbers, printed)."""
    code, out, _ = run(capsys, "kappa", "--model", "llama-4-scout-17b-16e", "--system",
                       "dgx-h100", "--tp", "8", "--local-kv", "all", "--json")
    assert code == 0
    want = kappa_crit(deployment("llama-4-scout-17b-16e", system="dgx-h100", tp=8,
                                 local_kv="all"), 128)
    assert json.loads(out)["kappa_crit"] == pytest.approx(want.kappa_crit)
    code, out, _ = run(capsys, "ttft", "--model", "deepseek-v3.2", "--system", "hgx-h200",
                       "--tp", "8", "--new-tokens", "128", "--cached-tokens", "40960",
                       "--sparse-load", "0.25", "--json")
    assert code == 0
    dep = deployment("deepseek-v3.2", system="hgx-h200", tp=8, sparse_load=0.25)
    assert json.loads(out)["ttft_s"] == pytest.approx(float(ttft(dep, 128, 40960).ttft))


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--sparse-load", "lots"], "--sparse-load: expected all or a share"),
    (["--sparse-load", "1.5"], "--sparse-load: expected 'all' or a share in (0, 1]"),
    (["--local-kv", "window"], "invalid choice"),
])
def test_bad_family_flags(capsys: pytest.CaptureFixture[str], argv: list[str],
                          fragment: str) -> None:
    code, _, err = run(capsys, "kappa", "--model", "gemma-3-27b", "--system", "dgx-h100",
                       *argv)
    assert code == 2
    assert fragment in err and "Traceback" not in err


def test_engine_flag_sets_the_profile_and_flags_override(
        capsys: pytest.CaptureFixture[str]) -> None:
    base = ("ttft", "--model", "llama-3.1-8b", "--accelerator", "h100", "--new-tokens", "16",
            "--cached-tokens", "1000", "--json")
    code, out, _ = run(capsys, *base, "--engine", "lmcache-0.3")
    assert code == 0
    data = json.loads(out)
    dep = deployment("llama-3.1-8b", accelerator="h100", engine="lmcache-0.3")
    assert data["engine"] == "lmcache-0.3"
    assert data["ttft_s"] == pytest.approx(float(ttft(dep, 16, 1000).ttft))
    assert (data["loaded_tokens"], data["computed_tokens"]) == (768, 16 + 232)  # 256-token chunks
    code, out, _ = run(capsys, *base, "--engine", "lmcache-0.3", "--reuse-block-tokens", "0",
                       "--latency", "5 us", "--write-back")
    overridden = deployment("llama-3.1-8b", accelerator="h100", engine="lmcache-0.3",
                            reuse_block_tokens=1, latency=5e-6, write_back=True)
    assert json.loads(out)["ttft_s"] == pytest.approx(float(ttft(overridden, 16, 1000).ttft))
    code, out, _ = run(capsys, *base)
    assert json.loads(out)["engine"] is None
    plain = deployment("llama-3.1-8b", accelerator="h100")
    assert json.loads(out)["ttft_s"] == pytest.approx(float(ttft(plain, 16, 1000).ttft))


def test_unknown_engine_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "kappa", "--model", "llama-3.1-8b", "--accelerator", "h100",
                       "--engine", "vllm-9")
    assert code == 2
    assert err.startswith("kvroof: error: --engine: unknown engine 'vllm-9'")
    assert err.count("\n") == 1
