#!/usr/bin/env bash
# Issue 44: chapter 10's ResNet-20 grid on the device machine (one H200), as one command:
#   bash tests/benchmarks/gpu_grid.sh OUT                       # on the GPU: throughput, tuning, grid (<= 10 min)
#   bash tests/benchmarks/gpu_grid.sh OUT --device cpu --tiny   # the CPU dry run (tests/test_gpu_grid.py)
# Any further flag goes to `python tests/benchmarks/gpu_grid.py run` (--budget-s, --workers, --stages, --store, ...).
# What it does and in which order: tests/benchmarks/gpu_grid.py's docstring; the recipe and the tuning rule:
# tests/benchmarks/gpu/grid-gpu-tune.toml and grid-gpu.toml; the steps below: README, "The ResNet grid on a GPU".
#
# The transfer (the device tool copies the session's checkout: tracked and untracked-not-ignored files, plus the
# ignored paths named in `carry`, 64 MiB in all; book/results/ alone is 58 MB and Fashion-MNIST 30 MB):
#   1. here:  python tests/benchmarks/gpu_grid.py prepare        # .gpu-carry/ (git-ignored): Fashion-MNIST's .gz
#             files, the stored runs a session must skip (grid runs: meta.json; tuning runs: their files), the commit;
#             prints what will travel
#   2. here:  mv book/results ../calib-results-aside            # out of the copy, for the call only
#   3. call:  run(command="bash tests/benchmarks/gpu_grid.sh $OUT", carry=[".gpu-carry"], timeout_s=600)
#   4. here:  mv ../calib-results-aside book/results
#             python tests/benchmarks/gpu_grid.py import FILES_AT   # FILES_AT: the reply's folder of OUT's files
# OUT comes back whole (at most 8 files of 16 MiB, 2 folders down): summary.md, summary.json, log.txt and
# runs-1.tar.gz ... runs-5.tar.gz (each run packed the moment it finishes; about 0.6 MB a run, float32 logits).
set -uo pipefail
OUT=${1:?give the output folder (on the device: \$OUT)}
shift
cd "$(dirname "$0")/../.." || exit 1
PY=python3
[ -x .venv/bin/python ] && PY=.venv/bin/python
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ -d .gpu-carry/fashion-mnist ] && export CALIB_DATA="$PWD/.gpu-carry"
if [ -f .gpu-carry/provenance.json ]; then      # the commit of the code that travelled (the copy has no .git)
  eval "$($PY -c 'import json; p = json.load(open(".gpu-carry/provenance.json")); print("export CALIB_GIT_COMMIT=%s CALIB_GIT_DIRTY=%d" % (p["git_commit"], p["git_dirty"]))')"
fi
mkdir -p "$OUT"
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
  # the installed versions without importing torch (seconds of CPU): the run's first line below names torch's CUDA
  $PY -c "from importlib.metadata import version as v; print('torch', v('torch'), 'numpy', v('numpy'))"
  echo "cpus $(nproc); CALIB_DATA=${CALIB_DATA:-unset}; commit ${CALIB_GIT_COMMIT:-from git}"
} 2>&1 | tee "$OUT/log.txt"
# the budget inside (--budget-s, default 520 s) starts no run it cannot finish; this is the backstop
timeout -s INT -k 20 590 $PY tests/benchmarks/gpu_grid.py run "$OUT" "$@" 2>&1 | tee -a "$OUT/log.txt"
