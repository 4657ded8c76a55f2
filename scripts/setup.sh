#!/usr/bin/env bash
# Install what PTO and its tests need on a fresh Debian machine (idempotent, quiet when done;
# a few seconds when nothing is missing). Run it in a virtual environment: pip installs into
# the active Python.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v aarch64-linux-gnu-gcc >/dev/null || need_apt+=(gcc-aarch64-linux-gnu g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need_apt+=(qemu-user)
command -v dot >/dev/null || need_apt+=(graphviz)
dpkg -s libstarpu-dev >/dev/null 2>&1 || need_apt+=(libstarpu-dev)
# the StarPU-MPI engine runs under mpirun (its headers come with libstarpu-dev)
command -v mpirun >/dev/null || need_apt+=(openmpi-bin)
# ... and builds against MPI's C library (pkg-config mpi-c), which libstarpu-dev does not pull in
pkg-config --exists mpi-c 2>/dev/null || need_apt+=(libopenmpi-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: apt-get install ${need_apt[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "setup: cannot install ${need_apt[*]} (not root or no apt-get); tests needing them will say so" >&2
  fi
fi

# everything already installed (editable from this checkout, requirements satisfied): done,
# without starting pip
python3 scripts/installed.py 2>/dev/null && exit 0

# quiet pip that still fails the setup (and shows pip's output) when an install fails
pip_q() {
  local log; log=$(mktemp)
  if ! python3 -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; echo "setup: pip install $* failed" >&2; return 1
  fi
  rm -f "$log"
}
pip_q -e ".[test,graph]"
# cuobjdump for the CUDA performance card's instruction mix (pto perf; SASS of sm_80/sm_90a)
pip_q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
# shared by the Ascend plugins, which depend on it by name: install it before them
[ -f plugins/pto_ascend_common/pyproject.toml ] && pip_q -e plugins/pto_ascend_common
# (plugins/pto_cuda pulls nvidia-cutlass: the CUTLASS/CuTe headers its sm_80 kernels build on)
for plugin in plugins/*/ examples/third_party_backend/; do
  [ -f "$plugin/pyproject.toml" ] || continue
  case "$plugin" in examples/*) continue;; esac   # third-party backend: installed by its own test
  pip_q -e "$plugin"
done
