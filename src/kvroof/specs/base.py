"""Common ground for spec models: frozen pydantic models, quantities with units, sources.

Quantities in spec files carry units (``"3.35 TB/s"``). From Python a plain number is accepted
and taken to be SI already; from a file (validation context ``{"from_file": True}``) a number
without a unit is an error, and every field that holds a number must be covered by an entry in
``sources`` (the field's own name, or ``default``).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)

from kvroof.errors import short_repr
from kvroof.specs.fields import spec_rows
from kvroof.units import Kind, UnitError, UnitOf, parse_quantity

__all__ = [
    "DTYPE_BYTES",
    "MAX_COUNT",
    "MAX_EXPERTS",
    "MAX_HEADS",
    "MAX_LAYERS",
    "MAX_TOKENS",
    "MAX_VOCAB",
    "MAX_WIDTH",
    "NAME_RULE",
    "Bandwidth",
    "Capacity",
    "Compute",
    "ComputeDtype",
    "ExpertCount",
    "HeadCount",
    "KvDtype",
    "LayerCount",
    "LayerIndex",
    "OptionalExpertCount",
    "OptionalWidth",
    "PositiveInt",
    "Power",
    "SpecModel",
    "Time",
    "TokenCount",
    "UnitOf",
    "VocabSize",
    "WeightDtype",
    "Width",
    "check_spec_name",
    "from_file",
]

ComputeDtype = Literal["fp4", "fp8", "int8", "fp16", "bf16", "tf32", "fp32"]
"""Data types an accelerator may publish a dense peak for."""

KvDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"]
"""Data types the KV cache may be stored in."""

WeightDtype = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4", "nvfp4"]
"""Data types checkpoint weights may be stored in."""

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
    "mxfp4": 4.25 / 8,
    "nvfp4": 4.5 / 8,
}
"""Bytes per element of each data type (4-bit types pack two elements per byte).

