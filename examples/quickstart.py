"""Quickstart: a deployment, its kappa_crit (full mode alone and in a busy iteration, and paper
mode), one TTFT, one figure.

Run: python examples/quickstart.py  (the figure goes to $KVROOF_EXAMPLES_OUT or the current
directory).
"""

import os
from pathlib import Path

import kvroof
from kvroof.plot import offload_roofline_figure, save_figure

dep = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8)
print(dep.label)
print(f"memory per GPU: {kvroof.memory_fit(dep).needed / 1e9:.1f} GB of "
      f"{kvroof.memory_fit(dep).usable / 1e9:.0f} GB usable")
print(f"kappa_crit, full mode at T = 128: {kvroof.kappa_crit(dep, 128).kappa_crit:.3f}")
busy = kvroof.deployment("qwen3-235b-a22b", system="dgx-h100", tp=8, iteration_tokens=8192)
print(f"kappa_crit, in an 8192-token iteration: {kvroof.kappa_crit(busy, 128).kappa_crit:.3f}")
print(f"kappa_crit, paper mode:           {kvroof.kappa_paper_for(dep).kappa_crit:.3f}")

r = kvroof.ttft(dep, 128, 16384, overlap="layerwise")  # T = 128 new tokens on K = 16384 cached
print(f"TTFT (T = 128, K = 16384, layerwise): {r.ttft * 1e3:.2f} ms, {r.bound}-bound, "
      f"P_OH {r.p_oh:.1f}")

out = Path(os.environ.get("KVROOF_EXAMPLES_OUT", "."))
out.mkdir(parents=True, exist_ok=True)
fig = offload_roofline_figure(["qwen3-235b-a22b"], tp=8)
print(f"figure: {save_figure(fig, out / 'quickstart_roofline.png')}")
