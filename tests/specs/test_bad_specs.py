"""Bad spec files: each gives a one-line SpecError naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvroof.errors import SpecError
from kvroof.specs.loader import load_spec_file

GOOD_MODEL = """\
spec: model
name: tiny
num_layers: 2
hidden_size: 64
vocab_size: 1000
attention: {kind: gqa, num_heads: 8, num_kv_heads: 2, head_dim: 16}
ffn: {kind: moe, num_experts: 4, experts_per_token: 2, expert_intermediate_size: 32}
published: {total: 1M, active: 0.5M}
sources: {default: written for this test}
"""

GOOD_ACCELERATOR = """\
spec: accelerator
name: toy-gpu
vendor: test
peak_compute: {bf16: 100 TFLOPS}
hbm_capacity: 16 GB
hbm_bandwidth: 1 TB/s
tdp: 300 W
host_link: pcie-gen4-x16
sources: {default: written for this test}
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def expect_error(path: Path, field: str, fragment: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec_file(path)
    error = info.value
    message = str(error)
    assert "\n" not in message
    assert str(path) in message
    assert error.field == field, message
    assert fragment in message, message
    return error


def test_good_files_load(tmp_path: Path) -> None:
    assert load_spec_file(write(tmp_path, GOOD_MODEL)).name == "tiny"
    accelerator = load_spec_file(write(tmp_path, GOOD_ACCELERATOR, "a.yaml"))
    assert accelerator.name == "toy-gpu"


def test_missing_field(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("hidden_size: 64\n", ""))
    expect_error(path, "hidden_size", "missing field")


def test_unknown_key(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL + "colour: blue\n")
    expect_error(path, "colour", "unknown key")


def test_unknown_nested_key(tmp_path: Path) -> None:
    text = GOOD_MODEL.replace("head_dim: 16}", "head_dim: 16, rope: 3}")
    expect_error(write(tmp_path, text), "attention.rope", "unknown key")


def test_wrong_unit_kind(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_ACCELERATOR.replace("hbm_capacity: 16 GB", "hbm_capacity: 16 GB/s"))
    expect_error(path, "hbm_capacity", "is a bandwidth, but a capacity is expected")


def test_missing_unit(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_ACCELERATOR.replace("tdp: 300 W", "tdp: 300"))
    expect_error(path, "tdp", "no unit")


def test_unknown_unit_in_dict(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_ACCELERATOR.replace("100 TFLOPS", "100 TFLOPZ"))
    expect_error(path, "peak_compute.bf16", "unknown unit 'TFLOPZ'")


def test_unknown_dtype(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_ACCELERATOR.replace("{bf16:", "{bf17:"))
    expect_error(path, "peak_compute.bf17", "")


def test_negative_size(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("num_layers: 2", "num_layers: -2"))
    expect_error(path, "num_layers", "greater than 0")


def test_zero_quantity(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_ACCELERATOR.replace("1 TB/s", "0 TB/s"))
    expect_error(path, "hbm_bandwidth", "must be positive")


def test_heads_not_divisible(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("num_kv_heads: 2", "num_kv_heads: 3"))
    expect_error(path, "attention", "num_heads (8) is not divisible by num_kv_heads (3)")


def test_qk_norm_scope_without_qk_norm(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("head_dim: 16}", "head_dim: 16, "
                                              "qk_norm_scope: all_heads}"))
    expect_error(path, "attention", "qk_norm_scope all_heads needs qk_norm: true")


def test_shared_expert_gate_without_shared_experts(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("expert_intermediate_size: 32}",
                                              "expert_intermediate_size: 32, "
                                              "shared_expert_gate: true}"))
    expect_error(path, "ffn", "shared_expert_gate needs shared experts")


def test_top_k_above_experts(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("experts_per_token: 2", "experts_per_token: 5"))
    expect_error(path, "ffn", "experts_per_token (5) exceeds num_experts (4)")


def test_unknown_attention_kind(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("kind: gqa", "kind: linear"))
    expect_error(path, "attention", "linear")


def test_malformed_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "spec: model\nname: [unclosed\n")
    error = expect_error(path, "", "malformed YAML at line")
    assert "line 3" in str(error) or "line 2" in str(error)


def test_not_a_mapping(tmp_path: Path) -> None:
    expect_error(write(tmp_path, "- a\n- b\n"), "", "expected a mapping")


def test_missing_spec_kind(tmp_path: Path) -> None:
    expect_error(write(tmp_path, GOOD_MODEL.replace("spec: model\n", "")), "spec", "missing field")


def test_unknown_spec_kind(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("spec: model", "spec: modle"))
    expect_error(path, "spec", "unknown spec kind 'modle'")


def test_number_without_source(tmp_path: Path) -> None:
    text = GOOD_MODEL.replace("{default: written for this test}", "{num_layers: x}")
    expect_error(write(tmp_path, text), "", "no source for hidden_size")


def test_source_for_unknown_field(tmp_path: Path) -> None:
    text = GOOD_MODEL.replace("{default: written for this test}", "{default: x, layerz: y}")
    expect_error(write(tmp_path, text), "", "sources names layerz")


