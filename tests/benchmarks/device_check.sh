#!/usr/bin/env bash
# Issue 30's checks on a GPU machine, as one command (the device has torch, no network, no Debian packages):
#   bash tests/benchmarks/device_check.sh OUT
# Carry, in the git-ignored .gpu-carry/ of the checkout, site.tar.xz (torchmetrics and lightning-utilities,
# pip install --target, compressed: the device's copy of the checkout is limited to 64 MiB, and book/results/ holds
# 58 MB of it), and fashion-mnist/: the first 8,000 training and 2,000 test images of Fashion-MNIST in its own
# format (the whole set does not fit beside book/results/).
# Writes OUT/*.log and the run's folder.
# 1. float32 ECE on 1e6 x 100 against one read of the array and torchmetrics on a quiet machine, on 2 cores
#    (taskset, the 2-core target) and on all of them;
# 2. one run trained on the GPU (one device: NCCL training needs two, so DistributedDataParallel over NCCL is not
#    run), and the streaming metrics' reduction (all_reduce of CUDA float64 sums, all_gather of rows) over NCCL in a
#    1-rank group;
# 3. the streaming ECE of CUDA tensors, batch by batch, against the one-shot function.
set -uo pipefail
OUT=${1:?give the output folder}
# A dry run on the CPU: DEVICE=cpu SUBSET=512 BENCH=0 MODEL=mlp bash tests/benchmarks/device_check.sh /tmp/dry
DEVICE=${DEVICE:-cuda} SUBSET=${SUBSET:-3000} BENCH=${BENCH:-1} MODEL=${MODEL:-resnet20}
mkdir -p "$OUT"
SITE=$(mktemp -d)
[ -f .gpu-carry/site.tar.xz ] && tar -xJf .gpu-carry/site.tar.xz -C "$SITE"
export PYTHONPATH="$PWD:$SITE/site" CALIB_DATA="$PWD/.gpu-carry" PYTHONUNBUFFERED=1
{
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'numpy', numpy.__version__)"
  nproc; lscpu | grep -E "Model name|^CPU\(s\)"
} > "$OUT/env.log" 2>&1
cat "$OUT/env.log"

if [ "$BENCH" = 1 ]; then
echo "== ECE float32 1e6 x 100, 2 cores (taskset -c 0,1)"
taskset -c 0,1 python tests/benchmarks/metrics.py --dtype float32 --ece-only --repeats 7 2>&1 | tee "$OUT/ece-2cores.log"
echo "== ECE float32 1e6 x 100, all cores"
python tests/benchmarks/metrics.py --dtype float32 --ece-only --repeats 7 2>&1 | tee "$OUT/ece-all.log"
fi

echo "== one run trained on the device (calib train), 2 epochs"
COMMON=(--data fashion-mnist --model "$MODEL" --loss fl-3 --epochs 2 --train-subset "$SUBSET"
        --test-subset 2000 --seed 0 --device "$DEVICE" --no-progress --diagnostics eval
        --discard checkpoint.pt --amp --channels-last)
( time python -m calib train "${COMMON[@]}" --out "$OUT/one-run" ) > "$OUT/one-run.log" 2>&1
tail -5 "$OUT/one-run.log"
python -c "import json,sys; m=json.load(open(sys.argv[1])); c=m['config']; print(m['device_name'], m['versions'], \
  'amp', c.get('amp'), 'channels_last', c.get('channels_last'), 'wall', m['wall_time_s'], 's')" "$OUT/one-run/meta.json"

echo "== the streaming metrics' reduction over NCCL (a 1-rank group on this GPU), against the local state"
[ "$DEVICE" = cuda ] && python - <<'PY' 2>&1 | tee "$OUT/nccl-reduce.log"
import os
import numpy as np
import torch
import torch.distributed as dist
from calib.metrics.streaming import StreamingClasswiseECE, StreamingECE, _all_gather_rows, _all_reduce_sums, _host
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
torch.cuda.set_device(0)
dist.init_process_group("nccl", rank=0, world_size=1)
rng = np.random.default_rng(0)
z = rng.standard_normal((20_000, 10))
p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
y = rng.integers(0, 10, 20_000)
for metric in (StreamingECE(), StreamingECE(binning="quantile"), StreamingClasswiseECE()):
    for lo in range(0, 20_000, 5_000):
        metric.update(torch.from_numpy(p[lo:lo + 5_000]).cuda(), torch.from_numpy(y[lo:lo + 5_000]).cuda())
    sums = _all_reduce_sums(metric._sums) if metric._sums else {}
    rows = _all_gather_rows(metric._rows) if metric._rows else {}
    same = all(np.array_equal(sums[k], _host(metric._sums[k])) for k in sums) and all(  # the state is on the GPU
        np.array_equal(np.concatenate([_host(a) for a in rows[k]]), np.concatenate([_host(b) for b in metric._rows[k]]))
        for k in rows)
    print(type(metric).__name__, "backend", dist.get_backend(), "sums", sorted(sums), "rows", sorted(rows),
          "reduced == local:", same, "value", metric.compute())
dist.destroy_process_group()
PY

echo "== streaming ECE of CUDA tensors against one-shot"
DEVICE=$DEVICE python - <<'PY' 2>&1 | tee "$OUT/streaming-cuda.log"
import os
import time
import numpy as np
import torch
from calib import metrics
from calib.metrics.streaming import StreamingECE
DEVICE = os.environ["DEVICE"]
g = torch.Generator(device=DEVICE).manual_seed(0)
z = torch.randn(1_000_000, 100, device=DEVICE, generator=g) * 2
p = torch.softmax(z, dim=1)
y = torch.randint(0, 100, (1_000_000,), device=DEVICE, generator=g)
torch.cuda.synchronize() if DEVICE == "cuda" else None
t = time.perf_counter(); one = metrics.ece(p, y); t_one = time.perf_counter() - t
s = StreamingECE()
t = time.perf_counter()
for lo in range(0, 1_000_000, 10_000):
    s.update(p[lo:lo + 10_000], y[lo:lo + 10_000])
streamed = s.compute(); t_stream = time.perf_counter() - t
print(f"one-shot {one:.12f} ({t_one * 1e3:.0f} ms, from CUDA float32)  streamed {streamed:.12f} ({t_stream * 1e3:.0f} ms)"
      f"  |difference| {abs(one - streamed):.2e}")
PY
