"""From a module to files, from files to a run.

:func:`compile_module` writes, for one backend, every source of a module: one kernel per InCore
function (by the backend's :class:`~pto_core.backend.Compiler`), the platform-independent
orchestration C, the compiler's runtime binding and the `.npy` host program; this needs only
the compiler. Files are rewritten only when their content changes, so SCons (which decides by
content) rebuilds nothing after an edit that leaves the generated code unchanged.

:func:`launch` builds a module with SCons into ``<build_root>/<target>/launch/<module>-<digest>/``
(:func:`launch_dir`; the build root is the per-user cache of :mod:`pto_core.resources`) and runs
it through the backend's :class:`~pto_core.backend.Driver` with numpy arrays in and out. A launch whose inputs
did not change since the last successful build of that directory (:func:`launch_key`: the
module's IR, the options, the backend and its version, every file of the installed generator,
runtime and templates and of the backend's packages) loads the built library directly, without
generating sources or starting SCons. Builds of one folder by several processes take turns
(a lock file); objects that many folders share (the runtime's) come from one SCons cache.
:func:`build_runtime_library` (the Python binding's runtime) and :func:`build_c_sources` (C
written by hand, for tests and tools) go through the same SCons build.

File names are fixed by the driver (so a build tool can know them before generating):
kernels ``<function><kernel_suffix>`` (``<function>.<n><kernel_suffix>`` where another file's
stem, the name of its object, differs only in case), ``<module>_orch.c``,
``<module>_binding<host_suffix>``, ``<module>_host.c``.

>>> planned_files("arm64", _demo_module())                      # doctest: +SKIP
GeneratedFiles(kernels=('k.c',), orchestration='demo_orch.c', binding='demo_binding.c', host='demo_host.c')
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from . import plugins
from .engines import (DEFAULT as DEFAULT_ENGINE, check_backend, check_launch, engine_of,
                      get_engine, pkg_config_flags, with_engine)
from .abi import PTO_MAX_SCHEDULERS, PTO_MAX_WORKERS
from .errors import PTOBackendError, PTOError
from .backend import BindingSource, KernelSource
from .ir import Function, Module
from .options import CORE_OPTIONS, RANGE_TASKS_OPTION, TILE_ARGS_OPTION, CompileOptions
from .codegen.orchestration import c_module_name, emit_orchestration
from .progress import Phases
from .resources import (__version__, build_root, package_dir, package_files, runtime_dir,
                        runtime_files)
from .verify import check_scalar_args, verify_module
from .codegen.cnames import c_names, user_names
from .codegen.host import emit_host_main, runtime_environment, timeout_seconds



@dataclass(frozen=True)
class GeneratedFiles:
    """Names (relative to the output directory) of what :func:`compile_module` writes."""

    kernels: tuple[str, ...]
    orchestration: str
    binding: str
    host: str

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.kernels, self.orchestration, self.binding, self.host)


def optimise(module: Module, options: CompileOptions,
             target: str | None = None) -> tuple[Module, Callable[[Function], int]]:
    """Verify ``module``, then run the pass pipeline (without the passes ``target`` does not
    schedule); return the module and the per-function on-chip byte count.
    The input is verified whatever the pass options: with every pass disabled nothing else
    would check it before codegen, and with passes on, a bad input would be blamed on the
    first pass."""
    verify_module(module)
    from .passes import run_pipeline
    from .passes.buffer_reuse import function_buffer_bytes
    passes = plugins.backend_options(target, options) if target is not None else options
    return run_pipeline(module, passes), lambda fn: function_buffer_bytes(fn, options)


def planned_files(target: str, module: Module,
                  options: CompileOptions | None = None, *, optimised: bool = False) -> GeneratedFiles:
    """The files :func:`compile_module` will write for ``module`` (after the passes unless
    ``optimised`` says the module already went through them)."""
    info = plugins.get_backend(target)
    if not optimised:
        module, _ = optimise(module, options or CompileOptions(), target)
    m = c_module_name(module)
    host = (f"{m}_orch.c", f"{m}_binding{info.host_suffix}", f"{m}_host.c")
    # a kernel's file is <function><suffix> unless its stem, case aside, is taken: k.c and K.c
    # are one file on a case-insensitive file system, and m_orch.cu and m_orch.c one object
    # (m_orch.o); then <function>.<n><suffix>, which no identifier spells
    taken = {f.rsplit(".", 1)[0].casefold() for f in host}
    kernels = []
    for f in module.functions.values():
        if f.is_incore:
            stem, n = f.name, 0
            while stem.casefold() in taken:
                n += 1
                stem = f"{f.name}.{n}"
            taken.add(stem.casefold())
            kernels.append(f"{stem}{info.kernel_suffix}")
    return GeneratedFiles(tuple(kernels), *host)


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` to ``path`` unless it already holds exactly that; True when written."""
    path = Path(path)
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True