def test_sustained_above_peak(tmp_path: Path) -> None:
    text = """\
spec: link
name: odd
kind: pcie
peak_bandwidth: 10 GB/s
sustained_bandwidth: 12 GB/s
sources: {default: test}
"""
    expect_error(write(tmp_path, text), "", "exceeds peak_bandwidth")


def test_unreadable_file(tmp_path: Path) -> None:
    expect_error(tmp_path / "absent.yaml", "", "cannot read")


def test_python_construction_takes_si_floats() -> None:
    from kvroof.specs.hardware import Link

    link = Link(name="x", kind="pcie", peak_bandwidth=63e9, latency=2e-6)
    assert link.peak_bandwidth == 63e9
    with pytest.raises(ValueError, match="must be positive"):
        Link(name="x", kind="pcie", peak_bandwidth=0.0)


def test_long_values_are_cut_and_fast(tmp_path: Path) -> None:
    """A quantity of a million digits followed by junk: one short line, at once (the former
    pattern backtracked cubically: 36 s for 2,000 digits); the value shown is cut to 80
    characters."""
    path = write(tmp_path, GOOD_ACCELERATOR.replace("1 TB/s", '"' + "1" * 1_000_000 + ' x y"'))
    error = expect_error(path, "hbm_bandwidth", "is not a number with a unit")
    assert len(str(error)) < 250
    path = write(tmp_path, GOOD_MODEL.replace("total: 1M", "total: " + "1" * 1_000_000 + " x"))
    expect_error(path, "published.total", "expected a count like '235B'")


def test_huge_integer_count(tmp_path: Path) -> None:
    """A 400-digit integer is beyond any float: an error, not an OverflowError traceback."""
    path = write(tmp_path, GOOD_MODEL.replace("total: 1M", "total: 1" + "0" * 400))
    expect_error(path, "published.total", "must be positive and finite, got <an integer of")


def test_counts_have_a_ceiling(tmp_path: Path) -> None:
    """A count past kvroof.specs.base.MAX_COUNT (1e12) used to load, and `kvroof show` then
    ended in an OverflowError traceback (10**4000 layers). Model sizes now have the tighter
    ceilings of real models (MAX_LAYERS = 1024, MAX_WIDTH = 2**20; see test_size_bounds.py)."""
    path = write(tmp_path, GOOD_MODEL.replace("num_layers: 2", "num_layers: 1" + "0" * 4000))
    expect_error(path, "num_layers", "less than or equal to 1024 (got <an integer of")
    path = write(tmp_path, GOOD_MODEL.replace("hidden_size: 64", "hidden_size: 1" + "0" * 13))
    expect_error(path, "hidden_size", "less than or equal to 1048576")


GOOD_SYSTEM = """\
spec: system
name: toy-box
accelerator: h100-sxm
num_accelerators: 4
host_link: pcie-gen5-x16
host_memory:
  bandwidth_per_socket: 281.6 GB/s
  channels_per_socket: 8
  transfer_rate: 4400
  sustained_fraction: 0.8
  inter_socket_bandwidth: 100 GB/s
  capacity_per_socket: 1 TB
  sockets: 2
gpu_sockets: [0, 0, 1, 1]
sources: {default: written for this test}
"""


def test_physics_fields_load(tmp_path: Path) -> None:
    system = load_spec_file(write(tmp_path, GOOD_SYSTEM))
    assert system.socket_of(2) == 1  # type: ignore[union-attr]
    memory = system.host_memory  # type: ignore[union-attr]
    assert memory.sustained_bandwidth_per_socket == pytest.approx(281.6e9 * 0.8)


@pytest.mark.parametrize(("old", "new", "field", "fragment"), [
    ("transfer_rate: 4400", "transfer_rate: 4800", "host_memory",
     "differs from channels_per_socket x transfer_rate x 8 B (307.2 GB/s)"),
    ("  transfer_rate: 4400\n", "", "host_memory",
     "channels_per_socket and transfer_rate (MT/s) go together"),
    ("sustained_fraction: 0.8", "sustained_fraction: 1.5", "host_memory.sustained_fraction",
     "less than or equal to 1"),
    # checks across fields name the field in the message
    ("gpu_sockets: [0, 0, 1, 1]", "gpu_sockets: [0, 1]", "",
     "gpu_sockets has 2 entries for 4 GPUs"),
    ("gpu_sockets: [0, 0, 1, 1]", "gpu_sockets: [0, 0, 1, 2]", "",
     "gpu_sockets: socket 2 does not exist"),
])
def test_bad_system_fields(tmp_path: Path, old: str, new: str, field: str, fragment: str) -> None:
    assert old in GOOD_SYSTEM
    path = write(tmp_path, GOOD_SYSTEM.replace(old, new))
    expect_error(path, field, fragment)


