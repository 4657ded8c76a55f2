"""Every example program, built for ascend_a2a3 and run through the CPU check, matches the
reference interpreter; the backend is found through its entry point."""

import pytest

from pto_ascend_common import A2A3
from pto_ascend_common.testing import check_installed_backend, check_program, example_programs


@pytest.mark.parametrize("path", example_programs(), ids=lambda p: p.stem)
def test_example_matches_reference_on_a2a3_cpu_check(path, tmp_path):
    errs = check_program(A2A3, path, tmp_path)
    assert errs, "the program wrote no tensor"


def test_backend_is_installed_with_a2a3_capacities():
    check_installed_backend(A2A3, target="dav-c220")
