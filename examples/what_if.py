"""What-ifs for Qwen3-235B-A22B on a DGX H100 and DeepSeek-V3 on an HGX H200 (its FP8 weights do
not fit 8x 80 GB) at TP 8: how kappa_crit moves with a faster host link or a whole Grace host,
a smaller KV format or MLA; what per-GPU link bandwidth keeps a request with K/T = 100 (about
ShareGPT's median) compute-bound; and the what-if figure.

Run: python examples/what_if.py  (the figure goes to $KVROOF_EXAMPLES_OUT or the current
directory).
"""

import dataclasses
import math
import os
from pathlib import Path

import kvroof
from kvroof.analysis.what_if import what_if_table
from kvroof.plot import save_figure, what_if_figure

T = 128  # new tokens per request
RATIO = 100  # K / T
deps = [kvroof.deployment(name, system=system, tp=8)
        for name, system in (("qwen3-235b-a22b", "dgx-h100"), ("deepseek-v3", "hgx-h200"))]

for dep in deps:
    print(f"\n{dep.label}")
    print(f"  {'scenario':<16} {'B_kv kB/tok':>11} {'BW/GPU GB/s':>11} {'kappa paper':>11} "
          f"{'kappa full T=128':>16}")
    for row in what_if_table(dep, T):
        full = "never" if row.never_transfer_bound else f"{row.kappa_full:.2f}"
        print(f"  {row.scenario:<16} {row.kv_bytes_per_token / 1e3:>11.1f} "
              f"{row.bandwidth / 1e9:>11.1f} {row.kappa_paper:>11.2f} {full:>16}")
print(f"\nBW/GPU is min(link, host DRAM per GPU = {deps[0].host_dram_share / 1e9:.1f} GB/s: a"
      "\nsocket's sustained DDR5 shared by its 4 loading GPUs): on a DGX H100 with all 8 GPUs"
      "\nloading, a link faster than PCIe Gen5 gains nothing; swapping the whole host for Grace"
      "\nCPUs (C2C rows) does. MLA at TP 8 can lower kappa_crit: its latent is replicated on"
      "\nevery rank, while GQA KV is split over the ranks (Qwen3-235B's 4 KV heads: 4 ways).")

print(f"\nPer-GPU link bandwidth at which K/T = {RATIO} stays compute-bound at T = {T}, and the"
      f"\nfloors under the transfer time that no link can lift (ms, K = {RATIO * T}):")
variants = {
    "as given": {},
    "interleaved": {"host_memory_locality": "interleaved"},
    "+ 1 copy/block": {"host_memory_locality": "interleaved",
                       "granularity": kvroof.Granularity(layout="per-block")},
}
print(f"  {'model':<16} {'setting':<15} {'compute':>8} {'DRAM floor':>10} {'copy latency':>12} "
      f"{'link needed':>12}")
for dep in deps:
    for text, change in variants.items():
        changed = dataclasses.replace(dep, **change)
        compute = kvroof.compute_time(changed, T, RATIO * T)
        parts = kvroof.transfer_breakdown(changed, RATIO * T, T)
        need = kvroof.required_bandwidth(changed, T, RATIO).value
        shown = f"{need / 1e9:.0f} GB/s" if math.isfinite(need) else "none"
        print(f"  {dep.model.name:<16} {text:<15} {compute * 1e3:>8.2f} "
              f"{parts.bytes_per_rank / changed.host_dram_share * 1e3:>10.2f} "
              f"{parts.latency_time * 1e3:>12.2f} {shown:>12}")
print("  as given: all 8 GPUs load at once, 4 per socket, from their own socket's DRAM; 2 us per"
      "\n  copy, one copy per layer per 256-token block. interleaved: buffers spread over both"
      "\n  sockets (half of each GPU's bytes cross the inter-socket link). 1 copy/block: one copy"
      "\n  moves a block of every layer.")

out = Path(os.environ.get("KVROOF_EXAMPLES_OUT", "."))
out.mkdir(parents=True, exist_ok=True)
print(f"\nfigure: {save_figure(what_if_figure(deps, T), out / 'what_if.png')}")
