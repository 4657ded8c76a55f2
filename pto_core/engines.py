"""Execution engines: what runs the task graph an orchestration builds.

The generated orchestration C calls only the runtime API of ``runtime/include/pto_runtime.h``;
an engine is a library that implements that API, chosen when a module is linked:

* ``pto`` (default): PTO's own runtime (``runtime/src``, ``libpto_runtime``);
* ``starpu``: StarPU executes the graph (``runtime/engines/starpu.c``, ``libpto_starpu``):
  every tensor region becomes a StarPU data handle, every task a CPU codelet calling the
  kernel. It needs ``libstarpu-dev`` (``pkg-config starpu-1.3``) and a backend whose kernels
  run on host threads (``Backend.host_kernels``, e.g. ``arm64``), or the ``cuda`` backend, whose
  kernels become StarPU CUDA codelets where StarPU was built with CUDA
  (:func:`starpu_cuda_header`);
* ``starpu-mpi``: the same on StarPU-MPI, under ``mpirun -np N`` (``libpto_starpumpi``, the
  same source built with ``PTO_ENGINE_MPI``): every rank runs the orchestration, regions are
  owned block-cyclically, results are gathered to rank 0. It needs Open MPI as well
  (``openmpi-bin``, ``pkg-config mpi-c``). See ``docs/distributed.md``.

The engine travels in :class:`~pto_core.options.CompileOptions` (``extra`` key ``"engine"``),
so a build for another engine lands in its own build folder and cache key:

>>> engine_of(with_engine(CompileOptions(), "starpu"))
'starpu'
>>> engine_of(CompileOptions())
'pto'
>>> with_engine(CompileOptions(), "legion")
Traceback (most recent call last):
    ...
pto_core.errors.PTOError: unknown engine 'legion' (known: pto, starpu, starpu-mpi)
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import PTOError
from .options import ENGINE_OPTION, CompileOptions

#: the engine of options that name none (PTO's own runtime)
DEFAULT = "pto"


@dataclass(frozen=True)
class Engine:
    """One engine: its name, the library ``runtime/SConscript`` builds for it, the pkg-config
    packages it compiles and links against, and whether it runs under an MPI launcher."""

    name: str
    library: str
    packages: tuple[str, ...] = ()
    description: str = ""
    mpi: bool = False


ENGINES: dict[str, Engine] = {
    "pto": Engine("pto", "pto_runtime", (), "PTO's own runtime (default)"),
    "starpu": Engine("starpu", "pto_starpu", ("starpu-1.3",),
                     "StarPU: region handles and CPU codelets on one node"),
    "starpu-mpi": Engine("starpu-mpi", "pto_starpumpi", ("starpumpi-1.3", "mpi-c"),
                         "StarPU-MPI under mpirun: every rank replays the graph", mpi=True),
}


def get_engine(name: str) -> Engine:
    """The engine called ``name``, or PTOError listing the known ones."""
    engine = ENGINES.get(name)
    if engine is None:
        raise PTOError(f"unknown engine '{name}' (known: {', '.join(ENGINES)})")
    return engine


def engine_of(options: CompileOptions | None) -> str:
    """The engine ``options`` name (:data:`DEFAULT` when they name none)."""
    return str(dict(options.extra).get(ENGINE_OPTION, DEFAULT)) if options is not None else DEFAULT


def with_engine(options: CompileOptions | None, engine: str | None) -> CompileOptions:
    """``options`` set to build for ``engine`` (None: ``options`` unchanged). The default
    engine is stored as no entry at all, so its builds keep the folders and keys they had."""
    options = options or CompileOptions()
    if engine is None:
        return options
    get_engine(engine)
    extra = tuple((k, v) for k, v in options.extra if k != ENGINE_OPTION)
    if engine != DEFAULT:
        extra += ((ENGINE_OPTION, engine),)
    return dataclasses.replace(options, extra=extra)


@functools.lru_cache(maxsize=None)
def pkg_config_flags(engine: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(cflags, libs)`` of ``engine``'s pkg-config package (empty for the default engine), or
    PTOError saying what to install."""
    e = get_engine(engine)
    if not e.packages:
        return (), ()
    try:
        cflags = subprocess.run(["pkg-config", "--cflags", *e.packages], capture_output=True,
                                text=True, timeout=30)
        libs = subprocess.run(["pkg-config", "--libs", *e.packages], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as err:
        raise PTOError(f"engine '{engine}': cannot run pkg-config ({err})") from None
    if cflags.returncode or libs.returncode:
        names = " ".join(e.packages)
        raise PTOError(f"engine '{engine}' needs the development packages of {names} "
                       f"(pkg-config failed: "
                       f"{(cflags.stderr or libs.stderr).strip() or 'not found'}; on Debian: "
                       f"apt-get install libstarpu-dev{' openmpi-bin' if e.mpi else ''})")
    return tuple(shlex.split(cflags.stdout)), tuple(shlex.split(libs.stdout))


def configure_env(env, engine: str) -> None:
    """Make SCons environment ``env`` build and link for ``engine``: ``PTO_ENGINE`` (which
    ``runtime/SConscript`` reads) and the engine's compile and link flags."""
    get_engine(engine)
    env["PTO_ENGINE"] = engine
    cflags, libs = pkg_config_flags(engine)
    if cflags or libs:
        env.MergeFlags(list(cflags) + list(libs))


#: engine -> the backends whose kernels it runs as StarPU CUDA codelets (where StarPU has CUDA)
CUDA_CODELET_TARGETS = {"starpu": ("cuda",)}


def starpu_cuda_header(cflags: tuple[str, ...] | None = None) -> tuple[bool, str]:
    """Whether the StarPU that ``cflags`` (default: ``pkg-config --cflags starpu-1.3``) compile
    against was built with CUDA, and the ``starpu_config.h`` that says so (``#define
    STARPU_USE_CUDA``); ``""`` when no such header is on its include path.

    >>> starpu_cuda_header(("-I/nonexistent",))
    (False, '')
    """
    if cflags is None:
        cflags = pkg_config_flags("starpu")[0]
    dirs = [f[2:] for f in cflags if f.startswith("-I")] + ["/usr/include", "/usr/local/include"]
    for d in dirs:
        path = Path(d) / "starpu_config.h"
        if path.is_file():
            text = path.read_text(errors="replace")
            return re.search(r"^\s*#\s*define\s+STARPU_USE_CUDA\b", text, re.M) is not None, str(path)
    return False, ""


def check_backend(engine: str, target: str, host_kernels: bool) -> None:
    """PTOError unless ``engine`` can run the kernels of backend ``target``: kernels on host
    threads as CPU codelets, or those of :data:`CUDA_CODELET_TARGETS` as CUDA codelets where
    StarPU was built with CUDA."""
    if engine == DEFAULT or host_kernels:
        return
    if target in CUDA_CODELET_TARGETS.get(engine, ()):
        cuda, header = starpu_cuda_header()
        if not cuda:
            where = f"{header} does not define STARPU_USE_CUDA" if header else \
                "pkg-config starpu-1.3 names no starpu_config.h"
            raise PTOError(f"engine '{engine}' runs the {target} backend's kernels as StarPU CUDA "
                           f"codelets, which needs a StarPU built with CUDA; this one has none "
                           f"({where}). Build StarPU with CUDA and put its pkg-config folder "
                           f"first on PKG_CONFIG_PATH (docs/distributed.md), or use engine pto")
        return
    cuda = [f"{t} (engine {e})" for e, ts in CUDA_CODELET_TARGETS.items() for t in ts]
    raise PTOError(f"engine '{engine}' runs kernels as CPU codelets; the {target} backend "
                   f"launches its kernels through its own executor (use an engine-less build, "
                   f"a backend whose kernels run on host threads such as arm64, or one whose "
                   f"kernels become CUDA codelets: {', '.join(cuda)})")


#: environment variables an MPI launcher (Open MPI's mpirun, PMI, PMIx) sets in each rank
LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")


def launched_ranks(environ: dict | None = None) -> int:
    """How many ranks the MPI launcher that started this process runs (0: none started it).

    >>> launched_ranks({"OMPI_COMM_WORLD_SIZE": "4"}), launched_ranks({})
    (4, 0)
    """
    import os
    env = os.environ if environ is None else environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        return int(env["OMPI_COMM_WORLD_SIZE"])
    if "PMI_SIZE" in env:
        return int(env["PMI_SIZE"])
    return 1 if "PMIX_RANK" in env else 0


def launched_rank(environ: dict | None = None) -> int:
    """This process's rank under an MPI launcher (0 without one)."""
    import os
    env = os.environ if environ is None else environ
    for key in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if key in env:
            return int(env[key])
    return 0


def mpirun_command(ranks: int) -> list[str]:
    """``mpirun -np N`` for a single machine: more ranks than cores allowed (``--oversubscribe``)
    and, as root, ``--allow-run-as-root``. PTOError when Open MPI's ``mpirun`` is missing.

    >>> mpirun_command(2)[-2:]                              # doctest: +SKIP
    ['-np', '2']
    """
    if shutil.which("mpirun") is None:
        raise PTOError("mpirun is missing: install Open MPI (apt-get install openmpi-bin)")
    cmd = ["mpirun", "--oversubscribe", "-np", str(int(ranks))]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def run_mpi(ranks: int, argv: list[str], timeout: float, **kw) -> subprocess.CompletedProcess:
    """Run ``mpirun -np RANKS ARGV`` and capture its output (``subprocess.Popen``'s keywords,
    such as ``cwd`` and ``env``, pass through; ``subprocess.run``'s own, such as ``check`` and
    ``input``, do not). Past ``timeout`` seconds the whole job is killed, ranks included, and
    ``subprocess.TimeoutExpired`` is raised. Killing ``mpirun`` alone is not enough: Open MPI
    puts each rank in a process group of its own, and a rank left behind holds the output pipes
    open, so reading them would wait for it forever. The job runs in a session of its own, and
    every process of that session is killed, as it is when waiting for it is interrupted (a
    Ctrl-C reaches only the caller's session)."""
    with subprocess.Popen([*mpirun_command(ranks), *argv], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True, **kw) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_session(p.pid)
            try:
                out, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:         # a process that left the session holds a pipe
                out, err = "", ""
            raise subprocess.TimeoutExpired(p.args, timeout, out, err) from None
        except BaseException:             # KeyboardInterrupt: the job's own session never saw it
            _kill_session(p.pid)
            raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (Linux: read from /proc)."""
    import signal
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()   # after "pid (comm)"
            if int(fields[3]) == sid:                              # state ppid pgrp session
                os.kill(int(stat.parent.name), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            pass                                                   # gone meanwhile


def check_launch(engine: str, environ: dict | None = None) -> None:
    """PTOError when ``engine`` and the way this process was started do not match: an MPI
    engine outside an MPI launcher, or a one-process engine in a job of several ranks (every
    rank would run the whole graph on its own)."""
    e = get_engine(engine)
    ranks = launched_ranks(environ)
    if e.mpi and ranks == 0:
        raise PTOError(f"engine '{engine}' runs under an MPI launcher: mpirun -np N pto run ... "
                       f"--engine {engine} (add --oversubscribe for more ranks than cores, and "
                       f"--allow-run-as-root as root)")
    if not e.mpi and ranks > 1:
        raise PTOError(f"this process is one of {ranks} MPI ranks, but engine '{engine}' runs a "
                       f"graph in one process: use --engine starpu-mpi (or run without mpirun)")
