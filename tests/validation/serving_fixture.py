"""A small serving case file for the serving validation tests: a 0.6B model on two H100s, two
short stages per condition (one staged run each), so a replay takes a fraction of a second."""

from __future__ import annotations

from pathlib import Path

SMALL_CASE = """\
source:
  title: "a test source"
  url: https://example.org/serving-test
replay:
  model: qwen3-0.6b
  accelerator: h100-sxm
  tp: 1
  replicas: 2
  engine: vllm-0.12-offload
  block_tokens: 64
  max_num_seqs: 64
  router: scoring
  workload:
    groups: 3
    prompts_per_group: 2
    prefix_tokens: 1024
    question_tokens: 64
    output_tokens: 16
    stage_duration: 4 s
    throughput: total
    arrival: poisson
    stage_interval: 1.5 s
    seed: 3
conditions:
  - id: small-hbm-only
    label: "HBM only"
    cache_policy: recompute
    router_weights: "queue=2,kv-utilization=2,prefix=3,host-prefix=0,no-hit-lru=0"
    assumptions: ["a test"]
    excluded_metrics:
      throughput: "a test of an excluded metric"
    stages:
      - {rate: 2, where: "row 2", mean_ttft: 0.05 s, mean_e2e: 0.2 s, throughput: 2000}
      - {rate: 4, where: "row 4", mean_ttft: 0.04 s, mean_e2e: 0.3 s, throughput: 4000,
         saturated: true, notes: "a test of a saturated stage"}
  - id: small-offload
    label: "with host DRAM"
    cache_policy: load
    dram_cache: 8 GiB
    router_weights: "queue=1,kv-utilization=1,prefix=1,host-prefix=1,no-hit-lru=1"
    assumptions: ["a test"]
    stages:
      - {rate: 3, where: "row 3", mean_ttft: 0.03 s, mean_tpot: 5 ms, mean_e2e: 0.1 s}
      - {rate: 5, where: "row 5", mean_ttft: 0.03 s, mean_e2e: 0.1 s}
left_out:
  - what: "p90"
    reason: "a test"
"""


def write_small_case(folder: Path, text: str = SMALL_CASE, name: str = "small.yaml") -> Path:
    """Write ``text`` as a serving case file under ``folder/serving`` and return the file."""
    serving = folder / "serving"
    serving.mkdir(parents=True, exist_ok=True)
    path = serving / name
    path.write_text(text, encoding="utf-8")
    return path