def _malformed_source(src: KernelSource | BindingSource) -> str | None:
    """What is wrong with a source a backend's compiler returned (its text is written to a
    file; a kernel's buffer_bytes reaches the runtime), or None."""
    if not isinstance(src.text, str):
        return f"text is a {type(src.text).__name__}, not a str"
    n = getattr(src, "buffer_bytes", 0)
    if isinstance(n, bool) or not isinstance(n, int):
        return f"buffer_bytes is a {type(n).__name__}, not an int >= 0"
    if n < 0:
        return f"buffer_bytes is {n}, not an int >= 0"
    return None


def generate(target: str, module: Module, options: CompileOptions,
             progress: Callable[[str], None] | None = None) -> dict[str, str]:
    """All generated sources of ``module`` for ``target`` by file name (nothing written);
    ``progress(name)`` is called after each InCore function's kernel."""
    module, bb = optimise(module, options, target)
    files = planned_files(target, module, options, optimised=True)
    compiler = plugins.get_backend(target).compiler
    kernels: list[KernelSource] = []
    texts: dict[str, str] = {}
    # backends see every value under its C name (no user name reaches generated text as it
    # is); errors speak of the user's names again
    cmod = c_names(module)
    incore = [f for f in cmod.functions.values() if f.is_incore]
    with user_names():
        for fn, name in zip(incore, files.kernels):
            ks = compiler.generate_kernel(fn, cmod, options)
            if not isinstance(ks, KernelSource):
                raise PTOBackendError(f"backend '{target}' generated no kernel for '{fn.name}'",
                                      function=fn.name)
            bad = _malformed_source(ks)
            if bad:
                raise PTOBackendError(f"backend '{target}' generated for '{fn.name}' a kernel "
                                      f"whose {bad}", function=fn.name)
            ks = dataclasses.replace(ks, buffer_bytes=ks.buffer_bytes or int(bb(fn)))
            kernels.append(ks)
            texts[name] = ks.text
            if progress is not None:
                progress(fn.name)
        extra = dict(options.extra)
        texts[files.orchestration] = emit_orchestration(
            cmod, bb, ranges=bool(extra.get(RANGE_TASKS_OPTION, True)),
            tile_args=bool(extra.get(TILE_ARGS_OPTION, True)))
        binding = compiler.runtime_binding(cmod, kernels, options)
    if binding is None:
        raise PTOBackendError(f"backend '{target}' provides no runtime binding")
    if not isinstance(binding, BindingSource):
        raise PTOBackendError(f"backend '{target}' gave a {type(binding).__name__} as its "
                              f"runtime binding, not a pto_core.backend.BindingSource")
    bad = _malformed_source(binding)
    if bad:
        raise PTOBackendError(f"backend '{target}' gave a runtime binding whose {bad}")
    texts[files.binding] = binding.text
    texts[files.host] = emit_host_main(module)
    return texts


def compile_module(target: str, module: Module, out_dir: Path,
                   options: CompileOptions | None = None,
                   progress: Callable[[str], None] | None = None) -> list[Path]:
    """Write every generated source of ``module`` for ``target`` into ``out_dir`` (only files
    whose content changed are rewritten) and return their paths: kernels, orchestration,
    binding, host program. ``progress(name)`` is called after each kernel is generated."""
    options = options or CompileOptions()
    out_dir = Path(out_dir)
    texts = generate(target, module, options, progress)
    paths = []
    for name, text in texts.items():
        write_if_changed(out_dir / name, text)
        paths.append(out_dir / name)
    return paths


