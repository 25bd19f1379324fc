"""Field access on a HuggingFace ``config.json`` with one-line errors naming the file and field
(shared by :mod:`kvroof.specs.hf` and :mod:`kvroof.specs.hf_layers`).

Every field kvroof reads is checked here before it is used: an integer is a JSON integer (not
``true``, ``4.0`` or ``"4"``) from ``minimum`` (1 unless the field gives 0 a meaning) to the
bound of its kind (:data:`CONFIG_MAXIMA`, the model spec's own bounds: layers, widths, heads,
experts, vocabulary, tokens), so that a bad value is reported under the config's name for it,
before any per-layer work; a flag is ``true`` or ``false``; a list is a list; a mapping is a
mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kvroof.errors import SpecError, short_repr
from kvroof.specs.base import (
    MAX_COUNT,
    MAX_EXPERTS,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_TOKENS,
    MAX_VOCAB,
    MAX_WIDTH,
)

__all__ = ["CONFIG_MAXIMA", "HFConfig"]


def _each(maximum: int, *keys: str) -> dict[str, int]:
    return dict.fromkeys(keys, maximum)


CONFIG_MAXIMA: Final[dict[str, int]] = {
    **_each(MAX_LAYERS, "num_hidden_layers", "num_kv_shared_layers", "max_window_layers",
            "first_k_dense_replace", "interleave_moe_layer_step", "decoder_sparse_step",
            "moe_layer_freq", "full_attention_interval", "no_rope_layer_interval",
            "sliding_window_pattern"),
    **_each(MAX_WIDTH, "hidden_size", "intermediate_size", "head_dim", "moe_intermediate_size",
            "shared_expert_intermediate_size", "intermediate_size_mlp", "kv_lora_rank",
            "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
            "linear_key_head_dim", "linear_value_head_dim", "global_head_dim", "index_head_dim",
            "hidden_size_per_layer_input"),
    **_each(MAX_HEADS, "num_attention_heads", "num_key_value_heads", "num_global_key_value_heads",
            "linear_num_key_heads", "linear_num_value_heads", "index_n_heads", "num_heads"),
    **_each(MAX_EXPERTS, "n_routed_experts", "num_experts", "num_local_experts",
            "n_shared_experts", "num_shared_experts", "num_experts_per_tok",
            "experts_per_token", "num_experts_per_token", "top_k_experts"),
    **_each(MAX_VOCAB, "vocab_size", "vocab_size_per_layer_input"),
    **_each(MAX_TOKENS, "max_position_embeddings", "sliding_window", "attention_chunk_size",
            "index_topk", "linear_conv_kernel_dim", "short_conv_kernel_size"),
}
"""The largest value of each integer field read (a field not listed: :data:`MAX_COUNT`)."""


def _at_least(minimum: int) -> str:
    return "a positive integer" if minimum == 1 else f"an integer >= {minimum:,}"


class HFConfig:
    """Field access on a config dict with errors that name the file and field."""

    def __init__(self, data: Mapping[str, Any], path: Path | None, architecture: str,
                 prefix: str = "") -> None:
        self.data = data
        self.path = path
        self.architecture = architecture
        self.prefix = prefix  # "text_config." when the fields come from a wrapper's text model

    def error(self, field: str, message: str) -> SpecError:
        name = field if field in ("architectures", "quantization_config") or \
            field.startswith("quantization_config.") else self.prefix + field
        return SpecError(message, self.path or "<config dict>", name)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def checked_int(self, key: str, value: Any, *, minimum: int = 1, maximum: int | None = None,
                    what: str = "") -> int:
        """``value`` (read from ``key``) if it is an integer from ``minimum`` to ``maximum``
        (default: the field's bound in :data:`CONFIG_MAXIMA`); ``what`` names an entry of a
        list field in the message."""
        if maximum is None:
            maximum = CONFIG_MAXIMA.get(key, MAX_COUNT)
        where = f"{what}: " if what else ""
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"{where}expected an integer, got {short_repr(value)}")
        if value < minimum:
            raise self.error(key, f"{where}expected {_at_least(minimum)}, got {short_repr(value)}")
        if value > maximum:
            raise self.error(key, f"{where}expected at most {maximum:,}, got {short_repr(value)}")
        return value

    def integer(self, key: str, *alternatives: str, minimum: int = 1,
                maximum: int | None = None) -> int:
        """The first of ``key`` and ``alternatives`` present (an error when none is)."""
        for name in (key, *alternatives):
            value = self.data.get(name)
            if value is not None:
                return self.checked_int(name, value, minimum=minimum, maximum=maximum)
        names = " or ".join(repr(self.prefix + n) for n in (key, *alternatives))
        raise self.error(key, f"missing field ({names} is needed for {self.architecture})")

    def check_divides(self, key: str, value: int, total: int, total_name: str) -> None:
        """``value`` (read from ``key``) divides ``total`` (read from ``total_name``)."""
        if value > total or total % value:
            raise self.error(key, f"{total_name} ({total:,}) is not divisible by {value:,}")

    def optional_int(self, key: str, default: int | None = None, *, minimum: int = 1,
                     maximum: int | None = None) -> int | None:
        if not self.has(key):
            return default
        return self.integer(key, minimum=minimum, maximum=maximum)

    def flag(self, key: str, default: bool) -> bool:
        """A true/false field (JSON ``true``/``false``), or ``default`` when absent."""
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {short_repr(value)}")
        return value

    def optional_list(self, key: str) -> list[Any] | None:
        """A list field, or None when absent."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {short_repr(value)}")
        return value

    def optional_int_list(self, key: str, *, minimum: int, maximum: int) -> list[int] | None:
        """A list of integers from ``minimum`` to ``maximum``, or None when absent."""
        values = self.optional_list(key)
        if values is None:
            return None
        return [self.checked_int(key, v, minimum=minimum, maximum=maximum, what=f"entry {i}")
                for i, v in enumerate(values)]

    def optional_str(self, key: str) -> str | None:
        """A string field, or None when absent."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {short_repr(value)}")
        return value

    def section(self, key: str, what: str) -> HFConfig:
        """A nested mapping (``what`` describes it in the error when it is missing or not a
        mapping); its fields are named ``key.field``."""
        value = self.data.get(key)
        if not isinstance(value, Mapping):
            raise self.error(key, f"missing field ({what})" if value is None else
                                  f"expected a mapping ({what}), got {short_repr(value)}")
        return HFConfig(value, self.path, self.architecture, f"{self.prefix}{key}.")
