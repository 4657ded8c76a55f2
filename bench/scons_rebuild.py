"""No-op SCons rebuild time as a fraction of the clean build time, all examples.

    python bench/scons_rebuild.py [--target arm64] [--jobs 2]

Builds every example into a fresh temporary build dir (clean build), then runs the same
command again (nothing to do) and prints both times and their ratio. Goal: <= 10%.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scons(build: Path, target: str, jobs: int) -> float:
    cmd = [sys.executable, "-c", "import SCons.Script; SCons.Script.main()", "-C", str(ROOT),
           "-Q", f"-j{jobs}", f"target={target}", f"build_dir={build}"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(r.stdout + r.stderr)
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="arm64")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        clean = scons(Path(d), args.target, args.jobs)
        noop = min(scons(Path(d), args.target, args.jobs) for _ in range(3))
    print(f"target {args.target}, -j{args.jobs}, every example:")
    print(f"  clean build   {clean:7.2f} s")
    print(f"  no-op rebuild {noop:7.2f} s")
    print(f"  ratio         {noop / clean:7.1%}  (goal <= 10%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