# --------------------------------------------------------------------------------------------
# Building and launching
# --------------------------------------------------------------------------------------------

#: the SConstruct of a build folder the driver makes: the entry of pto_core.scons it calls
_SCONSTRUCT = """\
# Generated by pto_core.driver: {what}.
import pto_core.scons
pto_core.scons.{entry}(ARGUMENTS)
"""


def _canonical(x: Any) -> Any:
    """A value with a deterministic repr (sets sorted; string hashing varies per process)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, [(f.name, _canonical(getattr(x, f.name)))
                                   for f in dataclasses.fields(x)])
    if isinstance(x, (set, frozenset)):
        return sorted((_canonical(v) for v in x), key=repr)
    if isinstance(x, dict):
        return sorted(((repr(k), _canonical(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return [_canonical(v) for v in x]
    return x


def _plugin_dirs(target: str) -> list[Path]:
    """The package directories of the plugin that provides ``target``
    (:func:`pto_core.plugins.plugin_source_dirs`)."""
    dirs: list[Path] = []
    for rec in plugins.plugin_records():
        if rec.ok and any(b.name == target for b in rec.backends):
            dirs += plugins.plugin_source_dirs(rec)
    return dirs


def _generator_dirs(target: str) -> list[Path]:
    """Where the code that generates ``target``'s sources lives: the installed ``pto_core`` and
    the packages of the plugin that provides ``target``."""
    return [package_dir(), *_plugin_dirs(target)]


def generator_files(target: str) -> list[Path]:
    """The Python files whose change must regenerate sources (:func:`_generator_dirs`)."""
    return [f for d in _generator_dirs(target) for f in package_files(d, "*.py")]


def _source_files(target: str) -> list[Path]:
    """Files whose change must rebuild a launch: every file of the installed ``pto_core`` (the
    code generator, the host templates and, in a wheel, the runtime's copy), the runtime
    sources of a checkout, and every file of the backend's packages (Python, headers, sources
    they compile)."""
    files = [f for d in _generator_dirs(target) for f in package_files(d)]
    if package_dir() not in runtime_dir().parents:
        files += runtime_files()
    return files


def launch_key(target: str, module: Module, options: CompileOptions, *, cross: str = "",
               variables: Mapping[str, str] | None = None) -> str:
    """The content hash a launch build is cached under: the module's IR (its `.pto` text),
    the options, the target, the cross family and build variables, the core's and backend's
    versions, what else the backend's driver says its code depends on (``build_inputs``), the
    compile and link flags of the engine's library (another StarPU on ``PKG_CONFIG_PATH``, e.g.
    one built with CUDA, builds again), and the path, size and modification time of every
    generator, runtime and template source.

    >>> launch_key("arm64", m, CompileOptions()) == launch_key("arm64", m, CompileOptions())  # doctest: +SKIP
    True
    """
    from .asm import print_module
    h = hashlib.sha256()
    versions = sorted((r.name, str(getattr(r, "version", ""))) for r in plugins.plugin_records()
                      if r.ok and any(b.name == target for b in r.backends))
    h.update(repr((target, cross, __version__, versions, _canonical(options),
                   _canonical(dict(variables or {})))).encode())
    h.update(print_module(module).encode())
    inputs = plugins.get_backend(target).driver.build_inputs(module, options)
    h.update(repr(inputs).encode())
    if engine_of(options) != DEFAULT_ENGINE:
        h.update(repr(pkg_config_flags(engine_of(options))).encode())
    for f in _source_files(target):
        try:
            st = f.stat()
        except OSError:
            continue
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


#: the file, in a launch build directory, that holds the key of its last successful build
KEY_FILE = "launch.key"


def variant_name(target: str, module: Module, options: CompileOptions, *, cross: str = "") -> str:
    """The launch build folder of ``module``: its C name and a digest of what makes this
    variant of it (IR, options, target, cross family), so two modules of the same name (a
    program built with two element types, say) never share a folder, while an edit of the
    compiler rebuilds the same folder incrementally."""
    from .asm import print_module
    h = hashlib.sha256(repr((target, cross, _canonical(options))).encode())
    try:
        h.update(print_module(module).encode())
    except Exception:   # noqa: BLE001 - an IR the printer rejects: name it by its structure
        h.update(repr(_canonical(module)).encode())
    return f"{c_module_name(module)}-{h.hexdigest()[:12]}"


def launch_dir(target: str, module: Module, options: CompileOptions, *, cross: str = "") -> Path:
    """``<build_root>/<target>[-<cross>]/launch/<variant_name>``."""
    suffix = f"-{cross}" if cross else ""
    return (build_root() / f"{target}{suffix}" / "launch"
            / variant_name(target, module, options, cross=cross))


@contextlib.contextmanager
def _exclusive(directory: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``directory`` (another process building the same folder
    waits); no lock where the platform has no ``fcntl``. A folder that cannot be made or
    locked (a file of that name, no permission) is a PTOError naming it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = open(directory / ".lock", "w")
    except OSError as e:
        raise PTOError(f"build folder '{directory}': {e.strerror or e} (give a folder this process may "
                       f"create and write)") from None
    try:
        import fcntl
    except ImportError:
        lock.close()
        yield
        return
    with lock as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


#: a line of SCons' command echo that writes a file (a compile or a link)
_WRITES = re.compile(r"\s-o\s*(\S+)")


def _run_scons(args: list[str], what: str, step: Callable[[str], None]) -> None:
    """Run SCons, calling ``step(file)`` for each compile or link it echoes; raise with the
    end of its output when it fails."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = (tail + [line])[-200:]
        m = _WRITES.search(line)
        if m:
            step(Path(m.group(1)).name)
    if proc.wait() != 0:
        raise PTOBackendError(f"{what} failed:\n{''.join(tail)[-8000:]}")


