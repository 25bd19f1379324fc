"""Deployment settings the simulator does not model are refused, not ignored (a review once ran
a sweep over kernel mode, its MoE routing and the client clock of TTFT and got 8 equal rows).
Kernel mode is simulated now (tests/simulate/test_kernel_mode_sim.py), so ``--compute-model
kernels`` and ``auto`` are accepted; MoE routing on a roofline deployment and the client clock
without an engine profile are still refused."""

from __future__ import annotations

import pytest

from kvroof.cli import main
from kvroof.cost.deployment import deployment
from kvroof.errors import KvroofError
from kvroof.simulate.resources import check_simulated_settings
from kvroof.specs.registry import Registry

REG = Registry(use_env=False)
BASE = ["simulate", "--model", "llama-3.1-8b", "--accelerator", "h100", "--requests", "20",
        "--rps", "2", "--output-tokens", "5"]


@pytest.mark.parametrize(("flags", "named"), [
    (["--ttft-clock", "client"], "--ttft-clock: 'client'"),  # no engine profile: no client cost
])
def test_the_cli_refuses_them_naming_the_flag(flags: list[str], named: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kvroof: error: {named}") and err.count("\n") == 1


@pytest.mark.parametrize("model", ["kernels", "auto"])  # H100 has tables: auto is kernels
def test_the_cli_simulates_kernel_mode(model: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--compute-model", model]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_the_library_refuses_them() -> None:
    dep = deployment("qwen3-30b-a3b", accelerator="h100", registry=REG,
                     compute_model="roofline", moe_routing="power_law_1.2")
    with pytest.raises(KvroofError, match="moe_routing"):
        check_simulated_settings(dep)
    check_simulated_settings(deployment("llama-3.1-8b", accelerator="h100", registry=REG))
    # auto on an accelerator without kernel tables is the roofline, which the simulator models
    check_simulated_settings(deployment("llama-3.1-8b", accelerator="h20", registry=REG,
                                        compute_model="auto"))
