#!/usr/bin/env bash
# The whole test suite: installs what it needs, then runs every test (core, runtime, plugins).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# two workers (pytest-xdist): the suite's builds and compilers are mostly single-threaded
exec python3 -m pytest -q -p no:cacheprovider -n 2 "$@"
