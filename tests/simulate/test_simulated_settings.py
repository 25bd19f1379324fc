"""Deployment settings the simulator does not model are refused, not ignored: it times
iterations with the roofline, so kernel mode, its MoE routing and the client clock of TTFT
gave results identical to the default (a review ran a sweep over the three and got 8 equal
rows)."""

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
    (["--compute-model", "kernels"], "--compute-model: 'kernels'"),
    (["--compute-model", "auto"], "--compute-model: 'auto'"),  # H100 has tables: kernels
    (["--ttft-clock", "client"], "--ttft-clock: 'client'"),
])
def test_the_cli_refuses_them_naming_the_flag(flags: list[str], named: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kvroof: error: {named}") and err.count("\n") == 1


def test_the_library_refuses_them() -> None:
    dep = deployment("qwen3-30b-a3b", accelerator="h100", registry=REG,
                     compute_model="roofline", moe_routing="power_law_1.2")
    with pytest.raises(KvroofError, match="moe_routing"):
        check_simulated_settings(dep)
    check_simulated_settings(deployment("llama-3.1-8b", accelerator="h100", registry=REG))
    # auto on an accelerator without kernel tables is the roofline, which the simulator models
    check_simulated_settings(deployment("llama-3.1-8b", accelerator="h20", registry=REG,
                                        compute_model="auto"))
