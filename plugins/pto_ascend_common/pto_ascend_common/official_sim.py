"""The official PTO-ISA library's CPU simulator as an oracle for the Ascend backends.

The kernel files the Ascend backends generate are compiled, unchanged, against the official
headers of hw-native-sys/pto-isa (``-D__CPU_SIM``, C++20, zig's clang: gcc 12 and clang 16
reject those headers) and run through the same build and launch as the CPU check
(:func:`pto_ascend_common.cpu_check.run`, SCons build variable ``ascend_sim=official``): the
same ABI wrappers, orchestration and runtime workers. The
glue header ``official_sim.hpp`` initialises the official ``NPUMemoryModel`` of each worker
thread for the target (A2/A3 or A5) and gives the kernels their GM workspace.

The official simulator aborts the process on a violated constraint, so :func:`run` executes the
kernels in a child process and turns an abort into a :class:`PTOError` carrying the library's
``[PTO][CA]`` message.

The headers are found in ``$PTO_ISA_ROOT``, else in ``<checkout>/../shared/third_party/pto-isa``
(staged by the set-up; their license allows using them only for code that targets Ascend).

>>> missing() is None or "pto-isa" in missing() or "ziglang" in missing()
True
"""

from __future__ import annotations

import os
import pickle
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from pto_core.driver import build_module, run_built
from pto_core.errors import PTOError
from pto_core.ir import Module
from pto_core.options import CompileOptions

from . import cpu_check
from .arch import AscendArch

#: environment variable naming a checkout (or staged copy) of hw-native-sys/pto-isa
ENV = "PTO_ISA_ROOT"

#: environment variables zig's clang reads (where its caches are)
COMPILER_ENV = ("HOME", "XDG_CACHE_HOME", "ZIG_GLOBAL_CACHE_DIR", "ZIG_LOCAL_CACHE_DIR")

#: the official NPUArch value of each backend
NPU_ARCH = {"ascend_a2a3": "A2A3", "ascend_a5": "A5"}


def isa_root() -> Path:
    """Where the official headers are looked for: ``$PTO_ISA_ROOT``, else the staged copy
    beside the checkout (``<checkout>/../shared/third_party/pto-isa``)."""
    env = os.environ.get(ENV)
    if env:
        return Path(env)
    from pto_core.resources import checkout_root
    root = checkout_root() or Path.cwd()
    return root.parent / "shared" / "third_party" / "pto-isa"


def compiler() -> tuple[str, ...] | None:
    """zig's clang++ (the ``ziglang`` package), or None when it is not installed."""
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return None
    return (sys.executable, "-m", "ziglang", "c++")


def missing() -> str | None:
    """What is missing to run the official simulator here (None: nothing)."""
    header = isa_root() / "include" / "pto" / "pto-inst.hpp"
    if not header.is_file():
        return (f"the official PTO-ISA headers (hw-native-sys/pto-isa): {header} does not exist; "
                f"set ${ENV} to a checkout")
    if compiler() is None:
        return ("zig's clang (pip install ziglang): gcc and older clang reject the official "
                "PTO-ISA headers")
    return None


def glue_header() -> Path:
    """The header that connects the ABI wrappers to the official memory model."""
    return Path(__file__).resolve().parent / "official_sim.hpp"


def official_flags(arch: AscendArch) -> list[str]:
    """Flags that compile a generated kernel against the official CPU simulator for ``arch``.
    No ``PTO_NPU_ARCH_*`` macro: it would pull the NPU implementation into the CPU build; the
    architecture reaches the simulator through the memory model (:file:`official_sim.hpp`).

    zig's clang builds for the host CPU: on an x86-64 host with AVX512-FP16, ``_Float16``
    (the simulator's half) would add in half and round each step of ``a + b + c`` (TADDC,
    TSUBC, TADDSC, TSUBSC), elsewhere it adds in float and rounds once (clang's excess
    precision). ``-mcpu=native-avx512fp16`` (zig's syntax: the host CPU less that feature,
    its FMA kept) gives every x86-64 host the second, so the simulator's results do not depend
    on whether the machine that runs the tests has AVX512-FP16."""
    host = ["-mcpu=native-avx512fp16"] if platform.machine().lower() in ("x86_64", "amd64") else []
    return ["-std=c++20", "-D__CPU_SIM", "-O1", "-UNDEBUG", "-fPIC", "-w", *host,
            "-include", "cstdint", f"-DPTO_OFFICIAL_SIM_ARCH={NPU_ARCH[arch.name]}",
            f"-I{isa_root() / 'include'}", f"-I{cpu_check.runtime_include_dir()}",
            "-include", str(glue_header())]


def toolchain(arch: AscendArch) -> tuple[list[str], list[str]]:
    """The compiler command and flags of a CPU-check build against the official headers (the
    build variable ``ascend_sim=official``); raises PTOError naming what is missing."""
    why = missing()
    if why is not None:
        raise PTOError(f"{arch.name} official CPU simulator: missing {why}")
    return list(compiler()), official_flags(arch)


def build(arch: AscendArch, module: Module, out_dir: Path,
          options: CompileOptions | None = None) -> Path:
    """Generate and build ``module`` against the official headers into ``out_dir``."""
    toolchain(arch)
    return build_module(arch.name, module, options, build_dir=Path(out_dir),
                        variables={cpu_check.SIM_VARIABLE: "official"})


def run(arch: AscendArch, module: Module, build_dir: Path, tensors: Mapping[str, np.ndarray],
        scalars: Mapping[str, Any] | None = None, options: CompileOptions | None = None,
        num_workers: int = 2, timeout: float = 300, echo: bool = False
        ) -> dict[str, np.ndarray]:
    """Like :func:`pto_ascend_common.cpu_check.run`, on the official CPU simulator: build in
    this process (a compile error is a PTOError), run in a child process (an abort of the
    simulator is a PTOError with its message). The simulated UB has ``arch``'s capacity.
    ``echo``: the child's standard output (what TPRINT printed) is written to this process's."""
    bdir = build(arch, module, Path(build_dir), options)
    with tempfile.TemporaryDirectory(prefix="pto_official_") as tmp:
        job, result = Path(tmp) / "job.pkl", Path(tmp) / "result.pkl"
        job.write_bytes(pickle.dumps((arch, module, str(bdir), dict(tensors),
                                      dict(scalars or {}), options, num_workers)))
        env = {**os.environ, "PTO_CPU_SIM_UB_BYTES": str(arch.capacities["UB"])}
        try:
            r = subprocess.run([sys.executable, "-m", "pto_ascend_common.official_sim",
                                str(job), str(result)], capture_output=True, text=True,
                               env=env, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise PTOError(f"{arch.name} official CPU simulator: no result after {timeout:g} s") from e
        if r.returncode != 0 or not result.exists():
            raise PTOError(f"{arch.name} official CPU simulator: the run failed (exit status "
                           f"{r.returncode}):\n{r.stderr[-3000:]}")
        if echo:
            sys.stdout.write(r.stdout)
            sys.stdout.flush()
        return pickle.loads(result.read_bytes())


def _child(job: Path, result: Path) -> None:
    arch, module, build_dir, tensors, scalars, options, workers = pickle.loads(job.read_bytes())
    out = run_built(arch.name, module, Path(build_dir), tensors, scalars, options=options,
                    workers=workers)
    result.write_bytes(pickle.dumps(out))


if __name__ == "__main__":
    _child(Path(sys.argv[1]), Path(sys.argv[2]))
