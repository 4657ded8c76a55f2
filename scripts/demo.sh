#!/usr/bin/env bash
# The main job: compile the fused-softmax example, run it, and check it against numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec pto run examples/fused_softmax.py --target "${PTO_DEMO_TARGET:-arm64}" --set num_tiles=8 --check "$@"
