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

    Measured figures (each optional, each sourced): ``achievable_compute`` is the best matmul
    throughput measured per dtype (the "maximum achievable matmul FLOPS"), which sets the
    default compute efficiency; ``achievable_hbm_bandwidth`` is a measured streaming bandwidth,
    which sets the default HBM efficiency; ``allreduce_bandwidth`` (NCCL bus bandwidth of large
    all-reduces among the GPUs of one scale-up domain) and ``allreduce_latency`` (time of a small
    all-reduce) price the tensor-parallel all-reduces.
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
    achievable_compute: dict[ComputeDtype, Compute] = Field(default_factory=dict)
    achievable_hbm_bandwidth: Bandwidth | None = None
    allreduce_bandwidth: Bandwidth | None = None
    allreduce_latency: Time | None = None

    @model_validator(mode="after")
    def _check(self) -> Accelerator:
        if self.idle_power is not None and self.idle_power >= self.tdp:
            raise ValueError(f"idle_power ({self.idle_power} W) must be below tdp ({self.tdp} W)")
        for dtype, achieved in self.achievable_compute.items():
            peak = self.peak_compute.get(dtype)
            if peak is None:
                raise ValueError(f"achievable_compute.{dtype}: no peak_compute.{dtype} to "
                                 "compare it with")
            if achieved > peak:
                raise ValueError(f"achievable_compute.{dtype} ({achieved:g}) exceeds the dense "
                                 f"peak ({peak:g})")
        if (self.achievable_hbm_bandwidth is not None
                and self.achievable_hbm_bandwidth > self.hbm_bandwidth):
            raise ValueError(f"achievable_hbm_bandwidth ({self.achievable_hbm_bandwidth:g} B/s) "
                             f"exceeds hbm_bandwidth ({self.hbm_bandwidth:g} B/s)")
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
    figure), the same both ways. ``sustained_bandwidth`` is a published *measured* figure for
    large pinned host-to-device copies, when one is known; ``sustained_d2h_bandwidth`` the same
    device-to-host; ``sustained_bidirectional_bandwidth`` the sum of both directions when both
    run at once (below twice the one-way figure where the host memory or the link's protocol
    overhead limits it). ``latency`` is the fixed cost of one transfer (one copy call).
    """

    kind_name: ClassVar[str] = "link"

    kind: LinkKind
    peak_bandwidth: Bandwidth
    sustained_bandwidth: Bandwidth | None = None
    sustained_d2h_bandwidth: Bandwidth | None = None
    sustained_bidirectional_bandwidth: Bandwidth | None = None
    latency: Time = 0.0

    @model_validator(mode="after")
    def _check(self) -> Link:
        for name in ("sustained_bandwidth", "sustained_d2h_bandwidth"):
            value = getattr(self, name)
            if value is not None and value > self.peak_bandwidth:
                raise ValueError(
                    f"{name} ({value:g} B/s) exceeds peak_bandwidth ({self.peak_bandwidth:g} B/s)"
                )
        both = self.sustained_bidirectional_bandwidth
        if both is not None and both > 2 * self.peak_bandwidth:
            raise ValueError(
                f"sustained_bidirectional_bandwidth ({both:g} B/s) exceeds twice peak_bandwidth "
                f"({2 * self.peak_bandwidth:g} B/s)"
            )
        return self


class HostMemory(SpecModel):
    """Host DRAM: per-socket bandwidth and capacity, the number of sockets, and what is known
    of how much of the peak a streaming reader sustains.

    ``bandwidth_per_socket`` is the theoretical peak *as populated*: ``channels_per_socket x
    transfer_rate (MT/s) x 8 B``, at the speed the DIMMs run in this configuration (Sapphire
    Rapids runs DDR5-4800 DIMMs at 4400 MT/s with two per channel). When ``channels_per_socket``
    and ``transfer_rate`` are given the two must agree. ``measured_bandwidth_per_socket`` is a
    published STREAM-like measurement of this platform; ``sustained_fraction`` is the share of
    the peak such a benchmark reaches on this CPU family (used when no measurement is given).
    ``inter_socket_bandwidth`` is the per-direction bandwidth between two sockets (UPI, xGMI),
    which bounds reads of memory on the other socket.
    """

    kind_name: ClassVar[str] = "host memory"

    technology: str = ""
    bandwidth_per_socket: Bandwidth
    capacity_per_socket: Capacity
    sockets: PositiveInt = 1
    channels_per_socket: PositiveInt | None = None
    transfer_rate: PositiveInt | None = None
    measured_bandwidth_per_socket: Bandwidth | None = None
    sustained_fraction: Annotated[float, Field(gt=0, le=1)] | None = None
    inter_socket_bandwidth: Bandwidth | None = None

    @model_validator(mode="after")
    def _check(self) -> HostMemory:
        if (self.channels_per_socket is None) != (self.transfer_rate is None):
            raise ValueError("channels_per_socket and transfer_rate (MT/s) go together")
        if self.channels_per_socket is not None and self.transfer_rate is not None:
            computed = self.channels_per_socket * self.transfer_rate * 1e6 * 8
            if abs(computed - self.bandwidth_per_socket) > 0.01 * computed:
                raise ValueError(
                    f"bandwidth_per_socket ({self.bandwidth_per_socket / 1e9:g} GB/s) differs "
                    f"from channels_per_socket x transfer_rate x 8 B ({computed / 1e9:g} GB/s)"
                )
        if (self.measured_bandwidth_per_socket is not None
                and self.measured_bandwidth_per_socket > self.bandwidth_per_socket):
            raise ValueError("measured_bandwidth_per_socket exceeds bandwidth_per_socket")
        return self

    @property
    def bandwidth(self) -> float:
        """Peak bandwidth of all sockets together (bytes/s)."""
        return self.bandwidth_per_socket * self.sockets

    @property
    def sustained_bandwidth_per_socket(self) -> float:
        """What one socket sustains for streaming reads: the measurement, else peak x the
        sustained fraction, else the peak (nothing known)."""
        if self.measured_bandwidth_per_socket is not None:
            return self.measured_bandwidth_per_socket
        if self.sustained_fraction is not None:
            return self.bandwidth_per_socket * self.sustained_fraction
        return self.bandwidth_per_socket

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
    compute_half_tokens)`` of the accelerator's dense peak; ``hbm_efficiency`` is the share of
    the HBM peak the prefills that were limited by HBM reads reached; ``link_bandwidth`` (per
    GPU) and ``link_latency`` (per copy) replace the host link's; ``overlap_efficiency`` is the
    share of the shorter of load and compute that overlap hides (1 = perfect). A deployment on a
    system with a calibration uses these unless told otherwise.
    """

    kind_name: ClassVar[str] = "calibration"

    compute_efficiency_max: Annotated[float, Field(gt=0, le=1)]
    compute_half_tokens: Annotated[float, Field(ge=0)] = 0.0
    hbm_efficiency: Annotated[float, Field(gt=0, le=1)] | None = None
    link_bandwidth: Bandwidth
    link_latency: Time = 0.0
    overlap_efficiency: Annotated[float, Field(ge=0, le=1)] | None = None
    results: str = ""
    rows: Annotated[int, Field(ge=0)] = 0
    fitted_at: str = ""
    errors: dict[str, float] = Field(default_factory=dict)