Block-scaled 4-bit formats carry their scales: ``mxfp4`` is 32 FP4 (E2M1) values sharing one
8-bit E8M0 scale, 4.25 bits per element (OCP Microscaling Formats (MX) Specification v1.0,
section 5, Table 1); ``nvfp4`` is 16 FP4 values sharing one FP8 (E4M3) scale, 4.5 bits per
element (NVIDIA Technical Blog, "Introducing NVFP4 for Efficient and Accurate Low-Precision
Inference", 2025). FP8 block scales (DeepSeek-V3: one FP32 scale per 128 x 128 block, 0.02%)
are left out."""


def from_file(info: ValidationInfo) -> bool:
    """True when the model is being validated from a spec file (units and sources required)."""
    context = info.context
    return isinstance(context, dict) and bool(context.get("from_file"))


def _quantity_validator(kind: Kind) -> Any:
    def validate(value: object, info: ValidationInfo) -> float:
        if isinstance(value, str):
            return parse_quantity(value, kind)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise UnitError(
                f"expected a {kind.value} like {kind.example!r}, got {short_repr(value)}")
        if from_file(info):
            raise UnitError(f"{short_repr(value)} has no unit; write the {kind.value} with a "
                            f"unit, like {kind.example!r}")
        if not math.isfinite(value) or value < 0:
            raise UnitError(
                f"a {kind.value} must be finite and not negative, got {short_repr(value)}")
        return float(value)

    return BeforeValidator(validate)


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return value


_POSITIVE = AfterValidator(_positive)

Compute = Annotated[float, _quantity_validator(Kind.COMPUTE), _POSITIVE, UnitOf(Kind.COMPUTE)]
"""FLOP/s (written ``"989.4 TFLOPS"`` in files)."""
Bandwidth = Annotated[float, _quantity_validator(Kind.BANDWIDTH), _POSITIVE, UnitOf(Kind.BANDWIDTH)]
"""Bytes per second, per direction (written ``"63 GB/s"`` or ``"400 Gb/s"``)."""
Capacity = Annotated[float, _quantity_validator(Kind.CAPACITY), _POSITIVE, UnitOf(Kind.CAPACITY)]
"""Bytes (written ``"80 GB"`` or ``"141 GiB"``)."""
Power = Annotated[float, _quantity_validator(Kind.POWER), _POSITIVE, UnitOf(Kind.POWER)]
"""Watts (written ``"700 W"``)."""
Time = Annotated[float, _quantity_validator(Kind.TIME), UnitOf(Kind.TIME)]
"""Seconds, zero allowed (written ``"2 us"``)."""
MAX_COUNT: Final = 10**12
"""No count in a spec (layers, widths, heads, experts, tokens of a window, GPUs) is larger:
a larger one is an input error (and would overflow the float arithmetic of the cost model)."""
PositiveInt = Annotated[int, Field(gt=0, le=MAX_COUNT, strict=True)]
"""An integer count, 1 to :data:`MAX_COUNT` (booleans and floats are rejected)."""

# A model's sizes are bounded by what real models have, with room to spare, so that a typo or a
# hostile file (10**6 layers) is an error naming the field instead of a hang: the cost model
# and the spec checks hold a few small objects per layer. The largest published values, for
# scale: 126 layers (Llama 3.1 405B, config.json), hidden size 16,384 and FFN width 53,248
# (same), 128 query heads (same; DeepSeek-V3), 512 routed experts (Qwen3-Next, config.json),
# a 262,144-token vocabulary (Gemma 3, config.json), a 10M-token context (Llama 4 Scout model
# card).
MAX_LAYERS: Final = 1024
"""Most decoder layers (or repeats of a layer pattern, or a window's period) in a model spec."""
MAX_WIDTH: Final = 1 << 20
"""Widest hidden size, FFN width, head dimension or latent rank (1,048,576)."""
MAX_HEADS: Final = 16_384
"""Most attention heads (query, key or value) in one layer."""
MAX_EXPERTS: Final = 65_536
"""Most routed or shared experts in one MoE layer."""
MAX_VOCAB: Final = 1 << 24
"""Largest vocabulary (16,777,216 tokens)."""
MAX_TOKENS: Final = 1 << 30
"""Longest context, window, chunk or top-k selection in tokens (1,073,741,824)."""

LayerCount = Annotated[int, Field(gt=0, le=MAX_LAYERS, strict=True)]
"""A number of layers, 1 to :data:`MAX_LAYERS`."""
LayerIndex = Annotated[int, Field(ge=0, le=MAX_LAYERS, strict=True)]
"""A layer index or a number of layers that may be zero, 0 to :data:`MAX_LAYERS`."""
Width = Annotated[int, Field(gt=0, le=MAX_WIDTH, strict=True)]
"""A dimension, 1 to :data:`MAX_WIDTH`."""
OptionalWidth = Annotated[int, Field(ge=0, le=MAX_WIDTH, strict=True)]
"""A dimension that may be zero (none), 0 to :data:`MAX_WIDTH`."""
HeadCount = Annotated[int, Field(gt=0, le=MAX_HEADS, strict=True)]
"""A number of heads, 1 to :data:`MAX_HEADS`."""
ExpertCount = Annotated[int, Field(gt=0, le=MAX_EXPERTS, strict=True)]
"""A number of experts, 1 to :data:`MAX_EXPERTS`."""
OptionalExpertCount = Annotated[int, Field(ge=0, le=MAX_EXPERTS, strict=True)]
"""A number of experts that may be zero, 0 to :data:`MAX_EXPERTS`."""
VocabSize = Annotated[int, Field(gt=0, le=MAX_VOCAB, strict=True)]
"""A vocabulary size, 1 to :data:`MAX_VOCAB`."""
TokenCount = Annotated[int, Field(gt=0, le=MAX_TOKENS, strict=True)]
"""A number of tokens, 1 to :data:`MAX_TOKENS`."""

_NOT_SOURCED = frozenset({"sources", "notes"})

_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
NAME_RULE: Final = "letters, digits and . _ + -, starting with a letter or digit"
"""What a spec name may hold (one rule for spec files, ``kvroof calibrate --name`` and every
other place that names a spec): safe as a file name and in a YAML file."""


def check_spec_name(name: object) -> str:
    """``name`` if it is a valid spec name (:data:`NAME_RULE`), else a ValueError saying so."""
    if not isinstance(name, str) or _NAME_RE.fullmatch(name) is None:
        raise ValueError(f"{short_repr(name)} is not a valid spec name ({NAME_RULE})")
    return name


def _holds_number(value: object) -> bool:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return False
    if isinstance(value, int | float):
        return True
    if isinstance(value, BaseModel):
        return any(_holds_number(getattr(value, name)) for name in type(value).model_fields)
    if isinstance(value, dict):
        return any(_holds_number(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_number(v) for v in value)
    return False


class SpecModel(BaseModel):
    """Base of every spec: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind_name: ClassVar[str] = "spec"


class SourcedSpec(SpecModel):
    """A top-level spec (one per file) with a name, aliases and sources for its numbers."""

    name: Annotated[str, AfterValidator(check_spec_name)]
    display_name: str = ""
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str = ""

    @model_validator(mode="after")
    def _every_number_has_a_source(self, info: ValidationInfo) -> SourcedSpec:
        fields = type(self).model_fields
        unknown = sorted(set(self.sources) - set(fields) - {"default"})
        if unknown:
            raise ValueError(
                f"sources names {', '.join(unknown)}, which {'is' if len(unknown) == 1 else 'are'}"
                f" not a field of a {self.kind_name}"
            )
        if not from_file(info):
            return self
        if "default" in self.sources:
            return self
        missing = [
            name
            for name in fields
            if name not in _NOT_SOURCED
            and _holds_number(getattr(self, name))
            and name not in self.sources
        ]
        if missing:
            raise ValueError(
                f"no source for {', '.join(missing)}: add them (or 'default') under 'sources'"
            )
        return self

    @property
    def label(self) -> str:
        """The display name, or the name when no display name is given."""
        return self.display_name or self.name

    def _repr_html_(self) -> str:
        """The spec's fields with units and its sources as an HTML table. In IPython (Jupyter)
        a spec displays through :func:`kvroof.describe.spec_html` instead, which adds the
        figures derived from it (parameters, KV bytes per token): the cost model that derives
        them sits above the specs, so it attaches itself there (see ``kvroof/__init__.py``)."""
        from kvroof.display import html_table

        return html_table(self.html_rows(), f"{self.kind_name} {self.name}: {self.label}")

    def html_rows(self, derived: dict[str, str] | None = None) -> list[list[str]]:
        """The rows of the HTML table: fields with units, then ``derived`` figures (name ->
        text), then sources."""
        rows: list[list[str]] = [[field, text] for field, text in spec_rows(self)]
        rows += [[name, text] for name, text in (derived or {}).items()]
        rows += [[f"source: {field}", text] for field, text in self.sources.items()]
        return rows
