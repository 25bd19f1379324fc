"""Hardware specs: accelerators, links and whole systems.

All values are SI inside (FLOP/s, bytes/s per direction, bytes, watts, seconds); files write them
with units. Peak compute is *dense* (no 2:4 structured sparsity); the sparse marketing figures,
where a vendor prints them, go in ``peak_compute_sparse`` so that the paper's tables (which used
them) can be reproduced on purpose rather than by accident.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from kvroof.specs.base import (
    Bandwidth,
    Capacity,
    Compute,
    ComputeDtype,
    PositiveInt,
    Power,
    SourcedSpec,
    SpecModel,
    Time,
)

__all__ = [
    "Accelerator",
    "Calibration",
    "HostMemory",
    "Link",
    "LinkKind",
    "System",
    "Tier",
    "TierKind",
]

LinkKind = Literal["pcie", "nvlink-c2c", "nvlink", "cxl", "nvme", "rdma", "ethernet", "other"]
TierKind = Literal["host-dram", "cxl", "nvme", "remote"]


class Accelerator(SourcedSpec):
    """One GPU or other accelerator.

    ``peak_compute`` maps a data type to the dense peak FLOP/s for matrix math in that type;
    ``host_link`` names the link (in the link registry) it normally reaches host memory through;
    ``scale_up_bandwidth`` is the per-direction GPU-to-GPU bandwidth (NVLink, Infinity Fabric),
    absent when the part has none.
    """

    kind_name: ClassVar[str] = "accelerator"

    vendor: str
    peak_compute: dict[ComputeDtype, Compute] = Field(min_length=1)
    peak_compute_sparse: dict[ComputeDtype, Compute] = Field(default_factory=dict)
    hbm_capacity: Capacity
    hbm_bandwidth: Bandwidth
    tdp: Power
    idle_power: Power | None = None
    host_link: str
    scale_up_bandwidth: Bandwidth | None = None

    @model_validator(mode="after")
    def _check(self) -> Accelerator:
        if self.idle_power is not None and self.idle_power >= self.tdp:
            raise ValueError(f"idle_power ({self.idle_power} W) must be below tdp ({self.tdp} W)")
        for dtype, sparse in self.peak_compute_sparse.items():
            dense = self.peak_compute.get(dtype)
            if dense is not None and sparse < dense:
                raise ValueError(
                    f"peak_compute_sparse.{dtype} ({sparse:g}) is below the dense peak ({dense:g})"
                )
        return self


class Link(SourcedSpec):
    """A data path between memory and an accelerator, or to a storage or memory tier.

    ``peak_bandwidth`` is per direction (PCIe Gen5 x16: 63 GB/s, not the "128 GB/s" bidirectional
    figure). ``sustained_bandwidth`` is a published *measured* figure for large pinned copies,
    when one is known. ``latency`` is the fixed cost of one transfer (one copy call).
    """

    kind_name: ClassVar[str] = "link"

    kind: LinkKind
    peak_bandwidth: Bandwidth
    sustained_bandwidth: Bandwidth | None = None
    latency: Time = 0.0

    @model_validator(mode="after")
    def _check(self) -> Link:
        if self.sustained_bandwidth is not None and self.sustained_bandwidth > self.peak_bandwidth:
            raise ValueError(
                f"sustained_bandwidth ({self.sustained_bandwidth:g} B/s) exceeds peak_bandwidth "
                f"({self.peak_bandwidth:g} B/s)"
            )
        return self


class HostMemory(SpecModel):
    """Host DRAM: per-socket peak bandwidth and capacity, and the number of sockets."""

    kind_name: ClassVar[str] = "host memory"

    technology: str = ""
    bandwidth_per_socket: Bandwidth
    capacity_per_socket: Capacity
    sockets: PositiveInt = 1
    measured_bandwidth_per_socket: Bandwidth | None = None

    @property
    def bandwidth(self) -> float:
        """Peak bandwidth of all sockets together (bytes/s)."""
        return self.bandwidth_per_socket * self.sockets

    @property
    def capacity(self) -> float:
        """Capacity of all sockets together (bytes)."""
        return self.capacity_per_socket * self.sockets


class Tier(SpecModel):
    """A further place cached KV may live (CXL memory, NVMe drives, a remote store).

    ``link`` names the link that reaches the tier (one device); ``count`` devices are striped;
    ``capacity`` is the total over all ``count`` devices.
    ``shares_host_link``: data from this tier enters the GPU through the GPU's host link (true
    for every tier reached over PCIe, including GPUDirect paths).
    """

    kind_name: ClassVar[str] = "tier"

    name: str
    kind: TierKind
    link: str
    count: PositiveInt = 1
    capacity: Capacity | None = None
    shares_host_link: bool = True


class Calibration(SpecModel):
    """Cost-model parameters fitted to measurements on this system (``kvroof calibrate``).

    Compute efficiency at ``T`` new tokens is ``compute_efficiency_max x T / (T +
    compute_half_tokens)`` of the accelerator's dense peak; ``link_bandwidth`` (per GPU) and
    ``link_latency`` (per copy) replace the host link's; ``overlap_efficiency`` is the share of
    the shorter of load and compute that overlap hides (1 = perfect). A deployment on a system
    with a calibration uses these unless told otherwise.
    """

    kind_name: ClassVar[str] = "calibration"

    compute_efficiency_max: Annotated[float, Field(gt=0, le=1)]
    compute_half_tokens: Annotated[float, Field(ge=0)] = 0.0
    link_bandwidth: Bandwidth
    link_latency: Time = 0.0
    overlap_efficiency: Annotated[float, Field(ge=0, le=1)] | None = None
    results: str = ""
    rows: Annotated[int, Field(ge=0)] = 0
    fitted_at: str = ""
    errors: dict[str, float] = Field(default_factory=dict)


class System(SourcedSpec):
    """A machine: accelerators, their host links, host memory and further tiers.

    ``gpus_per_host_link`` counts GPUs that share one host link (2 for a Grace with two Blackwell
    GPUs if the C2C is shared). ``host_link_sustained_bandwidth`` overrides the link's published
    sustained figure with a measurement on this machine.
    """

    kind_name: ClassVar[str] = "system"

    cpu: str = ""
    accelerator: str
    num_accelerators: PositiveInt
    host_link: str
    gpus_per_host_link: PositiveInt = 1
    host_link_sustained_bandwidth: Bandwidth | None = None
    host_memory: HostMemory
    tiers: tuple[Tier, ...] = ()
    calibration: Calibration | None = None

    @model_validator(mode="after")
    def _check(self) -> System:
        if self.num_accelerators % self.gpus_per_host_link:
            raise ValueError(
                f"num_accelerators ({self.num_accelerators}) is not a multiple of "
                f"gpus_per_host_link ({self.gpus_per_host_link})"
            )
        names = [tier.name for tier in self.tiers]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"tiers: duplicated tier name {', '.join(duplicated)}")
        return self