@contextlib.contextmanager
def _unless_built(bdir: Path, key: str, results: list[Path]) -> Iterator[bool]:
    """Hold ``bdir``'s lock and yield whether it must be built: False when its last successful
    build had ``key`` and ``results`` are there. A build that ends without raising records
    ``key``; a failed or interrupted one leaves no key to match."""
    stamp = bdir / KEY_FILE
    with _exclusive(bdir):
        if key and stamp.is_file() and stamp.read_text() == key and all(
                r.is_file() for r in results):
            yield False
            return
        stamp.unlink(missing_ok=True)
        yield True
        if key:
            write_if_changed(stamp, key)


def build_jobs() -> int:
    """Parallel compiles of a build: one per CPU this process may run on (2 on a 2-core
    machine; 16 nvcc at once on a 16-core GPU host), at least 2."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 2
    return max(2, cpus)


def _scons_command(bdir: Path, entry: str, what: str, jobs: int | None, *args: str
                   ) -> list[str]:
    """Write ``bdir/SConstruct`` (calling ``pto_core.scons.<entry>``) and return the command
    that runs SCons on it with ``args`` (the build shares the SCons cache of every folder;
    ``jobs`` None: :func:`build_jobs`)."""
    jobs = jobs or build_jobs()
    write_if_changed(bdir / "SConstruct", _SCONSTRUCT.format(what=what, entry=entry))
    build_root().mkdir(parents=True, exist_ok=True)      # SCons makes the cache folder only
    return [sys.executable, "-c", "import SCons.Script; SCons.Script.main()", "-Q", f"-j{jobs}",
            "-C", str(bdir), "-f", "SConstruct", f"cache={build_root() / 'scons-cache'}", *args]


def build_runtime_library(opt: str = "release", *, jobs: int | None = None,
                          engine: str = "pto") -> Path:
    """The runtime library of ``engine`` (:mod:`pto_core.engines`; ``libpto_runtime.so`` for
    PTO's own, what the Python binding :mod:`pto_core.runtime` loads) built by SCons from
    ``runtime/SConscript`` with the flags of build variant ``opt``, into
    ``<build_root>/runtime/python-<opt>[-<engine>]/``; returns its path. As with
    :func:`build_module`, an unchanged build (same runtime sources, build glue and variant)
    starts no SCons. Another engine needs its development packages (PTOError says which).

    >>> build_runtime_library("debug").name                    # doctest: +SKIP
    'libpto_runtime.so'
    """
    from .engines import DEFAULT, get_engine, pkg_config_flags
    e = get_engine(engine)
    pkg_config_flags(engine)                # PTOError naming what to install, before SCons
    bdir = build_root() / "runtime" / (f"python-{opt}" + ("" if engine == DEFAULT else f"-{engine}"))
    lib = bdir / f"lib{e.library}.so"
    h = hashlib.sha256(repr((opt, engine, __version__)).encode())
    for f in [*runtime_files(), package_dir() / "scons.py"]:
        st = f.stat()
        h.update(f"{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    with _unless_built(bdir, h.hexdigest(), [lib]) as stale:
        if stale:
            cmd = _scons_command(bdir, "build_runtime", f"the {engine} runtime library", jobs,
                                 f"opt={opt}", f"engine={engine}")
            _run_scons(cmd, f"building the {engine} runtime library", lambda _: None)
    return lib


def build_module(target: str, module: Module, options: CompileOptions | None = None, *,
                 build_dir: Path | None = None, cross: str = "", jobs: int | None = None,
                 phases: Phases | None = None,
                 variables: Mapping[str, str] | None = None) -> Path:
    """Generate and build ``module`` for ``target`` with SCons; return the build directory
    (default :func:`launch_dir`, holding ``lib<module>.so`` and ``<module>_host``; a ``cross``
    build holds the static ``<module>_host`` only, to run under an emulator). ``variables`` are
    the backend's build variables (``key=value`` on the SCons command line, e.g. arm64's
    ``march``). When the
    directory's last successful build had the same :func:`launch_key` and its results are
    there, nothing is generated and SCons is not started. ``phases`` times (and on a terminal
    shows) the ``codegen`` and ``build`` phases.

    >>> lib_dir = build_module("arm64", module)          # doctest: +SKIP
    """
    options = options or CompileOptions()
    phases = phases or Phases(enabled=False)
    m = c_module_name(module)
    bdir = Path(build_dir) if build_dir else launch_dir(target, module, options, cross=cross)
    try:
        key = launch_key(target, module, options, cross=cross, variables=variables)
    except Exception:   # noqa: BLE001 - no key (e.g. an IR the printer rejects): always build
        key = ""
    results = [bdir / f"{m}_host"] + ([] if cross else [bdir / f"lib{m}.so"])
    with _unless_built(bdir, key, results) as stale:
        if not stale:
            phases.skip("codegen", "cached")
            phases.skip("build", "cached")
            return bdir
        n = sum(1 for f in module.functions.values() if f.is_incore)
        with phases.phase("codegen", total=n, label=f"codegen {target}") as step:
            paths = compile_module(target, module, bdir / "gen", options, progress=step)
        # a full build compiles every generated file, the runtime and the .npy reader, then
        # links the runtime, the library and the host program (an incremental one does less)
        files = len(paths) + len(list((runtime_dir() / "src").glob("*.c"))) + 1 + 3
        with phases.phase("build", total=files, label=f"build {target}") as step:
            _link(bdir, m, paths, f"module '{module.name}' for {target}", jobs, step,
                  f"target={target}", f"opt={dict(options.extra).get('build_opt', 'release')}",
                  f"engine={engine_of(options)}",
                  *([f"cross={cross}"] if cross else []),
                  *(f"{k}={v}" for k, v in build_variables(options, variables).items()))
    return bdir


def build_variables(options: CompileOptions, variables: Mapping[str, str] | None = None
                    ) -> dict[str, str]:
    """The SCons variables of a module's build: the backend's plain options (``arch=sm_90a``:
    the code was generated for it, so the build must target it too), then ``variables``,
    which win. Core options travel as their own arguments; a per-function option
    (``key.<function>``) is the code generator's alone.

    >>> build_variables(CompileOptions(extra=(("arch", "sm_90a"), ("config.k", "w=4"),
    ...                                       ("build_opt", "debug"))), {"march": "native"})
    {'arch': 'sm_90a', 'march': 'native'}
    """
    plain = {str(k): str(v) for k, v in options.extra
             if k not in CORE_OPTIONS and "." not in str(k)}
    return {**plain, **(variables or {})}


def _link(bdir: Path, name: str, paths: list[Path], what: str, jobs: int | None,
          step: Callable[[str], None], *args: str) -> None:
    """Compile and link ``paths`` (in ``bdir/gen``) into ``bdir/lib<name>.so`` and, from the
    ``<name>_host.c`` among them, ``bdir/<name>_host``, with the runtime, by SCons."""
    # what the build links: exactly these sources (gen/ also holds objects)
    write_if_changed(bdir / "sources.txt", "".join(f"gen/{p.name}\n" for p in paths))
    _run_scons(_scons_command(bdir, "build_generated_module", "builds one module", jobs,
                              f"name={name}", *args), f"building {what}", step)


def build_c_sources(name: str, sources: Mapping[str, str], build_dir: Path, *,
                    opt: str = "release", werror: bool = False, jobs: int | None = None,
                    engine: str = "pto") -> Path:
    """Build C ``sources`` (file name -> text: an orchestration, a binding written by hand, a
    ``<name>_host.c``, and the ``*.h`` headers they include, which are written beside them and
    not compiled) with the runtime into ``build_dir/lib<name>.so`` (and
    ``build_dir/<name>_host``) by the SCons build of :func:`build_module`, with no backend:
    the flags of every C compile of variant ``opt``, warnings as errors with ``werror``, linked
    with the runtime library of ``engine`` (:mod:`pto_core.engines`).
    For tests and tools that write a module's binding themselves; returns ``build_dir``."""
    if not re.fullmatch(r"[A-Za-z_]\w*", name) or any(
            not re.fullmatch(r"[\w.-]+\.[ch]", n) for n in sources):
        raise PTOError(f"build_c_sources: '{name}' must be a C identifier and each source a "
                       f"plain '*.c' or '*.h' file name (got {', '.join(sources)})")
    if not any(n.endswith(".c") for n in sources):
        raise PTOError(f"build_c_sources: no '*.c' source to build '{name}' from (got "
                       f"{', '.join(sources) or 'none'})")
    bdir = Path(build_dir)
    with _exclusive(bdir):
        paths = [bdir / "gen" / n for n in sources]
        for path, text in zip(paths, sources.values()):
            write_if_changed(path, text)
        _link(bdir, name, [p for p in paths if p.suffix == ".c"], f"'{name}'", jobs, lambda _: None,
              f"opt={opt}", f"werror={int(werror)}", f"engine={get_engine(engine).name}")
    return bdir