class System(SourcedSpec):
    """A machine: accelerators, their host links, host memory and further tiers.

    ``gpus_per_host_link`` counts GPUs that share one host uplink (2 for a Grace with two
    Blackwell GPUs if the C2C is shared; 2 where two GPUs sit behind one PCIe switch with one x16
    uplink to the CPU). ``host_link_sustained_bandwidth`` overrides the link's published
    sustained figure with a measurement on this machine. ``gpu_sockets`` maps each GPU (by
    index) to the CPU socket whose root complex it hangs off; by default the GPUs are split
    evenly, in order, over the sockets.
    """

    kind_name: ClassVar[str] = "system"

    cpu: str = ""
    accelerator: str
    num_accelerators: PositiveInt
    host_link: str
    gpus_per_host_link: PositiveInt = 1
    host_link_sustained_bandwidth: Bandwidth | None = None
    host_memory: HostMemory
    gpu_sockets: tuple[Annotated[int, Field(ge=0, strict=True)], ...] | None = None
    tiers: tuple[Tier, ...] = ()
    calibration: Calibration | None = None

    @model_validator(mode="after")
    def _check(self) -> System:
        if self.gpu_sockets is not None:
            if len(self.gpu_sockets) != self.num_accelerators:
                raise ValueError(f"gpu_sockets has {len(self.gpu_sockets)} entries for "
                                 f"{self.num_accelerators} GPUs")
            bad = [s for s in self.gpu_sockets if s >= self.host_memory.sockets]
            if bad:
                raise ValueError(f"gpu_sockets: socket {bad[0]} does not exist (the host has "
                                 f"{self.host_memory.sockets})")
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

    def socket_of(self, gpu: int) -> int:
        """The CPU socket GPU ``gpu`` (0-based) is attached to."""
        if self.gpu_sockets is not None:
            return self.gpu_sockets[gpu]
        return gpu * self.host_memory.sockets // self.num_accelerators
