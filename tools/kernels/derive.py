"""Derive kvroof's kernel tables from a checkout of ai-dynamo/aiconfigurator.

    python tools/kernels/derive.py --aiconfigurator PATH [--out src/kvroof/kernels/data]

PATH is a checkout (a folder holding ``aic-core/src/aiconfigurator_core/systems/data``) or a
git directory of the repository (bare or not; files are read from its HEAD with ``git``).
Needs pyarrow (``pip install -e '.[kernels]'``); the package reads the output without it.

For every aiconfigurator system that maps to a kvroof accelerator with a spec, and for each op
(GEMM, context attention, MoE), one engine version is used: vLLM's newest version holding
measured rows, else SGLang's, else TensorRT-LLM's. The all-reduce table takes vLLM's custom
all-reduce (CUDA graph and eager), SGLang's and TensorRT-LLM's where measured (each engine's
newest version) and NCCL's newest version. Versions that only declare another version's data
(``reuse.yaml``) are listed in the provenance, never used as a source.

Each measured row becomes ``efficiency = roofline time / measured time`` with the roofline of
``kvroof.kernels.work`` at the kvroof spec's dense peak of the op's data type and its HBM
bandwidth (all-reduce rows stay times in seconds). Rows on a coarse grid of each op's shape
axes are kept (duplicates of one cell: the median of their efficiencies); grid cells without a
row are filled by linear interpolation in the logarithm of the axes from measured cells
(holding the ends), and marked unmeasured. See docs/kernels.md.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "src"))

from kvroof.kernels.tables import (  # noqa: E402
    Grid,
    SystemTables,
    Table,
    Variant,
    round_value,
    write_system,
)
from kvroof.kernels.work import (  # noqa: E402
    ATTENTION_DTYPES,
    GEMM_DTYPES,
    KV_DTYPES,
    MOE_DTYPES,
    attention_work,
    gemm_work,
    moe_work,
    roofline_time,
)
from kvroof.specs.registry import Registry  # noqa: E402

DATA_PATH = "aic-core/src/aiconfigurator_core/systems/data"
REPOSITORY = "https://github.com/ai-dynamo/aiconfigurator"
LICENSE = "Apache-2.0"
FRAMEWORKS = ("vllm", "sglang", "trtllm")

SYSTEMS: dict[str, str] = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200",
    "b200_sxm": "b200",
    "b300_sxm": "b300",
    "gb200": "gb200",
    "gb300": "gb300",
    "l40s": "l40s",
    "a100_sxm": "a100-sxm",
    "a100_pcie": "a100-pcie",
    "h100_pcie": "h100-pcie",
    "rtx_pro_6000_server": "rtx-pro-6000-server",
}
"""aiconfigurator system folder -> kvroof accelerator name."""

DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
"""aiconfigurator data-type names that kvroof writes differently (others are kept)."""

ATTENTION_PREFERENCE = (
    "vllm_flash_attn_fa3", "vllm_flash_attn_fa4", "vllm_flash_attn_fa2", "vllm_flash_attn",
    "vllm_flashinfer_trtllmprefill", "vllm_flashinfer_fiprefill", "vllm_flashinfer",
    "fa3", "flash_attention", "flashinfer", "torch_flow", "torch_flow_flashinfer",
)
"""Where one attention shape was measured with several kernels: the prefill kernel the engine
selects by default comes first (decode-path and Triton kernels last)."""

NOTICE = """\
kvroof kernel tables (src/kvroof/kernels/data)

The files in this folder (*.json.gz, index.json) are derived from per-op GPU kernel
measurements published in ai-dynamo/aiconfigurator:

  {repository}
  commit {commit}
  files under {data_path}/<system>/{{gemm,attention,moe,comm}}/

  Copyright (c) NVIDIA CORPORATION & AFFILIATES. All rights reserved.
  Licensed under the Apache License, Version 2.0 (the "License"); you may not use these
  files except in compliance with the License. You may obtain a copy of the License at
  http://www.apache.org/licenses/LICENSE-2.0
  Unless required by applicable law or agreed to in writing, software distributed under
  the License is distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
  KIND, either express or implied. See the License for the specific language governing
  permissions and limitations under the License.

