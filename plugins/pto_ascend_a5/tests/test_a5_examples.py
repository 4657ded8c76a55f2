"""Every example program, built for ascend_a5 and run through the CPU check, matches the
reference interpreter; the backend is found through its entry point."""

import pytest

from pto_ascend_common import A5
from pto_ascend_common.testing import check_installed_backend, check_program, example_programs

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part


@pytest.mark.parametrize("path", example_programs(), ids=lambda p: p.stem)
def test_example_matches_reference_on_a5_cpu_check(path, tmp_path):
    errs = check_program(A5, path, tmp_path)
    assert errs, "the program wrote no tensor"


def test_backend_is_installed_with_a5_capacities():
    check_installed_backend(A5, target="dav-c310")
