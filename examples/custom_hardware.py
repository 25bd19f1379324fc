"""Your own hardware: load the hypothetical accelerator of custom_hardware.yaml and compare its
kappa_crit with an H100's.

A Registry reads every YAML file in the folders it is given, one spec per file, so the spec is
copied into a temporary folder of its own first (in your own work, keep a folder of spec files
and pass it: kvroof.Registry(["my_specs"]), KVROOF_SPEC_PATH or --spec-path).

Run: python examples/custom_hardware.py
"""

import math
import shutil
import tempfile
from pathlib import Path

import kvroof

SPEC = Path(__file__).resolve().with_name("custom_hardware.yaml")
T = 128

with tempfile.TemporaryDirectory() as folder:
    shutil.copy(SPEC, folder)
    reg = kvroof.Registry([folder])  # built-in specs + KVROOF_SPEC_PATH + this folder
    problems = [line for line in reg.problems if folder in line]
if problems:  # a broken user spec is skipped with a warning, never an exception
    raise SystemExit(f"custom_hardware.yaml was skipped: {problems}")

gpu = reg.accelerator("future-gpu")
print(f"{gpu.label}: {gpu.peak_compute['bf16'] / 1e12:g} TFLOP/s bf16 dense, "
      f"{gpu.hbm_capacity / 1e9:g} GB at {gpu.hbm_bandwidth / 1e12:g} TB/s, host link "
      f"{reg.link(gpu.host_link).label} ({reg.link(gpu.host_link).peak_bandwidth / 1e9:g} GB/s)")

print(f"\nkappa_crit (K/T above which prefill is transfer-bound); full mode at T = {T}")
print(f"  {'':<19} {'future-gpu':^21} {'h100 + PCIe 5':>13}")
print(f"  {'model':<16} {'TP':>2} {'full':>10} {'paper mode':>10} {'full':>13}")
for model in ("qwen3-235b-a22b", "deepseek-v3", "llama-3.1-70b"):
    for tp in (1, 8):
        future = kvroof.deployment(model, accelerator="future-gpu", registry=reg, tp=tp)
        h100 = kvroof.deployment(model, accelerator="h100", registry=reg, tp=tp)
        full = [kvroof.kappa_crit(dep, T).kappa_crit for dep in (future, h100)]
        shown = ["never" if math.isinf(k) else f"{k:.2f}" for k in full]
        paper = kvroof.kappa_paper_for(future).kappa_crit
        print(f"  {model:<16} {tp:>2} {shown[0]:>10} {paper:>10.2f} {shown[1]:>13}")
print("\n4x the compute of an H100 for under 2x the link bandwidth: kappa_crit falls in every row"
      "\n(never = infinite), so shorter cached contexts already make prefill wait for the link.")
