#!/usr/bin/env bash
# Build and run the LLaMA-layer DAG benchmark: PTO runtime vs libgomp vs StarPU.
# usage: [REPEAT=n] bench/runtime/run.sh [M ...]    (default sizes: 16 32 64 128 256 2048)
# REPEAT sweeps run one after the other; the table keeps each figure's best sweep.
# Peers are skipped at M=2048 (12.6M tasks: minutes for libgomp, far more for StarPU).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${PTO_BUILD_DIR:-build}/bench/runtime
mkdir -p "$OUT"
FLAGS=(-std=c11 -O2 -pthread -Iruntime/include)
PEERS=()
if echo 'int main(void){return 0;}' | gcc -fopenmp -x c - -o "$OUT/omp_probe" 2>/dev/null; then
  FLAGS+=(-fopenmp -DHAVE_OMP); PEERS+=(omp)
else echo "libgomp not available: OpenMP column skipped"; fi
LIBS=()
if pkg-config --exists starpu-1.3 2>/dev/null; then
  FLAGS+=(-DHAVE_STARPU $(pkg-config --cflags starpu-1.3)); LIBS+=($(pkg-config --libs starpu-1.3)); PEERS+=(starpu)
else echo "StarPU (libstarpu-dev) not available: StarPU column skipped"; fi
gcc "${FLAGS[@]}" runtime/src/*.c bench/runtime/bench_llama.c -o "$OUT/bench_llama" "${LIBS[@]}"
export STARPU_SILENT=1
SIZES=("$@"); [ ${#SIZES[@]} -eq 0 ] && SIZES=(16 32 64 128 256 2048)
LOGS=()
for rep in $(seq 1 "${REPEAT:-1}"); do
  LOG="$OUT/results_$rep.txt"; : > "$LOG"; LOGS+=("$LOG")
  for M in "${SIZES[@]}"; do
    "$OUT/bench_llama" "$M" pto 2 | tee -a "$LOG"          # one process per row: honest peak RSS
    if [ "$M" -le 256 ]; then
      for p in "${PEERS[@]}"; do "$OUT/bench_llama" "$M" "$p" 2 | grep -v '^peak_rss' | tee -a "$LOG"; done
      if [[ " ${PEERS[*]} " == *" omp "* ]]; then   # libgomp with sleeping idle threads
        OMP_WAIT_POLICY=passive "$OUT/bench_llama" "$M" omp 2 | grep -v '^peak_rss' | sed 's/^omp_e2e/omp_passive_e2e/' | tee -a "$LOG"
      fi
    fi
  done
done
echo "load average: $(cat /proc/loadavg 2>/dev/null)"
python3 bench/runtime/report.py "${LOGS[@]}"
