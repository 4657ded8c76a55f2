#!/usr/bin/env bash
# Every check that needs an NVIDIA GPU, as one run with a time limit per step (a hung kernel
# costs its step, not the run). Logs go to OUTDIR (default $OUT, else /tmp/pto-device).
#
#   bash bench/cuda/device_check.sh [OUTDIR]
#
# On a machine without network access, put the wheels the device lacks (scons, nvidia-cutlass)
# in .whl/ first: they are installed to /tmp/site. PTO itself is installed editable, no deps.
# Steps: the device; bench/cuda/run.py on sm_90a (softmax, GEMM 4,096^3 and 8,192^3, LLaMA
# layer); the `gpu` tests; Nsight Compute's summary of one GEMM kernel; the sm_80 path on the
# same GPU (bench/cuda/run.py --arch sm_90); the LLaMA layer on both paths. Worst case about
# 11 minutes: split it over two device calls with STEPS (the step names below).
# Where StarPU's source was staged (bench/cuda/starpu_cuda.sh stage; carry .starpu), two more:
# starpu_build builds StarPU with CUDA (at most 5 minutes) and starpu_cuda runs fused softmax
# with its tasks as StarPU CUDA codelets, checked against the reference (`pto run --check`),
# starpu_cuda_bgemm the same for bgemm; run them alone:
# STEPS="starpu_build starpu_cuda starpu_cuda_bgemm".
set -uo pipefail
out=${1:-${OUT:-/tmp/pto-device}}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1

# a step stopped at its limit gets SIGABRT, so Python's fault handler prints where it was
export PYTHONFAULTHANDLER=1
steps=${STEPS:-}   # e.g. STEPS="llama_sm90a llama_sm90": only these steps (default: all)

step() {  # step NAME SECONDS COMMAND...: run with a limit, log to OUTDIR/NAME.log
  local name=$1 limit=$2; shift 2
  [ -z "$steps" ] || [[ " $steps " == *" $name "* ]] || return 0
  echo "=== $name (limit ${limit}s): $*"
  local t0=$SECONDS
  timeout -s ABRT -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  grep -v -E "Warning|warner\(" "$out/$name.log" | tail -n 40
  echo "=== $name: rc=$rc in $((SECONDS - t0))s"
}

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  export PATH=/tmp/site/bin:$PATH
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation \
  -e . -e plugins/pto_ascend_common $(for p in plugins/*/; do
    [ "$p" != plugins/pto_ascend_common/ ] && [ -f "$p/pyproject.toml" ] && echo "-e $p"; done) \
  || exit 1

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  | tee -a "$out/device.txt"

step bench_sm90a 150 python3 bench/cuda/run.py --arch sm_90a --only softmax --only gemm
# loadfile: one worker per file, so two workers never build the same examples at once
step gpu_tests 200 python3 -m pytest -q -p no:cacheprovider -n 2 --dist loadfile -m gpu \
  plugins/pto_cuda/tests
command -v ncu >/dev/null || PATH=$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ 2>/dev/null | tail -n 1)
# the GEMM's graph replay (the first launches of a whole run are small batches)
ncu_sections="--section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
# shellcheck disable=SC2086
step ncu_gemm 60 ncu --clock-control none $ncu_sections -k regex:gemm_tile -s 1 -c 1 \
  python3 bench/cuda/run.py --quick --repeat 2 --only gemm --gemm-sizes 4096
# the sm_80 path (cp.async + ldmatrix + mma.sync) on the same GPU
step bench_sm90 90 python3 bench/cuda/run.py --arch sm_90 --only gemm --only softmax
# the LLaMA layer alone, each path (a whole run and graph replay against eager PyTorch)
step llama_sm90a 110 python3 bench/cuda/run.py --arch sm_90a --only llama --repeat 5
step llama_sm90 80 python3 bench/cuda/run.py --arch sm_90 --only llama --repeat 5
# the StarPU engine's CUDA codelets, on a StarPU built here with CUDA (docs/distributed.md)
if [ -f .starpu/starpu.tar.gz ]; then
  step starpu_build 300 bash bench/cuda/starpu_cuda.sh build /tmp/starpu-cuda
  export PKG_CONFIG_PATH=/tmp/starpu-cuda/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=/tmp/starpu-cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  step starpu_cuda 150 python3 -c "import sys; from pto_core.cli import main; sys.exit(main(sys.argv[1:]))" \
    run examples/fused_softmax.py --target cuda --engine starpu --check
  step starpu_cuda_bgemm 120 python3 -c "import sys; from pto_core.cli import main; sys.exit(main(sys.argv[1:]))" \
    run examples/bgemm.py --target cuda --engine starpu --check --stats
fi