def launch(target: str, module: Module, tensors: Mapping[str, np.ndarray],
           scalars: Mapping[str, Any], *, options: CompileOptions | None = None,
           workers: int | None = 2, threshold: int = 0, build_dir: Path | None = None,
           phases: Phases | None = None, in_place: bool = False,
           timeout: float | None = None, engine: str | None = None,
           runtime: str | None = None, schedulers: int | None = None,
           cores: int | None = None, heap_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Build ``module`` for ``target`` and run its entry function with numpy arrays in and out;
    returns every tensor of the entry function after the run. With ``in_place`` a backend whose
    kernels work on host memory runs on the given arrays themselves (C-ordered rows, the
    parameter's dtype) and returns them; otherwise the caller's arrays are left alone.
    ``phases`` times the ``codegen``, ``build`` and ``run`` phases. ``timeout``: seconds the run
    may take (``PTO_TIMEOUT`` for the launch); a run past it raises PTOError naming the stuck
    task. ``engine`` runs the task graph on another engine (:mod:`pto_core.engines`, e.g.
    ``"starpu"``; it may also come with ``options``); None keeps the one of ``options``.
    ``runtime``: the runtime's mode, ``"default"`` or ``"three-tier"`` (``schedulers``
    scheduler threads, 3 if None, dispatching to ``cores`` cores, ``workers`` if None);
    ``heap_bytes`` bounds the memory of runtime-owned intermediates alive at once (the
    orchestration waits for room; None: no bound); see :func:`runtime_mode_environment`.

    >>> out = launch("arm64", module, {"input": x, "output": y}, {"num_tiles": 8})  # doctest: +SKIP
    """
    options = with_engine(options, engine)
    phases = phases or Phases(enabled=False)
    info = plugins.get_backend(target)
    check_backend(engine_of(options), target, info.host_kernels)
    entry = module.functions.get(module.entry or "")
    if entry is not None:
        scalars = {**scalars, **check_scalar_args(entry, scalars)}
    bdir = build_module(target, module, options, build_dir=build_dir, phases=phases)
    return run_built(target, module, bdir, tensors, scalars, options=options, workers=workers,
                     threshold=threshold, phases=phases, in_place=in_place, timeout=timeout,
                     runtime=runtime, schedulers=schedulers, cores=cores, heap_bytes=heap_bytes)


def run_built(target: str, module: Module, build_dir: Path, tensors: Mapping[str, np.ndarray],
              scalars: Mapping[str, Any], *, options: CompileOptions | None = None,
              workers: int | None = 2, threshold: int = 0, phases: Phases | None = None,
              in_place: bool = False, optimised: bool = False,
              timeout: float | None = None, runtime: str | None = None,
              schedulers: int | None = None, cores: int | None = None,
              heap_bytes: int | None = None) -> dict[str, np.ndarray]:
    """Run ``module`` as built by :func:`build_module` in ``build_dir`` by the backend's driver
    (see :func:`launch` for the arguments; ``optimised``: ``module`` went
    through the passes already)."""
    options = options or CompileOptions()
    phases = phases or Phases(enabled=False)
    check_launch(engine_of(options))
    if runtime not in (None, "default") and engine_of(options) != DEFAULT_ENGINE:
        raise PTOError(f"runtime mode {runtime!r}: a mode of PTO's own runtime, not of engine "
                       f"'{engine_of(options)}'")
    if not optimised:
        module, _ = optimise(module, options, target)
    deadline = None if timeout is None else timeout_seconds(timeout)
    mode = runtime_mode_environment(runtime, schedulers, cores, heap_bytes)
    with phases.phase("run", label=f"run {target}"), \
            runtime_environment({"PTO_TIMEOUT": deadline, **mode}):
        launch = plugins.get_backend(target).driver.launch
        # a driver that cannot work on the caller's arrays leaves in_place out of its signature
        extra = {"in_place": in_place} if "in_place" in inspect.signature(launch).parameters else {}
        result = launch(module, Path(build_dir), dict(tensors), dict(scalars), options,
                        2 if workers is None else workers, threshold, **extra)
    return dict(result)


#: the C runtime's execution modes (``PTO_RUNTIME``)
RUNTIME_MODES = ("default", "three-tier")


def runtime_mode_environment(runtime: str | None, schedulers: int | None = None,
                             cores: int | None = None,
                             heap_bytes: int | None = None) -> dict[str, Any]:
    """The variables that configure the C runtime when it is created (``PTO_RUNTIME``,
    ``PTO_SCHEDULERS``, ``PTO_CORES``, ``PTO_HEAP_BYTES``; None: left alone). Schedulers and
    cores belong to the three-tier mode only; the bound on intermediates to every mode.

    >>> runtime_mode_environment("three-tier", 1, 2)
    {'PTO_RUNTIME': 'three-tier', 'PTO_SCHEDULERS': 1, 'PTO_CORES': 2, 'PTO_HEAP_BYTES': None}
    """
    if runtime is not None and runtime not in RUNTIME_MODES:
        raise PTOError(f"runtime mode: expected one of {', '.join(RUNTIME_MODES)}, got {runtime!r}")
    for name, value, hi in (("schedulers", schedulers, PTO_MAX_SCHEDULERS),
                            ("cores", cores, PTO_MAX_WORKERS)):
        if value is None:
            continue
        if runtime != "three-tier":
            raise PTOError(f"{name}: only the three-tier runtime mode has {name}")
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= hi:
            raise PTOError(f"{name}: expected a whole number in [1, {hi}], got {value!r}")
    if heap_bytes is not None and (not isinstance(heap_bytes, int) or isinstance(heap_bytes, bool)
                                   or not 1 <= heap_bytes < 2 ** 63):
        raise PTOError(f"heap_bytes: expected a whole number of bytes >= 1, got {heap_bytes!r}")
    return {"PTO_RUNTIME": runtime, "PTO_SCHEDULERS": schedulers, "PTO_CORES": cores,
            "PTO_HEAP_BYTES": heap_bytes}


def module_digest(texts: Mapping[str, str]) -> str:
    """A short content hash of generated sources (for cache keys)."""
    h = hashlib.sha256()
    for k in sorted(texts):
        h.update(k.encode() + b"\0" + texts[k].encode() + b"\0")
    return h.hexdigest()[:16]
