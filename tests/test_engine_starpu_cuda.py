"""The cuda backend's kernels as StarPU CUDA codelets (``runtime/engines/starpu.c`` built with
``STARPU_USE_CUDA``, ``plugins/pto_cuda/pto_cuda/src/pto_cuda_starpu.cu``).

Running them needs a GPU and a StarPU built with CUDA (``bench/cuda/device_check.sh``, step
``starpu_cuda``). Here, without either: nvcc compiles the engine's CUDA path and a generated
program's codelet glue against the installed StarPU's headers; a StarPU without CUDA refuses the
cuda target in Python and, for a program built anyway, every task of a CUDA kernel in C, naming
what is missing, while host kernels still run as CPU codelets."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core import driver
from pto_core.codegen.host import run_library
from pto_core.codegen.orchestration import c_module_name
from pto_core.engines import check_backend, pkg_config_flags, starpu_cuda_header, with_engine
from pto_core.errors import PTOError
from pto_core.options import CompileOptions
from pto_core.program import load_program

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "tests" / "engines"
NEEDS = "needs a StarPU built with CUDA"

pytestmark = pytest.mark.usefixtures("starpu_installed")


def _nvcc() -> str:
    from pto_cuda import scons_tool
    nvcc = scons_tool.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed (PATH, CUDA_HOME, /usr/local/cuda)")
    return nvcc


def _without_cuda() -> None:
    cuda, header = starpu_cuda_header()
    if cuda:
        pytest.skip(f"the installed StarPU has CUDA ({header}): nothing is refused")


# -------------------------------------------------------------------------------- which StarPU

def test_starpu_config_says_whether_starpu_has_cuda(tmp_path):
    on, off = tmp_path / "on", tmp_path / "off"
    on.mkdir(), off.mkdir()
    (on / "starpu_config.h").write_text("#define STARPU_USE_CPU 1\n#define STARPU_USE_CUDA 1\n")
    (off / "starpu_config.h").write_text("#define STARPU_USE_CPU 1\n/* #undef STARPU_USE_CUDA */\n"
                                         "#define STARPU_USE_CUDA_MAP 1\n")
    assert starpu_cuda_header((f"-I{on}",)) == (True, str(on / "starpu_config.h"))
    assert starpu_cuda_header((f"-I{off}",)) == (False, str(off / "starpu_config.h"))


def test_the_cuda_target_is_refused_where_starpu_has_no_cuda():
    _without_cuda()
    header = starpu_cuda_header()[1]
    with pytest.raises(PTOError) as e:
        check_backend("starpu", "cuda", False)
    assert NEEDS in str(e.value) and f"{header} does not define STARPU_USE_CUDA" in str(e.value)
    # the simulator's kernels and the MPI engine stay CPU-codelet only, saying what does run
    with pytest.raises(PTOError, match="engine 'starpu' runs kernels as CPU codelets; the "
                                       "cuda_sim backend .*cuda \\(engine starpu\\)"):
        check_backend("starpu", "cuda_sim", False)
    with pytest.raises(PTOError, match="engine 'starpu-mpi' runs kernels as CPU codelets"):
        check_backend("starpu-mpi", "cuda", False)


def test_pto_run_refuses_the_cuda_target_on_starpu_without_cuda():
    _without_cuda()
    r = subprocess.run([sys.executable, "-c", "import sys; from pto_core.cli import main; "
                        "sys.exit(main(sys.argv[1:]))", "run", "examples/rowmax.py", "--target",
                        "cuda", "--engine", "starpu"], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode != 0
    assert NEEDS in r.stdout + r.stderr, r.stdout + r.stderr


# -------------------------------------------------------------------------------- the engine in C

@pytest.fixture(scope="module")
def cuda_kernels_host(build_once) -> Path:
    sources = {f: (HERE / f).read_text() for f in ("cuda_kernels.c", "cuda_kernels_host.c", "common.h")}
    return build_once("engines-cuda_kernels-starpu", lambda d: driver.build_c_sources(
        "cuda_kernels", sources, d, werror=True, engine="starpu")) / "cuda_kernels_host"


def test_without_cuda_the_engine_refuses_tasks_of_cuda_kernels_and_runs_the_rest(cuda_kernels_host):
    _without_cuda()
    r = subprocess.run([str(cuda_kernels_host)], capture_output=True, text=True, timeout=120)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    lines = dict(line.split(": ", 1) for line in out.splitlines() if ": rc=" in line)
    assert lines["name"].startswith("rc=0")
    assert lines["device task"].startswith("rc=-1 error=task 'scale_on_gpu': its kernel runs on a "
                                           "CUDA device"), out
    assert NEEDS in lines["device task"] and "STARPU_USE_CUDA" in lines["device task"]
    # naming CUDA kernels is for before the first task; the executor hooks are PTO's runtime's
    assert lines["name late"].startswith("rc=-4 error=pto_starpu_cuda_kernel: tasks were submitted")
    assert "takes no executor" in lines["executor"]
    assert lines["complete_n"].startswith("rc=-4")
    assert "host task" not in lines and lines["run"].startswith("rc=0")
    # the four host tasks ran on the CPU (each adds 1 to one row of 16); no launch happened
    assert "rc=0 sum=64 launches=0" in out


# -------------------------------------------------------------------------------- nvcc

def _stand_ins(nvcc: str, folder: Path) -> list[str]:
    """StarPU's CUDA headers include cuSPARSE's (starpu_cusparse.h); a toolkit without it
    (a minimal one) gets a stand-in declaring the one type StarPU names."""
    from pto_cuda import scons_tool
    home = scons_tool.cuda_home(nvcc)
    if home is not None and (home / "include" / "cusparse.h").exists():
        return []
    folder.mkdir(exist_ok=True)
    (folder / "cusparse.h").write_text("typedef struct cusparseContext* cusparseHandle_t;\n")
    return [f"-I{folder}"]


def test_nvcc_compiles_the_engine_and_a_programs_codelets_with_cuda_on(tmp_path):
    """The CUDA path of the engine (a CUDA codelet, STARPU_CUDA_ASYNC, the worker's stream) and
    what a cuda program built for the engine adds (its binding, pto_cuda_starpu.cu) compile
    against the installed StarPU's headers with STARPU_USE_CUDA defined, warnings as errors."""
    nvcc = _nvcc()
    from pto_cuda import scons_tool
    starpu_cflags = list(pkg_config_flags("starpu")[0])
    includes = [f"-I{ROOT / 'runtime' / 'include'}", f"-I{ROOT / 'runtime' / 'src'}",
                *_stand_ins(nvcc, tmp_path / "stand_ins"), *starpu_cflags]

    def compile_(source: Path, *flags: str) -> Path:
        obj = tmp_path / (source.name + ".o")
        r = subprocess.run([nvcc, "-c", "-o", str(obj), "-DSTARPU_USE_CUDA", *flags, *includes,
                            str(source)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{source.name}:\n{r.stdout}{r.stderr}"
        return obj

    engine = compile_(ROOT / "runtime" / "engines" / "starpu.c",
                      "-Xcompiler", "-std=c11,-pthread,-fPIC,-O2,-Wall,-Wextra,-Werror")
    module = load_program(ROOT / "examples" / "fused_softmax.py").module
    texts = driver.generate("cuda", module, with_engine(CompileOptions(), "starpu"))
    binding_name = f"{c_module_name(module)}_binding.c"
    (tmp_path / binding_name).write_text(texts[binding_name])
    plugin = [f"-I{d}" for d in scons_tool.include_dirs()]
    compile_(tmp_path / binding_name, *plugin, "-Xcompiler", "-std=c11,-fPIC,-Wall,-Wextra,-Werror")
    glue = compile_(scons_tool.starpu_source(), *plugin, *scons_tool.nvcc_base_flags("sm_90"))

    nm = shutil.which("nm")
    if nm is None:
        return
    symbols = subprocess.run([nm, str(engine)], capture_output=True, text=True).stdout
    # the CUDA path is in: a codelet on the worker's stream, the check for CUDA workers
    for used in ("starpu_cuda_get_local_stream", "starpu_cuda_worker_get_count", "cudaGetErrorString"):
        assert re.search(rf"\bU {used}$", symbols, re.M), used
    assert re.search(r"\bT pto_starpu_cuda_kernel$", symbols, re.M)
    glue_symbols = subprocess.run([nm, str(glue)], capture_output=True, text=True).stdout
    assert re.search(r"\bT pto_cuda_starpu_attach$", glue_symbols, re.M)
    assert re.search(r"\bU pto_starpu_cuda_kernel$", glue_symbols, re.M)


@pytest.mark.slow
def test_a_cuda_program_built_for_starpu_without_cuda_refuses_its_tasks(tmp_path):
    """``rowmax`` for the cuda target against the StarPU engine, built past the Python check:
    it links (the engine stands in for the executor hooks the linked executor names) and loads
    without a GPU, and its run fails naming the task and what is missing."""
    _nvcc()
    _without_cuda()
    module = load_program(ROOT / "examples" / "rowmax.py").module
    bdir = driver.build_module("cuda", module, with_engine(CompileOptions(), "starpu"),
                               build_dir=tmp_path / "rowmax")
    lib = bdir / f"lib{c_module_name(module)}.so"
    symbols = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert "pto_cuda_starpu_attach" in symbols and "pto_cuda_host_run" not in symbols
    x = np.random.default_rng(0).random((32, 64), dtype=np.float32)
    with pytest.raises(PTOError) as e:
        run_library(lib, module, {"input": x, "output": np.zeros((32, 1), np.float32)},
                    {"num_tiles": 4})
    assert "task 'rowmax': its kernel runs on a CUDA device" in str(e.value)
    assert NEEDS in str(e.value)
