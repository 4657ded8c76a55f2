#!/usr/bin/env bash
# Build and run the runtime benchmark: PTO runtime vs Taskflow vs libgomp vs StarPU, on the graphs
# of dags.h (the LLaMA layer, and 100,000 empty tasks wide and in a chain), and the runtime's
# three-tier mode against its worker mode (graphs up to 1,000,000 tasks).
# usage: [REPEAT=n] [TASKFLOW_INCLUDE=dir] bench/runtime/run.sh [GRAPH ...]
#   GRAPH: llama:M | wide:N | chain:N | M (= llama:M);
#   default: wide:100000 chain:100000 llama:16 llama:32 llama:64 llama:128 llama:256 llama:2048
# REPEAT sweeps run one after the other; the tables keep each figure's best sweep.
# Taskflow is header-only and has no package here: point TASKFLOW_INCLUDE at the folder that holds
# taskflow/taskflow.hpp (a checkout of taskflow/taskflow); unset, that column is skipped.
# Peers are skipped above 1,000,000 tasks (llama:2048 is 12.6M: minutes for libgomp, far more
# for StarPU).
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
TASKFLOW=0
if [ -n "${TASKFLOW_INCLUDE:-}" ] && [ -f "$TASKFLOW_INCLUDE/taskflow/taskflow.hpp" ]; then
  g++ -std=c++20 -O2 -pthread -I"$TASKFLOW_INCLUDE" bench/runtime/bench_taskflow.cpp -o "$OUT/bench_taskflow"
  TASKFLOW=1
else echo "TASKFLOW_INCLUDE unset (or no taskflow/taskflow.hpp under it): Taskflow column skipped"; fi
export STARPU_SILENT=1
GRAPHS=("$@"); [ ${#GRAPHS[@]} -eq 0 ] && GRAPHS=(wide:100000 chain:100000 llama:16 llama:32 llama:64 llama:128 llama:256 llama:2048)
LOGS=()
for rep in $(seq 1 "${REPEAT:-1}"); do
  LOG="$OUT/results_$rep.txt"; : > "$LOG"; LOGS+=("$LOG")
  for G in "${GRAPHS[@]}"; do
    "$OUT/bench_llama" "$G" pto 2 | tee -a "$LOG"
    # the pipelined end to end alone, for its peak RSS (the run above also builds whole graphs)
    "$OUT/bench_llama" "$G" e2e 2 | grep '^pto_e2e' | sed 's/^pto_e2e/pto_e2e_alone/' | tee -a "$LOG"
    tasks=$(grep -o "^pto_build dag=[a-z]* M=[0-9]* tasks=[0-9]*" "$LOG" | tail -1 | sed 's/.*tasks=//')
    [ "${tasks:-0}" -gt 1000000 ] && continue
    # the three-tier mode (1 and 3 schedulers, 2 cores) against the worker mode (2 workers)
    "$OUT/bench_llama" "$G" tier3 2 | tee -a "$LOG"
    [ "$TASKFLOW" = 1 ] && "$OUT/bench_taskflow" "$G" 2 | tee -a "$LOG"
    for p in "${PEERS[@]}"; do "$OUT/bench_llama" "$G" "$p" 2 | grep -v '^peak_rss' | tee -a "$LOG"; done
    if [[ " ${PEERS[*]} " == *" omp "* ]]; then   # libgomp with sleeping idle threads
      OMP_WAIT_POLICY=passive "$OUT/bench_llama" "$G" omp 2 | grep -v '^peak_rss' | sed 's/^omp_e2e/omp_passive_e2e/' | tee -a "$LOG"
    fi
  done
done
echo "load average: $(cat /proc/loadavg 2>/dev/null)"
python3 bench/runtime/report.py "${LOGS[@]}"
