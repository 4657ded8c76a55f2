"""An SCons tool for nvcc: ``.cu`` -> ``.o`` with one ``-gencode`` per requested architecture.

Includes are tracked with SCons' own C scanner (it follows ``#include "..."`` through
``CPPPATH``), so editing ``pto_cuda_tile.cuh`` rebuilds every kernel that includes it. Warnings
are errors (``-Werror all-warnings`` for nvcc and ``-Werror`` for the host compiler it drives),
so the build itself is the review of nvcc's warnings.

>>> gencode_flags("sm_80,sm_90")
['-gencode', 'arch=compute_80,code=sm_80', '-gencode', 'arch=compute_90,code=sm_90', '-gencode', 'arch=compute_90,code=compute_90']

In an SConstruct::

    env = Environment()
    from pto_cuda import scons_tool
    scons_tool.generate(env, arch="sm_90")
    obj = env.CUDAObject("build/k.o", "k.cu")
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from pto_core.errors import PTOError

PACKAGE_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PACKAGE_DIR / "include"
SOURCE_DIR = PACKAGE_DIR / "src"
#: the CPU simulator: stand-ins for the CUDA headers (first on the include path) and its source
SIM_INCLUDE_DIR = PACKAGE_DIR / "sim" / "include"
SIM_SOURCE = PACKAGE_DIR / "sim" / "src" / "pto_cuda_sim.cpp"
DEFAULT_ARCH = "sm_90"          # H100 / H200

_ARCH_RE = re.compile(r"^sm_(\d{2,3})([af]?)$")


def parse_arch(arch: str) -> list[str]:
    """``"sm_90"`` or ``"sm_80,sm_90"`` -> the list of architectures, validated.

    >>> parse_arch(" sm_80, sm_90a ")
    ['sm_80', 'sm_90a']
    """
    archs = [a.strip() for a in str(arch).split(",") if a.strip()]
    if not archs:
        raise PTOError("arch: expected sm_XY or a comma-separated list, got nothing")
    for a in archs:
        if not _ARCH_RE.match(a):
            raise PTOError(f"arch: '{a}' is not of the form sm_XY (e.g. sm_90, sm_80,sm_90)")
    return archs


def gencode_flags(arch: str) -> list[str]:
    """One ``-gencode`` per architecture (SASS), plus PTX of the newest so newer GPUs can JIT."""
    archs = parse_arch(arch)
    flags: list[str] = []
    for a in archs:
        m = _ARCH_RE.match(a)
        assert m is not None
        flags += ["-gencode", f"arch=compute_{m.group(1)}{m.group(2)},code={a}"]
    newest = max(archs, key=lambda a: int(_ARCH_RE.match(a).group(1)))   # type: ignore[union-attr]
    m = _ARCH_RE.match(newest)
    assert m is not None
    flags += ["-gencode", f"arch=compute_{m.group(1)}{m.group(2)},code=compute_{m.group(1)}{m.group(2)}"]
    return flags


def find_nvcc() -> str | None:
    """nvcc on PATH, else under CUDA_HOME or /usr/local/cuda."""
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").exists():
            return str(Path(root) / "bin" / "nvcc")
    return None


def cuda_home(nvcc: str | None = None) -> Path | None:
    """The toolkit root (the folder holding ``include/cuda_runtime.h`` and ``lib64``)."""
    nvcc = nvcc or find_nvcc()
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    if nvcc:
        candidates.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    candidates += ["/usr/local/cuda"]
    for c in candidates:
        if c and (Path(c) / "include" / "cuda_runtime.h").exists():
            return Path(c)
    return None


def cuda_lib_dir(home: Path | None = None) -> Path | None:
    home = home or cuda_home()
    if home is None:
        return None
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
        if (home / sub / "libcudart.so").exists():
            return home / sub
    return None


def cute_include_dir() -> Path | None:
    """The CUTLASS/CuTe headers the ``nvidia-cutlass`` wheel ships (device builds of the
    tensor-core primitives use CuTe's MMA and copy atoms), or None when it is not installed."""
    # found, not imported: importing cutlass_library parses sys.argv (it would answer
    # `scons -h` with its own help and exit)
    import importlib.util
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    inc = Path(list(spec.submodule_search_locations)[0]).resolve() / "source" / "include"
    return inc if (inc / "cute" / "arch" / "mma_sm80.hpp").exists() else None


def include_dirs() -> list[Path]:
    """Include folders of a device build: PTO's headers, then CuTe's (when installed)."""
    cute = cute_include_dir()
    return [INCLUDE_DIR] + ([cute] if cute else [])


def nvcc_base_flags(arch: str, debug: bool = False) -> list[str]:
    """Flags every PTO .cu file is compiled with (also used by tests that call nvcc directly)."""
    return (["-std=c++17", "-O3" if not debug else "-G", "-lineinfo",
             "-Werror", "all-warnings", "-Xcompiler", "-fPIC,-Wall,-Werror"]
            + gencode_flags(arch))


def sim_flags(debug: bool = False, include: bool = True) -> list[str]:
    """Host C++ flags of a CUDA source built for the CPU simulator. Strict aliasing is off:
    CUDA code moves tiles through ``uint4`` casts, which device compilers allow.

    >>> "-DPTO_CUDA_SIM" in sim_flags() and sim_flags()[-2:] == ["-I", str(SIM_INCLUDE_DIR)]
    True
    """
    from pto_core.scons import OPT_FLAGS     # the build variants' flags (imports SCons)
    return (["-x", "c++", "-std=c++17", *OPT_FLAGS["debug" if debug else "release"], "-fPIC",
             "-fno-strict-aliasing", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-DPTO_CUDA_SIM"] + (["-I", str(SIM_INCLUDE_DIR)] if include else []))


#: host-compiler flags that make a kernel object built for the simulator count its global-memory
#: traffic: every load and store calls a hook of the simulator (pto_sim_global_bytes)
SIM_COUNT_FLAGS = ["-fsanitize=kernel-address", "--param",
                   "asan-instrumentation-with-call-threshold=0", "--param", "asan-stack=0",
                   "--param", "asan-globals=0"]


def exists(env: Any) -> bool:
    return find_nvcc() is not None


def generate(env: Any, arch: str = DEFAULT_ARCH, debug: bool = False) -> None:
    """Add ``NVCC``/``NVCCFLAGS`` and the ``CUDAObject`` builder (``.cu`` -> ``.o``, position
    independent so the same object goes into shared libraries and executables); link with
    ``libcudart`` through g++."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
    env["NVCC"] = nvcc
    env["CUDA_ARCH"] = arch
    env["NVCCFLAGS"] = nvcc_base_flags(arch, debug)
    env.AppendUnique(CPPPATH=[str(d) for d in include_dirs()])
    _add_cuda_builders(env, "$NVCC -o $TARGET -c $NVCCFLAGS $_CPPDEFFLAGS $_CPPINCFLAGS $SOURCES")
    lib = cuda_lib_dir(cuda_home(nvcc))
    if lib is not None:
        env.AppendUnique(LIBPATH=[str(lib)], RPATH=[str(lib)])
    env.AppendUnique(LIBS=["cudart", "pthread", "dl", "rt"])
    # C++ runtime for the executor (std::thread), so link with g++.
    env["LINK"] = env.get("CXX") or "g++"
    env["SHLINK"] = env["LINK"]


def _add_cuda_builders(env: Any, com: str) -> None:
    """``CUDAObject`` and the ``.cu`` actions of Object/SharedObject, all running ``com``;
    #include tracking through SCons' C scanner."""
    import SCons.Action
    import SCons.Builder
    import SCons.Defaults
    import SCons.Scanner.C
    import SCons.Tool
    env["NVCCCOM"] = com
    env["NVCCCOMSTR"] = env.get("NVCCCOMSTR") or None
    env["BUILDERS"]["CUDAObject"] = SCons.Builder.Builder(
        action=SCons.Action.Action("$NVCCCOM", "$NVCCCOMSTR"),
        suffix=".o", src_suffix=".cu", source_scanner=SCons.Scanner.C.CScanner(),
        single_source=True)
    # .cu sources also go through the ordinary Object/SharedObject builders (what generic build
    # code such as pto_core.scons.link_module calls); the objects are always PIC
    for name, emitter in (("Object", SCons.Defaults.StaticObjectEmitter),
                          ("SharedObject", SCons.Defaults.SharedObjectEmitter)):
        obj_builder = env["BUILDERS"].get(name)
        if obj_builder is None:
            continue
        obj_builder.add_action(".cu", SCons.Action.Action("$NVCCCOM", "$NVCCCOMSTR"))
        obj_builder.add_emitter(".cu", emitter)
    SCons.Tool.SourceFileScanner.add_scanner(".cu", SCons.Scanner.C.CScanner())


def generate_sim(env: Any, debug: bool = False) -> None:
    """Like :func:`generate`, for the CPU simulator: ``.cu`` files are compiled by the host
    C++ compiler with the simulator's CUDA headers first on the include path; nothing links
    ``libcudart``. Link :func:`simulator_object` in."""
    env["CUDA_SIM_FLAGS"] = sim_flags(debug, include=False)
    # the stand-in CUDA headers come first (and are tracked like any other include)
    env.PrependUnique(CPPPATH=[str(SIM_INCLUDE_DIR)])
    env.AppendUnique(CPPPATH=[str(INCLUDE_DIR)])
    _add_cuda_builders(env, "$CXX -o $TARGET -c $CUDA_SIM_FLAGS $_CPPDEFFLAGS $_CPPINCFLAGS $SOURCES")
    env.AppendUnique(LIBS=["pthread", "dl", "rt"])
    env["LINK"] = env.get("CXX") or "g++"
    env["SHLINK"] = env["LINK"]


def count_kernel_traffic(env: Any) -> None:
    """After :func:`generate_sim`: kernel sources (``.cu`` other than the executor) compile
    with :data:`SIM_COUNT_FLAGS`, so a run's global-memory bytes are counted."""
    def flags(target: Any, source: Any, env: Any, for_signature: bool) -> str:
        name = Path(str(source[0])).name if source else ""
        counted = name.endswith(".cu") and name != executor_source().name
        return " ".join(SIM_COUNT_FLAGS) if counted else ""
    env["PTO_CUDA_COUNT_FLAGS"] = flags
    env.Append(CUDA_SIM_FLAGS=["$PTO_CUDA_COUNT_FLAGS"])


def simulator_object(env: Any, target: str) -> Any:
    """The simulator's runtime (:data:`SIM_SOURCE`) as a position-independent object."""
    import SCons.Scanner.C
    return env.Command(target + env["SHOBJSUFFIX"], str(SIM_SOURCE), "$NVCCCOM",
                       source_scanner=SCons.Scanner.C.CScanner())


def executor_source() -> Path:
    """The static executor source every CUDA program links (``pto_cuda_exec.cu``)."""
    return SOURCE_DIR / "pto_cuda_exec.cu"


def starpu_source() -> Path:
    """What a CUDA program built for the StarPU engine links besides (``pto_cuda_starpu.cu``):
    its kernels named to the engine as CUDA codelets."""
    return SOURCE_DIR / "pto_cuda_starpu.cu"
