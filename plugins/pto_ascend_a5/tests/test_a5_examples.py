"""Every example program, built for ascend_a5 and run through the CPU check, matches the
reference interpreter; the backend is found through its entry point."""

import pytest

from pto_core import plugins
from pto_ascend_common import A5
from pto_ascend_common.testing import check_program, example_programs


@pytest.mark.parametrize("path", example_programs(), ids=lambda p: p.stem)
def test_example_matches_reference_on_a5_cpu_check(path, tmp_path):
    errs = check_program(A5, path, tmp_path)
    assert errs, "the program wrote no tensor"


def test_backend_is_installed_with_a5_capacities():
    info = plugins.get_backend("ascend_a5")
    assert info.capacities["UB"] == A5.capacities["UB"]
    assert info.capacities["L0C"] == A5.capacities["L0C"]
    assert info.kernel_suffix == ".cpp"
    assert "dav-c310" in info.targets