@pytest.mark.parametrize(("extra", "field", "fragment"), [
    ("achievable_compute: {bf16: 120 TFLOPS}\n", "", "achievable_compute.bf16 (1.2e+14) exceeds "
     "the dense peak"),
    ("achievable_compute: {fp8: 50 TFLOPS}\n", "", "no peak_compute.fp8 to compare it with"),
    ("achievable_hbm_bandwidth: 2 TB/s\n", "", "achievable_hbm_bandwidth (2e+12 B/s) exceeds"),
    ("allreduce_latency: 10 GB/s\n", "allreduce_latency", "is a bandwidth"),
])
def test_bad_accelerator_fields(tmp_path: Path, extra: str, field: str, fragment: str) -> None:
    path = write(tmp_path, GOOD_ACCELERATOR.replace("sources:", extra + "sources:"))
    expect_error(path, field, fragment)


def test_bad_link_directions(tmp_path: Path) -> None:
    link = ("spec: link\nname: l\nkind: pcie\npeak_bandwidth: 10 GB/s\n"
            "sustained_d2h_bandwidth: 12 GB/s\nsources: {default: test}\n")
    expect_error(write(tmp_path, link), "", "sustained_d2h_bandwidth (1.2e+10 B/s) exceeds")
    both = link.replace("sustained_d2h_bandwidth: 12", "sustained_bidirectional_bandwidth: 25")
    expect_error(write(tmp_path, both, "b.yaml"), "", "exceeds twice peak_bandwidth")


def test_bad_weight_format(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD_MODEL.replace("published:", "weights: {dtype: fp6}\npublished:"))
    expect_error(path, "weights.dtype", "fp6")


LAYERED_MODEL = """\
spec: model
name: tiny-hybrid
num_layers: 4
hidden_size: 64
vocab_size: 1000
attention: {kind: gqa, num_heads: 8, num_kv_heads: 2, head_dim: 16}
ffn: {kind: dense, intermediate_size: 128}
layers:
  kinds:
    lin: {kind: linear, variant: gated-deltanet, num_key_heads: 2, num_value_heads: 4,
          key_head_dim: 16, value_head_dim: 16, conv_kernel: 4}
  pattern: [{repeat: [lin, lin, lin, full], layers: 4}]
sources: {default: written for this test}
"""


def test_layered_model_loads(tmp_path: Path) -> None:
    spec = load_spec_file(write(tmp_path, LAYERED_MODEL))
    assert [name for name, _ in spec.layer_kinds] == ["lin", "lin", "lin", "full"]


@pytest.mark.parametrize(("old", "new", "field", "fragment"), [
    # a pattern whose length differs from the layer count (compact or explicit)
    ("layers: 4}]", "layers: 5}]", "layers.pattern", "covers 5 layers, but num_layers is 4"),
    ("[{repeat: [lin, lin, lin, full], layers: 4}]", "[lin, lin, full]", "layers.pattern",
     "covers 3 layers"),
    # an unknown layer kind: a name nothing defines, or a kind kvroof does not know
    ("[lin, lin, lin, full]", "[lin, lni, lin, full]", "layers.pattern[0]",
     "unknown layer kind 'lni'"),
    ("{kind: linear,", "{kind: linar,", "layers.kinds.lin", "'linar'"),
    # a state size that is not positive
    ("num_value_heads: 4", "num_value_heads: 0", "layers.kinds.lin.num_value_heads",
     "greater than 0"),
    ("key_head_dim: 16,", "key_head_dim: -16,", "layers.kinds.lin.key_head_dim",
     "greater than 0"),
    ("conv_kernel: 4}", "conv_kernel: 4, state_dtype: fp64}", "layers.kinds.lin.state_dtype",
     "'fp64'"),
    ("num_value_heads: 4", "num_value_heads: 3", "layers.kinds.lin",
     "not a multiple of num_key_heads"),
    # a shared layer's source must exist and keep KV; a sparse layer needs MLA
    ("    lin: {", "    sh: {kind: shared, source: 9}\n    lin: {", "layers.kinds.sh.source",
     "layer 9 does not exist"),
    ("ffn: {kind: dense, intermediate_size: 128}",
     "ffn: {kind: dense, intermediate_size: 128}\nsliding_window: {size: 4}", "layers",
     "not both"),
])
def test_bad_layers(tmp_path: Path, old: str, new: str, field: str, fragment: str) -> None:
    assert old in LAYERED_MODEL
    expect_error(write(tmp_path, LAYERED_MODEL.replace(old, new)), field, fragment)


def test_shared_source_must_keep_kv(tmp_path: Path) -> None:
    text = LAYERED_MODEL.replace("    lin: {", "    sh: {kind: shared, source: 0}\n    lin: {")
    text = text.replace("[lin, lin, lin, full]", "[lin, sh, lin, full]")
    expect_error(write(tmp_path, text), "layers.kinds.sh.source", "a linear layer")


def test_sparse_layer_needs_mla(tmp_path: Path) -> None:
    text = LAYERED_MODEL.replace(
        "    lin: {", "    ds: {kind: sparse, indexer: {num_heads: 4, head_dim: 8, topk: 16}}\n"
                     "    lin: {")
    text = text.replace("[lin, lin, lin, full]", "[lin, ds, lin, full]")
    expect_error(write(tmp_path, text), "layers.kinds.ds", "attention is not mla")
