"""Sizes bounded by what real models have (issue 24, item 2): a spec with 10**6 layers hung
``kvroof kappa`` for over a minute and 10**12 grew to 23 GB; now every size field has a ceiling
(kvroof.specs.base: MAX_LAYERS and friends) and is refused with an error naming file and
field, and layer counts are computed, not listed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvroof.errors import SpecError
from kvroof.specs.base import MAX_EXPERTS, MAX_HEADS, MAX_LAYERS, MAX_TOKENS, MAX_VOCAB, MAX_WIDTH
from kvroof.specs.loader import load_spec_file
from kvroof.specs.model import MoEFFN, SlidingWindow
from kvroof.specs.registry import Registry

MODEL = """\
spec: model
name: toy
num_layers: 4
hidden_size: 64
vocab_size: 100
attention: {kind: gqa, num_heads: 4, num_kv_heads: 2, head_dim: 16}
ffn: {kind: moe, num_experts: 8, experts_per_token: 2, expert_intermediate_size: 32}
sliding_window: {size: 16, period: 2}
max_context: 4096
sources: {default: written for this test}
"""

REG = Registry(use_env=False)


@pytest.mark.parametrize(("old", "field", "limit"), [
    ("num_layers: 4", "num_layers", MAX_LAYERS),
    ("hidden_size: 64", "hidden_size", MAX_WIDTH),
    ("vocab_size: 100", "vocab_size", MAX_VOCAB),
    ("num_heads: 4", "attention.num_heads", MAX_HEADS),
    ("head_dim: 16", "attention.head_dim", MAX_WIDTH),
    ("num_experts: 8", "ffn.num_experts", MAX_EXPERTS),
    ("expert_intermediate_size: 32", "ffn.expert_intermediate_size", MAX_WIDTH),
    ("size: 16", "sliding_window.size", MAX_TOKENS),
    ("period: 2", "sliding_window.period", MAX_LAYERS),
    ("max_context: 4096", "max_context", MAX_TOKENS),
])
def test_a_size_past_its_ceiling_names_the_field(tmp_path: Path, old: str, field: str,
                                                 limit: int) -> None:
    name = old.split(":")[0]
    path = tmp_path / "toy.yaml"
    path.write_text(MODEL.replace(old, f"{name}: {limit}"), encoding="utf-8")
    load_spec_file(path)  # the ceiling itself loads (other checks permitting)
    path.write_text(MODEL.replace(old, f"{name}: {limit + 1}"), encoding="utf-8")
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    message = str(error.value)
    assert str(path) in message and field in message
    assert f"less than or equal to {limit}" in message


def test_a_million_layers_is_refused_at_once_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "toy.yaml").write_text(MODEL.replace("num_layers: 4", "num_layers: 1000000"),
                                       encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "kvroof", "--spec-path", str(tmp_path),
                           "kappa", "--model", "toy", "--accelerator", "h100"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    # the file is skipped with a warning naming file and field, then the unknown name is the
    # error, which points at the warning
    warning, error = done.stderr.strip().splitlines()
    assert warning.startswith("kvroof: warning: skipped: ") and "toy.yaml: num_layers:" in warning
    assert f"less than or equal to {MAX_LAYERS}" in warning
    assert "'toy'" in error and "see the warning above" in error


@pytest.mark.parametrize("period", [1, 2, 3, 5])
@pytest.mark.parametrize("num_layers", [0, 1, 2, 7, 61, 1024])
def test_window_layer_count_matches_a_brute_force_count(period: int, num_layers: int) -> None:
    for offset in range(period):
        window = SlidingWindow(size=8, period=period, offset=offset)
        brute = sum(1 for layer in range(num_layers) if window.is_sliding(layer))
        assert window.count(num_layers) == brute


@pytest.mark.parametrize("step", [1, 2, 3])
@pytest.mark.parametrize("first", [0, 1, 3, 200])
@pytest.mark.parametrize("num_layers", [0, 1, 4, 61, 94, 1024])
def test_moe_layer_count_matches_a_brute_force_count(step: int, first: int,
                                                     num_layers: int) -> None:
    ffn = MoEFFN(kind="moe", num_experts=8, experts_per_token=2, expert_intermediate_size=32,
                 first_k_dense=first, moe_layer_step=step,
                 dense_intermediate_size=64 if first or step > 1 else None)
    brute = sum(1 for layer in range(num_layers) if ffn.is_moe_layer(layer))
    assert ffn.num_moe_layers(num_layers) == brute


def test_every_builtin_model_is_within_the_ceilings() -> None:
    """A built-in spec is validated when first used and a failure raises (built-ins are never
    skipped, unlike a user's file): every model loads, and the largest sizes leave room."""
    models = REG.all("model")
    assert len(models) == 38
    assert max(m.num_layers for m in models) * 4 <= MAX_LAYERS  # type: ignore[union-attr]
