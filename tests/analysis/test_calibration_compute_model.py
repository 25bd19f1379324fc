"""Calibration fits the roofline's efficiency, so its synthetic stack is timed by the roofline
whatever the library's default compute model (the kernel tables would ignore the fit)."""

from __future__ import annotations

from typing import Any

import pytest

import kvroof.analysis.calibration as calibration
from kvroof.cost.deployment import Deployment
from kvroof.measure.prefill import LayerShape
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)


def test_stack_deployment_pins_the_roofline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deployment is built with compute_model roofline given explicitly, so flipping the
    default (to auto) cannot move calibration onto the kernel tables."""
    seen: dict[str, Any] = {}

    def spy(**settings: Any) -> Deployment:
        seen.update(settings)
        return Deployment(**settings)

    monkeypatch.setattr(calibration, "Deployment", spy)
    system = REG.system("dgx-h100")
    shape = LayerShape(hidden=4096, num_heads=32, num_kv_heads=8, head_dim=128,
                       intermediate=14336)
    dep = calibration.stack_deployment(shape, 2, system, REG.accelerator(system.accelerator),
                                       REG.link(system.host_link))
    assert seen.get("compute_model") == "roofline"
    assert not dep.uses_kernels
