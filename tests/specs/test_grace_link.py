"""GB200's host link per GPU: one Grace's NVLink-C2C is shared by the superchip's two Blackwell
GPUs (hardware_specs/systems/gb200.yaml, gpus_per_host_link: 2), so each gets half of it when
both load KV at once, and all of it when it loads alone."""

from __future__ import annotations

import pytest

from kvroof.cost.deployment import deployment
from kvroof.lookup import get_system

# Hand derivation. NVIDIA quotes NVLink-C2C at 900 GB/s, both directions added: 450 GB/s per
# direction (hardware_specs/links/nvlink-c2c.yaml, peak_bandwidth, sourced there). A GB200
# superchip is one Grace and two Blackwell GPUs on that one C2C (MLPerf v6.1 Crusoe GB200-NVL72
# system description; verda.com/blog/gb300-nvl72-architecture: "1 Grace CPU and 2 Blackwell
# GPUs"), so two GPUs loading at once get 450 / 2 = 225 GB/s each. The sustained figure is
# nvbandwidth's 346 GB/s host-to-device on GH200's C2C (nvlink-c2c.yaml), 346 / 2 = 173 GB/s each.
PEAK_PER_DIRECTION = 900e9 / 2
SUSTAINED = 346e9


def test_gb200_superchip_shares_one_c2c_between_its_two_gpus() -> None:
    system = get_system("gb200")
    assert (system.num_accelerators, system.gpus_per_host_link) == (2, 2)
    assert system.host_link == "nvlink-c2c"


@pytest.mark.parametrize("tp", [1, 2])
def test_each_gpu_gets_half_the_c2c_when_both_load(tp: int) -> None:
    # every GPU of the system loads by default (gpus_loading = 2), whatever the TP
    dep = deployment("qwen3-32b", system="gb200", tp=tp)
    assert float(dep.link_bandwidth) == pytest.approx(PEAK_PER_DIRECTION / 2)  # 225 GB/s
    sustained = deployment("qwen3-32b", system="gb200", tp=tp, bandwidth_source="sustained")
    assert float(sustained.link_bandwidth) == pytest.approx(SUSTAINED / 2)  # 173 GB/s


def test_a_gpu_loading_alone_gets_the_whole_c2c() -> None:
    alone = deployment("qwen3-32b", system="gb200", tp=1, gpus_loading=1)
    assert float(alone.link_bandwidth) == pytest.approx(PEAK_PER_DIRECTION)  # 450 GB/s
    # an accelerator without its system is one GPU on its own link
    assert float(deployment("qwen3-32b", accelerator="gb200").link_bandwidth) == pytest.approx(
        PEAK_PER_DIRECTION)
    assert float(deployment("qwen3-32b", accelerator="gb300").link_bandwidth) == pytest.approx(
        PEAK_PER_DIRECTION)
