"""`pto run FILE --target ascend_a5 --check` builds through the core's driver and runs the CPU
check."""

import os
import subprocess
import sys

from pto_ascend_common.testing import repo_root

import pytest

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part


def test_pto_run_fused_softmax_on_ascend_a5_checks_ok(tmp_path):
    env = dict(os.environ, PTO_BUILD_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "pto_core.cli", "run", "examples/fused_softmax.py",
                        "--set", "num_tiles=4", "--target", "ascend_a5", "--check"],
                       cwd=repo_root(), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout
    assert "target ascend_a5" in r.stdout