Changes made by kvroof: measured latencies were converted to efficiencies (roofline time /
measured time, with kvroof's accelerator specs and the counts of kvroof.kernels.work) or,
for all-reduce, to seconds against message bytes; rows were selected (one engine version per
system and op; batch 1 and no cached prefix for attention; tensor-parallel experts for MoE),
placed on a coarse grid (cells without a measurement filled by log-space interpolation and
marked) and rounded to {digits} significant digits. Each table records its source files,
engine version, kernel sources and rows used. Regenerate with:

  python tools/kernels/derive.py --aiconfigurator PATH
"""


# --- reading the checkout ------------------------------------------------------------------

class Source:
    """The files of an aiconfigurator checkout under DATA_PATH, and its commit."""

    def __init__(self, path: Path, commit: str | None = None) -> None:
        self.path = path
        self.git_dir: Path | None = None
        if (path / DATA_PATH).is_dir():
            self.folder: Path | None = path / DATA_PATH
            self.commit = commit or self._git(["rev-parse", "HEAD"], cwd=path) or "unknown"
            self.files = sorted(str(p.relative_to(path)) for p in self.folder.rglob("*")
                                if p.is_file())
        else:
            self.folder = None
            self.git_dir = path
            commit = self._git(["--git-dir", str(path), "rev-parse", "HEAD"])
            if not commit:
                raise SystemExit(f"{path}: neither a checkout with {DATA_PATH} nor a git "
                                 "directory")
            self.commit = commit
            listing = self._git(["--git-dir", str(path), "ls-tree", "-r", "--name-only",
                                 "HEAD", "--", DATA_PATH]) or ""
            self.files = sorted(listing.splitlines())
        if not self.files:
            raise SystemExit(f"{path}: no files under {DATA_PATH}")

    @staticmethod
    def _git(args: list[str], cwd: Path | None = None) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                                  check=True)
        except (OSError, subprocess.CalledProcessError):
            return None
        return done.stdout.strip()

    def read(self, relpath: str) -> bytes:
        if self.folder is not None:
            return (self.path / relpath).read_bytes()
        done = subprocess.run(["git", "--git-dir", str(self.git_dir), "cat-file", "blob",
                               f"HEAD:{relpath}"], capture_output=True, check=True)
        return done.stdout

    def systems(self) -> list[str]:
        prefix = DATA_PATH + "/"
        return sorted({f[len(prefix):].split("/")[0] for f in self.files
                       if f.startswith(prefix)})

    def versions(self, system: str, op_folder: str, framework: str, table_file: str
                 ) -> list[str]:
        """Versions (newest first) whose folder holds ``table_file`` itself."""
        prefix = f"{DATA_PATH}/{system}/{op_folder}/{framework}/"
        found = {f[len(prefix):].split("/")[0] for f in self.files
                 if f.startswith(prefix) and f.endswith("/" + table_file)
                 and f.count("/") == prefix.count("/") + 1}
        return sorted(found, key=version_key, reverse=True)

    def reuse_declarations(self, system: str, op_folder: str, framework: str,
                           table_name: str, donor: str) -> list[str]:
        """Versions whose reuse.yaml declares ``table_name`` from ``donor``."""
        prefix = f"{DATA_PATH}/{system}/{op_folder}/{framework}/"
        out = []
        for f in self.files:
            if f.startswith(prefix) and f.endswith("/reuse.yaml"):
                text = self.read(f).decode("utf-8", "replace")
                pairs = re.findall(r"table:\s*(\S+)\s*\n\s*from_version:\s*['\"]?([^'\"\s]+)",
                                   text)
                if (table_name, donor) in pairs:
                    out.append(f[len(prefix):].split("/")[0])
        return sorted(out, key=version_key)


def version_key(version: str) -> tuple[Any, ...]:
    """Order engine versions: 1.3.0rc20 < 1.3.0 < 1.3.0.post1, numerically."""
    match = re.match(r"^(\d+(?:\.\d+)*)(.*)$", version)
    if match is None:
        return ((0,), 0, 0, version)
    release = tuple(int(p) for p in match.group(1).split("."))
    release = release + (0,) * (4 - len(release))
    rest = match.group(2)
    number = int(re.sub(r"\D", "", rest) or 0)
    if re.match(r"^\.?(rc|a|b|dev)", rest):
        return (release, 0, number, rest)
    if rest.startswith(".post") or rest.startswith("post"):
        return (release, 2, number, rest)
    return (release, 1, number, rest)


def read_parquet(source: Source, relpath: str) -> dict[str, np.ndarray]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(pa.BufferReader(source.read(relpath)))
    return {name: table.column(name).to_numpy(zero_copy_only=False)
            for name in table.column_names}


@dataclass
class Choice:
    """The engine version chosen for one system and op."""

    framework: str
    version: str
    path: str
    alternatives: list[str] = field(default_factory=list)
    declared_for: list[str] = field(default_factory=list)


def choose(source: Source, system: str, op_folder: str, table_file: str,
           frameworks: Sequence[str] = FRAMEWORKS) -> Choice | None:
    found: dict[str, list[str]] = {}
    for framework in frameworks:
        versions = source.versions(system, op_folder, framework, table_file)
        if versions:
            found[framework] = versions
    if not found:
        return None
    framework = next(f for f in frameworks if f in found)
    version = found[framework][0]
    alternatives = [f"{f} {v[0]}" for f, v in found.items() if f != framework]
    table_name = table_file.removesuffix(".parquet")
    return Choice(
        framework=framework,
        version=version,
        path=f"{DATA_PATH}/{system}/{op_folder}/{framework}/{version}/{table_file}",
        alternatives=alternatives,
        declared_for=source.reuse_declarations(system, op_folder, framework, table_name,
                                               version),
    )


# --- grids ---------------------------------------------------------------------------------

def coarse(values: Iterable[float]) -> list[float]:
    """The measured values on the coarse ladder {2^i, 3 * 2^i}."""
    out = []
    for v in sorted(set(float(x) for x in values)):
        if v <= 0:
            continue
        for base in (1.0, 3.0):
            e = math.log2(v / base)
            if abs(e - round(e)) < 1e-9 and round(e) >= 0:
                out.append(v)
                break
    return out


def fill(values: np.ndarray, log_points: Sequence[np.ndarray]) -> np.ndarray:
    """Fill the NaN cells of ``values``: while some can be, cells bracketed by known cells
    along an axis take the mean of their linear interpolations (in log coordinates) along
    such axes; when none is bracketed, cells take the mean of the nearest known value along
    each axis with any (the boundary held). Deterministic, independent of axis order."""
    values = values.astype(np.float64).copy()
    while True:
        unknown = ~np.isfinite(values)
        if not unknown.any():
            return values
        sums = {kind: np.zeros(values.shape) for kind in ("inside", "held")}
        counts = {kind: np.zeros(values.shape) for kind in ("inside", "held")}
        for axis, logp in enumerate(log_points):
            moved = np.moveaxis(values, axis, -1)
            lines = moved.reshape(-1, moved.shape[-1])
            inside = np.zeros_like(lines)
            held = np.zeros_like(lines)
            has_inside = np.zeros(lines.shape, dtype=bool)
            has_held = np.zeros(lines.shape, dtype=bool)
            for row in range(lines.shape[0]):
                line = lines[row]
                known = np.isfinite(line)
                if not known.any() or known.all():
                    continue
                x_known = logp[known]
                guess = np.interp(logp, x_known, line[known])
                bracketed = (logp > x_known.min()) & (logp < x_known.max()) & ~known
                outer = ~bracketed & ~known
                inside[row, bracketed] = guess[bracketed]
                has_inside[row, bracketed] = True
                held[row, outer] = guess[outer]
                has_held[row, outer] = True
            for kind, array, mask in (("inside", inside, has_inside),
                                      ("held", held, has_held)):
                back = np.moveaxis(array.reshape(moved.shape), -1, axis)
                back_mask = np.moveaxis(mask.reshape(moved.shape), -1, axis)
                sums[kind] += np.where(back_mask, back, 0.0)
                counts[kind] += back_mask
        kind = "inside" if (counts["inside"][unknown] > 0).any() else "held"
        can = unknown & (counts[kind] > 0)
        if not can.any():
            raise ValueError("grid has no measured cell to fill from")
        values[can] = sums[kind][can] / counts[kind][can]


def make_grid(axes: Sequence[str], points: Sequence[Sequence[float]],
              cells: dict[tuple[int, ...], list[float]]) -> Grid:
    shape = tuple(len(p) for p in points)
    raw = np.full(shape, np.nan)
    for index, found in cells.items():
        raw[index] = float(np.median(found))
    measured = np.isfinite(raw)
    pts = tuple(np.asarray(p, dtype=np.float64) for p in points)
    filled = fill(raw, [np.log(p) for p in pts])
    rounded = np.vectorize(round_value, otypes=[np.float64])(filled)
    return Grid(tuple(axes), pts, rounded, measured)


def cell_index(points: Sequence[Sequence[float]], coords: Sequence[np.ndarray]
               ) -> np.ndarray:
    """Per row: the flat cell of ``coords`` on the grid, or -1 when off the grid."""
    shape = tuple(len(p) for p in points)
    on = np.ones(len(coords[0]), dtype=bool)
    parts = []
    for p, c in zip(points, coords, strict=True):
        axis = np.asarray(p, dtype=np.float64)
        c = np.asarray(c, dtype=np.float64)
        i = np.clip(np.searchsorted(axis, c), 0, len(axis) - 1)
        on &= axis[i] == c
        parts.append(i)
    flat = np.ravel_multi_index(tuple(parts), shape)
    return np.where(on, flat, -1)


def collect(points: Sequence[Sequence[float]], coords: Sequence[np.ndarray],
            values: np.ndarray, sources: np.ndarray
            ) -> tuple[dict[tuple[int, ...], list[float]], Counter[str], int]:
    """Rows on the grid by cell (one kernel source per cell: the preferred one), the kernel
    sources used, and the number of rows used."""
    shape = tuple(len(p) for p in points)
    flat = cell_index(points, coords)
    by_cell: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for f, v, s in zip(flat, values, sources, strict=True):
        if f >= 0 and np.isfinite(v) and v > 0:
            by_cell[int(f)].append((str(s), float(v)))
    cells: dict[tuple[int, ...], list[float]] = {}
    used: Counter[str] = Counter()
    rows = 0
    for f, entries in by_cell.items():
        kinds = {s for s, _ in entries}
        if len(kinds) > 1:
            ranked = sorted(kinds, key=lambda s: (ATTENTION_PREFERENCE.index(s)
                                                  if s in ATTENTION_PREFERENCE
                                                  else len(ATTENTION_PREFERENCE), s))
            entries = [e for e in entries if e[0] == ranked[0]]
        cells[np.unravel_index(f, shape)] = [v for _, v in entries]
        used.update(s for s, _ in entries)
        rows += len(entries)
    return cells, used, rows


def dtype_name(raw: str) -> str:
    return DTYPE_NAMES.get(raw, raw)


# --- tables ------------------------------------------------------------------------------

@dataclass
class Built:
    table: Table
    rows_in_file: int
    rows_used: int


def efficiency_of(flops: np.ndarray, bytes_: np.ndarray, peak: float, hbm: float,
                  latency_ms: np.ndarray) -> np.ndarray:
    return roofline_time(flops, bytes_, peak, hbm) / (latency_ms * 1e-3)


def base_provenance(choice: Choice, rows: dict[str, np.ndarray]) -> dict[str, Any]:
    devices = sorted({str(d) for d in rows.get("device", [])})
    return {
        "framework": choice.framework,
        "version": choice.version,
        "selection": ("newest version with measured rows of the first of "
                      + ", ".join(FRAMEWORKS) + " present"),
        "other_frameworks": choice.alternatives,
        "declared_for_versions": choice.declared_for,
        "files": [choice.path],
        "devices": devices,
    }


def build_gemm(source: Source, system: str, peaks: dict[str, float], hbm: float,
               log: list[str]) -> Built | None:
    choice = choose(source, system, "gemm", "gemm_perf.parquet")
    if choice is None:
        return None
    rows = read_parquet(source, choice.path)
    variants = []
    skipped = []
    total_used = 0
    dtypes = np.array([dtype_name(str(d)) for d in rows["gemm_dtype"]])
    for dtype in sorted({str(d) for d in dtypes}):
        info = GEMM_DTYPES.get(dtype)
        if info is None or info.peak not in peaks:
            skipped.append(dtype)
            continue
        pick = dtypes == dtype
        m, n, k = (rows[c][pick].astype(np.float64) for c in ("m", "n", "k"))
        flops, bytes_ = gemm_work(m, n, k, dtype)
        eff = efficiency_of(flops, bytes_, peaks[info.peak], hbm, rows["latency"][pick])
        points = [coarse(m), coarse(n), coarse(k)]
        cells, used, count = collect(points, [m, n, k], eff, rows["kernel_source"][pick])
        if not cells:
            skipped.append(dtype)
            continue
        grid = make_grid(("m", "n", "k"), points, cells)
        variants.append(Variant({"dtype": dtype}, grid, info.peak, count, dict(used)))
        total_used += count
    prov = base_provenance(choice, rows)
    prov.update({
        "rows_in_files": len(rows["latency"]),
        "rows_used": total_used,
        "skipped_dtypes": skipped,
        "grid": "m, n, k: the measured values on the ladder {2^i, 3*2^i}",
        "definition": "efficiency = roofline / measured; roofline = max(2mnk / peak[dtype], "
                      "(mk a + kn w + 2mn) / HBM) (kvroof.kernels.work.gemm_work)",
    })
    log.append(f"  gemm: {choice.framework} {choice.version}, dtypes "
               f"{[str(v.key['dtype']) for v in variants]}, {total_used} rows"
               + (f", skipped {skipped}" if skipped else ""))
    return Built(Table("gemm", "efficiency", ("dtype",), ("m", "n", "k"), tuple(variants),
                       prov), len(rows["latency"]), total_used)


def build_attention(source: Source, system: str, peaks: dict[str, float], hbm: float,
                    log: list[str]) -> Built | None:
    choice = choose(source, system, "attention", "context_attention_perf.parquet")
    if choice is None:
        return None
    rows = read_parquet(source, choice.path)
    n_rows = len(rows["latency"])
    keep = np.ones(n_rows, dtype=bool)
    for column, wanted in (("batch_size", 1), ("step", 0), ("beam_width", 1)):
        if column in rows:
            keep &= rows[column] == wanted
    window = rows["window_size"] if "window_size" in rows else np.zeros(n_rows, dtype=int)
    attn = np.array([dtype_name(str(d)) for d in rows["attn_dtype"]])
    kvd = np.array([dtype_name(str(d)) for d in rows["kv_cache_dtype"]])
    variants = []
    skipped: set[str] = set()
    total_used = 0
    combos = sorted({(str(a), str(c), int(d)) for a, c, d, k in
                     zip(attn, kvd, rows["head_dim"], keep, strict=True) if k})
    for dtype, kv_dtype, head_dim in combos:
        info = ATTENTION_DTYPES.get(dtype)
        if info is None or info.peak not in peaks or kv_dtype not in KV_DTYPES:
            skipped.add(f"{dtype}/{kv_dtype}")
            continue
        pick = keep & (attn == dtype) & (kvd == kv_dtype) & (rows["head_dim"] == head_dim)
        s = rows["isl"][pick].astype(np.float64)
        h = rows["num_heads"][pick].astype(np.float64)
        kv = rows["num_key_value_heads"][pick].astype(np.float64)
        w = window[pick].astype(np.float64)
        flops, bytes_ = attention_work(s, h, kv, head_dim, w, dtype, kv_dtype)
        eff = efficiency_of(flops, bytes_, peaks[info.peak], hbm, rows["latency"][pick])
        full = float(s.max())
        windows = sorted({float(x) for x in w if 0 < x < full})
        w_coord = np.where((w <= 0) | (w >= full), full, w)
        points = [sorted(set(s)), sorted(set(h)), sorted(set(kv)), [*windows, full]]
        cells, used, count = collect(points, [s, h, kv, w_coord], eff,
                                     rows["kernel_source"][pick])
        if not cells:
            continue
        grid = make_grid(("seq_len", "heads", "kv_heads", "window"), points, cells)
        variants.append(Variant({"dtype": dtype, "kv_dtype": kv_dtype, "head_dim": head_dim},
                                grid, info.peak, count, dict(used)))
        total_used += count
    prov = base_provenance(choice, rows)
    prov.update({
        "rows_in_files": int(n_rows),
        "rows_used": total_used,
        "filters": "batch_size 1, step 0 (no cached prefix), beam_width 1",
        "skipped_dtypes": sorted(skipped),
        "grid": "seq_len, heads, kv_heads: every measured value; window: the measured "
                "windows and, as its last point, full attention (the longest seq_len)",
        "definition": "efficiency = roofline / measured; roofline = max(4 h d P / peak[dtype],"
                      " S d (2 h a + 2 kv c) / HBM), P the causal (windowed) query-key pairs "
                      "(kvroof.kernels.work.attention_work)",
    })
    log.append(f"  attention: {choice.framework} {choice.version}, "
               f"{len(variants)} variants, {total_used} rows"
               + (f", skipped {sorted(skipped)}" if skipped else ""))
    return Built(Table("attention", "efficiency", ("dtype", "kv_dtype", "head_dim"),
                       ("seq_len", "heads", "kv_heads", "window"), tuple(variants), prov),
                 n_rows, total_used)


def build_moe(source: Source, system: str, peaks: dict[str, float], hbm: float,
              log: list[str]) -> Built | None:
    choice = choose(source, system, "moe", "moe_perf.parquet")
    if choice is None:
        return None
    rows = read_parquet(source, choice.path)
    n_rows = len(rows["latency"])
    keep = rows["moe_ep_size"] == 1 if "moe_ep_size" in rows else np.ones(n_rows, bool)
    dtypes = np.array([dtype_name(str(d)) for d in rows["moe_dtype"]])
    dist = np.array([str(d) for d in rows["distribution"]])
    inter_rank = rows["inter_size"].astype(np.float64) / rows["moe_tp_size"]
    keep &= inter_rank == np.round(inter_rank)
    variants = []
    skipped: set[str] = set()
    total_used = 0
    combos = sorted({(str(d), str(r), int(h), int(e), int(k)) for d, r, h, e, k, ok in zip(
        dtypes, dist, rows["hidden_size"], rows["num_experts"], rows["topk"], keep,
        strict=True) if ok})
    for dtype, distribution, hidden, experts, top_k in combos:
        info = MOE_DTYPES.get(dtype)
        if info is None or info.peak not in peaks:
            skipped.add(dtype)
            continue
        pick = (keep & (dtypes == dtype) & (dist == distribution)
                & (rows["hidden_size"] == hidden) & (rows["num_experts"] == experts)
                & (rows["topk"] == top_k))
        t = rows["num_tokens"][pick].astype(np.float64)
        i = inter_rank[pick]
        flops, bytes_ = moe_work(t, hidden, i, experts, top_k, dtype)
        eff = efficiency_of(flops, bytes_, peaks[info.peak], hbm, rows["latency"][pick])
        points = [sorted(set(t)), sorted(set(i))]
        cells, used, count = collect(points, [t, i], eff, rows["kernel_source"][pick])
        if not cells:
            continue
        grid = make_grid(("tokens", "inter_per_rank"), points, cells)
        variants.append(Variant({"dtype": dtype, "distribution": distribution,
                                 "hidden": hidden, "experts": experts, "top_k": top_k},
                                grid, info.peak, count, dict(used)))
        total_used += count
    prov = base_provenance(choice, rows)
    prov.update({
        "rows_in_files": int(n_rows),
        "rows_used": total_used,
        "filters": "moe_ep_size 1 (tensor-parallel experts; expert-parallel rows left out), "
                   "inter_size divisible by moe_tp_size",
        "skipped_dtypes": sorted(skipped),
        "grid": "one grid per (dtype, distribution, hidden, experts, top_k): tokens and "
                "inter_per_rank = inter_size / moe_tp_size, every measured value",
        "definition": "efficiency = roofline / measured; roofline = max(6 T k h i / peak"
                      "[dtype], (min(E, T k) 3 h i w + 4 T h) / HBM) "
                      "(kvroof.kernels.work.moe_work)",
    })
    log.append(f"  moe: {choice.framework} {choice.version}, {len(variants)} variants, "
               f"{total_used} rows" + (f", skipped {sorted(skipped)}" if skipped else ""))
    return Built(Table("moe", "efficiency",
                       ("dtype", "distribution", "hidden", "experts", "top_k"),
                       ("tokens", "inter_per_rank"), tuple(variants), prov),
                 n_rows, total_used)


BYTES_PER_ELEMENT = {"bfloat16": 2, "half": 2, "float16": 2, "fp16": 2, "bf16": 2}


def _allreduce_variant(backend: str, rows: dict[str, np.ndarray], pick: np.ndarray,
                       dtype_column: str) -> tuple[Variant, int] | None:
    sizes = np.array([BYTES_PER_ELEMENT.get(str(d), 0) for d in rows[dtype_column][pick]],
                     dtype=np.float64)
    ok = sizes > 0
    message = rows["message_size"][pick].astype(np.float64)[ok] * sizes[ok]
    gpus = rows["num_gpus"][pick].astype(np.float64)[ok]
    seconds = rows["latency"][pick][ok] * 1e-3
    if message.size == 0:
        return None
    points = [sorted(set(message)), sorted(set(gpus))]
    cells, used, count = collect(points, [message, gpus], seconds,
                                 rows["kernel_source"][pick][ok])
    grid = make_grid(("message_bytes", "num_gpus"), points, cells)
    return Variant({"backend": backend}, grid, "", count, dict(used)), count


def build_allreduce(source: Source, system: str, log: list[str]) -> Built | None:
    variants: list[Variant] = []
    files: list[str] = []
    versions: dict[str, str] = {}
    rows_in = 0
    rows_used = 0
    for framework in FRAMEWORKS:
        choice = choose(source, system, "comm", "custom_allreduce_perf.parquet", (framework,))
        if choice is None:
            continue
        rows = read_parquet(source, choice.path)
        rows_in += len(rows["latency"])
        if "backend" in rows:
            labels = np.array([str(b) for b in rows["backend"]])
        else:
            labels = np.array([framework if framework == "trtllm" else f"{framework}_custom"
                               for _ in rows["latency"]])
        for label in sorted(set(labels)):
            if framework != "trtllm" and not label.startswith(framework):
                continue  # an engine folder holding another engine's all-reduce
            made = _allreduce_variant(label, rows, labels == label, "allreduce_dtype")
            if made is not None:
                variants.append(made[0])
                rows_used += made[1]
                versions[label] = f"{choice.framework} {choice.version}"
        files.append(choice.path)
    nccl_versions = source.versions(system, "comm", "nccl", "nccl_perf.parquet")
    for version in nccl_versions:
        path = f"{DATA_PATH}/{system}/comm/nccl/{version}/nccl_perf.parquet"
        rows = read_parquet(source, path)
        pick = np.array([str(o) == "all_reduce" for o in rows["op_name"]])
        if not pick.any():
            continue
        rows_in += len(rows["latency"])
        made = _allreduce_variant("nccl", rows, pick, "nccl_dtype")
        if made is not None:
            variants.append(made[0])
            rows_used += made[1]
            versions["nccl"] = f"nccl {version}"
            files.append(path)
        break
    if not variants:
        return None
    prov = {
        "framework": "per backend",
        "version": "per backend",
        "backends": versions,
        "selection": "each engine's newest version with a custom all-reduce table; NCCL's "
                     "newest version with all_reduce rows",
        "files": files,
        "rows_in_files": rows_in,
        "rows_used": rows_used,
        "grid": "message_bytes (elements x 2 bytes, 16-bit data) and num_gpus, every "
                "measured value",
        "definition": "time of one all-reduce in seconds (measured latency)",
    }
    log.append(f"  allreduce: {', '.join(f'{b} ({v})' for b, v in versions.items())}, "
               f"{rows_used} rows")
    return Built(Table("allreduce", "time", ("backend",), ("message_bytes", "num_gpus"),
                       tuple(variants), prov), rows_in, rows_used)


# --- main ----------------------------------------------------------------------------------

def derive(source: Source, out: Path, systems: Sequence[str] | None = None,
           echo: Callable[[str], None] = print) -> dict[str, Any]:
    registry = Registry()
    previous: dict[str, Any] = {}
    if systems and (out / "index.json").is_file():  # a partial run keeps the others
        previous = json.loads((out / "index.json").read_text(encoding="utf-8"))
    index: dict[str, Any] = {"accelerators": {}, "skipped": {}, "source": {
        "repository": REPOSITORY, "commit": source.commit, "license": LICENSE,
        "data_path": DATA_PATH, "derived_by": "tools/kernels/derive.py", "notice": "NOTICE"}}
    for system in source.systems():
        if systems and system not in systems:
            continue
        name = SYSTEMS.get(system)
        if name is None:
            index["skipped"][system] = "no kvroof accelerator spec for this system"
            echo(f"{system}: skipped (no kvroof accelerator spec)")
            continue
        spec = registry.accelerator(name)
        peaks = {str(k): float(v) for k, v in spec.peak_compute.items()}
        hbm = float(spec.hbm_bandwidth)
        log: list[str] = []
        built = {
            "gemm": build_gemm(source, system, peaks, hbm, log),
            "attention": build_attention(source, system, peaks, hbm, log),
            "moe": build_moe(source, system, peaks, hbm, log),
            "allreduce": build_allreduce(source, system, log),
        }
        tables = {op: b.table for op, b in built.items() if b is not None}
        if not tables:
            index["skipped"][system] = "no measured GEMM, attention, MoE or all-reduce rows"
            echo(f"{system} -> {name}: skipped (no measured rows)")
            continue
        used_peaks = sorted({v.peak for t in tables.values() for v in t.variants if v.peak})
        devices = sorted({d for t in tables.values() for d in t.provenance.get("devices", [])})
        system_tables = SystemTables(
            accelerator=name,
            source_system=system,
            device=", ".join(devices),
            peak_flops={p: peaks[p] for p in used_peaks},
            hbm_bandwidth=hbm,
            source={"repository": REPOSITORY, "commit": source.commit, "license": LICENSE,
                    "notice": "derived from ai-dynamo/aiconfigurator measurements "
                              "(Copyright NVIDIA CORPORATION & AFFILIATES, Apache-2.0); see "
                              "kvroof/kernels/data/NOTICE",
                    "data_path": f"{DATA_PATH}/{system}",
                    "kvroof_spec": name,
                    "derived_by": "tools/kernels/derive.py"},
            tables=tables,
        )
        file_name = f"{name}.json.gz"
        size = write_system(system_tables, out / file_name)
        index["accelerators"][name] = {
            "file": file_name,
            "bytes": size,
            "source_system": system,
            "ops": sorted(tables),
            "engines": {op: f"{t.provenance['framework']} {t.provenance['version']}"
                        if op != "allreduce" else t.provenance["backends"]
                        for op, t in tables.items()},
        }
        echo(f"{system} -> {name}: {size / 1024:.1f} KiB, ops {sorted(tables)}")
        for line in log:
            echo(line)
    for system, name in SYSTEMS.items():
        if system not in source.systems() and name not in index["accelerators"]:
            index["skipped"][system] = "not in this checkout"
    for name, entry in previous.get("accelerators", {}).items():
        index["accelerators"].setdefault(name, entry)
    for system, reason in previous.get("skipped", {}).items():
        if system not in (systems or ()):
            index["skipped"].setdefault(system, reason)
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n",
                                    encoding="utf-8")
    from kvroof.kernels.tables import SIGNIFICANT_DIGITS

    (out / "NOTICE").write_text(NOTICE.format(repository=REPOSITORY, commit=source.commit,
                                              data_path=DATA_PATH,
                                              digits=SIGNIFICANT_DIGITS), encoding="utf-8")
    total = sum(e["bytes"] for e in index["accelerators"].values())
    echo(f"total {total / 1024:.1f} KiB in {len(index['accelerators'])} files -> {out}")
    return index


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aiconfigurator", type=Path, required=True,
                        help="a checkout of ai-dynamo/aiconfigurator, or its git directory")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "src/kvroof/kernels/data",
                        help="output folder (default: %(default)s)")
    parser.add_argument("--system", action="append", default=None,
                        help="derive only this aiconfigurator system (repeatable); the "
                             "index keeps the other accelerators already in --out")
    parser.add_argument("--commit", default=None,
                        help="the commit of a checkout folder without git metadata (an "
                             "unpacked archive); recorded in the provenance")
    args = parser.parse_args(argv)
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        parser.error("pyarrow is needed to read the parquet tables: pip install pyarrow "
                     "(the 'kernels' extra)")
    source = Source(args.aiconfigurator, args.commit)
    print(f"aiconfigurator {source.commit} ({args.aiconfigurator})")
    derive(source, args.out, args.system)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
