#!/usr/bin/env bash
# Measure one CUDA machine with `kvroof measure all`: copy bandwidth (4 KiB ... 1 GiB, pinned and
# pageable, per-layer-per-block copies, all GPUs at once), GEMM FLOP/s (bf16, fp16, fp8 at
# T = 16 ... 8192) and prefill with offloaded KV over the paper's grid (T = 64 ... 2048,
# K = 1024 ... 65536) on a synthetic Llama-3.1-8B stack, efficiencies against the H200's peaks.
#
#   bash benchmarks/gpu/run_measure.sh            # results in ./measure-out/measure/
#   OUT=/some/dir MODEL=llama-3.1-70b ACCELERATOR=h100 bash benchmarks/gpu/run_measure.sh
#   DEVICE=cpu QUICK=1 bash benchmarks/gpu/run_measure.sh   # a dry run of this script on a CPU
#
# Expected time on one H200 (an estimate from the grid sizes, not yet measured): about 20 s for
# link, 10 s for compute and 1-2 min for prefill (of which ~10 s to allocate and fill ~9 GB of
# pinned host KV), plus the install. A hard limit of MEASURE_TIMEOUT seconds (default 480)
# stops the run; each benchmark's CSV and JSON are written as soon as it finishes, so what
# finished is kept. Results are never edited by hand.
set -euo pipefail
cd "$(dirname "$0")/../.."

OUT="${OUT:-./measure-out}"
MODEL="${MODEL:-llama-3.1-8b}"
ACCELERATOR="${ACCELERATOR:-h200}"
MEASURE_TIMEOUT="${MEASURE_TIMEOUT:-480}"
DEVICE="${DEVICE:-cuda}"
QUICK="${QUICK:-}"
VENV="${VENV:-${TMPDIR:-/tmp}/kvroof-measure-venv}"  # outside the repository
mkdir -p "$OUT"

# A virtual environment that also sees the system's packages, so that a CUDA build of torch
# already installed on the machine is used rather than downloaded (the machine may be offline).
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv --system-site-packages "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"

# kvroof itself: editable install; offline, without build isolation; failing both, from src/.
if ! python -m pip install --quiet -e . 2>"$OUT/pip-kvroof.log"; then
  if ! python -m pip install --quiet --no-build-isolation -e . 2>>"$OUT/pip-kvroof.log"; then
    echo "pip could not install kvroof (see $OUT/pip-kvroof.log); running it from src/"
    export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi
# torch only when it is missing: a bare `pip install torch` may pull a multi-GB build.
if ! python -c 'import torch' 2>/dev/null; then
  echo "torch is not importable; installing it with pip"
  python -m pip install --quiet torch
fi
DEVICE="$DEVICE" python - <<'PY'
import os
import sys

import torch

import kvroof.measure  # noqa: F401  (fails here, not later, if kvroof is not importable)

print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"{torch.cuda.device_count()} GPU(s) visible")
if os.environ["DEVICE"] == "cuda" and not torch.cuda.is_available():
    sys.exit("no CUDA device visible to torch: this script measures a GPU machine "
             "(for a CPU run: kvroof measure all --quick --device cpu -o DIR)")
for i in range(torch.cuda.device_count()):
    print(f"  cuda:{i}: {torch.cuda.get_device_name(i)}")
PY

start=$(date +%s)
status=0
timeout "$MEASURE_TIMEOUT" python -m kvroof.cli measure all --device "$DEVICE" --model "$MODEL" \
  --accelerator "$ACCELERATOR" ${QUICK:+--quick} -o "$OUT/measure" 2>&1 \
  | tee "$OUT/measure.log" || status=$?
echo "kvroof measure took $(( $(date +%s) - start )) s (exit status $status)"

# A short summary from the files written (whatever finished).
python - "$OUT/measure" <<'PY'
import sys

from kvroof.measure import ResultsError, read_results_dir

try:
    results = read_results_dir(sys.argv[1])
except ResultsError as error:
    sys.exit(f"no results to summarise: {error}")
print(f"== summary ({', '.join(f'{name}.csv' for name in results)} in {sys.argv[1]})")
if "link" in results and results["link"].header:
    for fit in results["link"].header["summary"]["fits"]:
        kind = "pinned" if fit["pinned"] else "pageable"
        bandwidth = fit["bandwidth"]
        gbs = "inf" if bandwidth is None else f"{bandwidth / 1e9:.1f}"
        print(f"link {fit['direction']} {kind}: {gbs} GB/s, latency "
              f"{fit['latency_s'] * 1e6:.1f} us, fit residuals RMS {100 * fit['rel_rms']:.1f}%")
if "compute" in results and results["compute"].header:
    for dtype, best in results["compute"].header["summary"]["best"].items():
        eff = best["efficiency"]
        eff_text = "n/a" if eff is None else f"{100 * eff:.1f}% of peak"
        print(f"compute {dtype}: {best['achieved_flops'] / 1e12:.1f} TFLOP/s at T={best['T']} "
              f"({eff_text})")
if "prefill" in results and results["prefill"].header:
    summary = results["prefill"].header["summary"]
    print(f"prefill {summary['model']}: {summary['layers_run']} of {summary['layers_model']} "
          f"layers, attention: {summary['attention']}")
    for kappa in summary["kappa_crit"]:
        value = kappa["kappa_crit"]
        text = {"crossed": f"{value:.3g}" if value is not None else "?",
                "never": "inf (no crossing in the grid)",
                "below-grid": "below the grid"}[kappa["status"]]
        print(f"  measured kappa_crit at T={kappa['T']}: {text}")
PY
exit "$status"
