"""The machine under test: torch on demand, the device to run on, what the machine is, and a timer.

torch is imported only inside these functions, so ``import kvroof.measure`` works without it;
:func:`require_torch` turns its absence into one :class:`~kvroof.errors.KvroofError` line.

Timing: on CUDA, a pair of CUDA events on the current stream brackets each call (the GPU's own
clock, no host synchronisation inside the interval); on the CPU, ``time.perf_counter`` around
the call, after which the work is complete (CPU tensor ops are synchronous). Every measurement
runs ``warmup`` untimed calls, then up to ``repeats`` timed ones, and reports the median and the
minimum in seconds.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from kvroof._version import __version__
from kvroof.errors import KvroofError

__all__ = [
    "TORCH_MISSING",
    "DeviceKind",
    "Timer",
    "Timing",
    "free_device_memory",
    "host_available_memory",
    "machine_info",
    "pick_device",
    "require_torch",
]

DeviceKind = Literal["cuda", "cpu"]

TORCH_MISSING = "kvroof measure needs torch: pip install 'kvroof[measure]'"


def require_torch() -> ModuleType:
    """The ``torch`` module, or a one-line :class:`KvroofError` that says how to install it.

    Imported by name, so that type checking kvroof does not need torch installed (torch is an
    optional extra); the benchmarks use it as an untyped module.
    """
    try:
        return import_module("torch")
    except ImportError:
        raise KvroofError(TORCH_MISSING) from None


def pick_device(requested: str | None = None) -> DeviceKind:
    """``"cuda"`` when requested (or not stated) and available, else ``"cpu"``.

    ``requested="cuda"`` on a machine where torch sees no CUDA device is an error, not a silent
    fall-back to the CPU.
    """
    torch = require_torch()
    available = bool(torch.cuda.is_available())
    if requested is None:
        return "cuda" if available else "cpu"
    if requested == "cpu":
        return "cpu"
    if requested == "cuda":
        if not available:
            build = torch.version.cuda or "a CPU-only build"
            raise KvroofError(
                f"--device cuda: torch {torch.__version__} ({build}) sees no CUDA device; "
                "use --device cpu"
            )
        return "cuda"
    raise KvroofError(f"unknown device {requested!r} (expected cuda or cpu)")


def _read_proc(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _meminfo_bytes(field: str) -> float | None:
    """A field of ``/proc/meminfo`` (given there in kB = KiB) in bytes, when readable."""
    for line in _read_proc("/proc/meminfo").splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == field:
            parts = rest.split()
            if parts and parts[0].isdigit():
                return float(parts[0]) * 1024.0
    return None


def _host_total_memory() -> float | None:
    total = _meminfo_bytes("MemTotal")
    if total is not None:
        return total
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def host_available_memory() -> float:
    """Host memory available to new allocations (``MemAvailable``), bytes; total as fall-back."""
    available = _meminfo_bytes("MemAvailable")
    if available is not None:
        return available
    total = _host_total_memory()
    return total if total is not None else 0.0


def free_device_memory(device: DeviceKind) -> float:
    """Free memory on the device (bytes): ``cudaMemGetInfo`` on CUDA, host memory on the CPU."""
    if device == "cuda":
        torch = require_torch()
        free, _total = torch.cuda.mem_get_info()
        return float(free)
    return host_available_memory()


def _cpu_model() -> str:
    for line in _read_proc("/proc/cpuinfo").splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("model name", "Model", "cpu model"):
            return value.strip()
    return platform.processor() or platform.machine()


def _nvidia_driver() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi``, when it is installed and answers."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def machine_info(device: DeviceKind) -> dict[str, Any]:
    """What the results were measured on, for the JSON header (SI units: bytes)."""
    torch = require_torch()
    info: dict[str, Any] = {
        "device": device,
        "timestamp_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "kvroof_version": __version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "torch_version": str(torch.__version__),
        "torch_cuda_version": torch.version.cuda,
        "torch_threads": int(torch.get_num_threads()),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "host_memory_bytes": _host_total_memory(),
    }
    if device == "cuda":
        gpus = []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append({
                "index": index,
                "name": str(props.name),
                "memory_bytes": float(props.total_memory),
                "compute_capability": f"{props.major}.{props.minor}",
                "multiprocessors": int(props.multi_processor_count),
            })
        info["device_name"] = gpus[0]["name"] if gpus else "cuda"
        info["gpus"] = gpus
        info["driver_version"] = _nvidia_driver()
    else:
        info["device_name"] = info["cpu_model"]
        info["gpus"] = []
        info["driver_version"] = None
    return info


@dataclass(frozen=True)
class Timing:
    """Seconds per call over ``repeats`` timed calls."""

    median_s: float
    min_s: float
    repeats: int


class Timer:
    """Times a zero-argument callable: ``warmup`` untimed calls, then up to ``repeats`` timed.

    ``clock="events"`` (the default on CUDA) uses CUDA events on the current stream;
    ``clock="wall"`` uses ``time.perf_counter`` and expects the callable to return only when its
    work is done (true for CPU tensors; a CUDA callable must synchronise itself). Timing stops
    early, after at least ``min(3, repeats)`` calls, once the timed calls have taken
    ``max_seconds`` together, so one slow point cannot eat the whole run.
    """

    def __init__(
        self,
        device: DeviceKind,
        *,
        warmup: int = 1,
        repeats: int = 5,
        max_seconds: float = 2.0,
        clock: Literal["events", "wall"] | None = None,
    ) -> None:
        if repeats < 1 or warmup < 0:
            raise KvroofError(
                f"timer: repeats must be >= 1 and warmup >= 0, got {repeats} and {warmup}"
            )
        self.device = device
        self.warmup = warmup
        self.repeats = repeats
        self.max_seconds = max_seconds
        self.clock = clock or ("events" if device == "cuda" else "wall")

    def measure(self, fn: Callable[[], object]) -> Timing:
        torch = require_torch() if self.device == "cuda" else None
        for _ in range(self.warmup):
            fn()
        if torch is not None:
            torch.cuda.synchronize()
        samples: list[float] = []
        least = min(3, self.repeats)
        while len(samples) < self.repeats:
            samples.append(self._once(fn, torch))
            if len(samples) >= least and sum(samples) >= self.max_seconds:
                break
        return Timing(float(statistics.median(samples)), float(min(samples)), len(samples))

    def _once(self, fn: Callable[[], object], torch: ModuleType | None) -> float:
        if torch is not None and self.clock == "events":
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end)) / 1e3
        begin = time.perf_counter()
        fn()
        if torch is not None:
            torch.cuda.synchronize()
        return time.perf_counter() - begin

