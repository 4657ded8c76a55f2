"""SCons glue: per-target environments, the source-generation builder, module builds.

Used by the root ``SConstruct`` (``scons target=<backend>``) and by the one-module builds of
:func:`pto_core.driver.launch`. Only importable inside an SCons run.

Per program ``P`` (an ``examples/*.py`` with ``build_module()`` or a ``.pto`` file) and target
``T`` everything goes to ``build/T/P/`` (``build/T-aarch64/P/`` when cross-compiling):

* ``gen/`` — sources written by the ``PTOGenerate`` builder: a Python action that loads the
  program and calls :func:`pto_core.driver.compile_module`. Its emitter names the files
  before they exist; the generator code (every ``pto_core`` module and the backend's package)
  is a dependency, so editing the compiler regenerates. Files are rewritten only when their
  content changes and are ``Precious``; with SCons' content signatures an edit that leaves the
  generated text unchanged rebuilds nothing after it;
* one object per kernel, the orchestration and binding objects, ``lib<module>.so`` (for ctypes)
  and ``<module>_host`` (reads/writes ``.npy``), both linked with the runtime built from
  ``runtime/SConscript`` into ``build/T/runtime``.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from typing import Any, Mapping, Sequence

from SCons.Script import (ARGUMENTS, COMMAND_LINE_TARGETS, Action, Alias, BoolVariable, Builder,
                          CacheDir, Default, Depends, EnumVariable, Environment, Exit, File,
                          GetOption, Help, NoCache, PathVariable, Precious, SConscript,
                          SConsignFile, Variables)

from . import engines, plugins
from .codegen import host
from . import driver
from .driver import RUNTIME_MODES, compile_module, planned_files, runtime_mode_environment
from .errors import PTOBackendError, PTOError
from .options import CompileOptions
from .codegen.orchestration import c_module_name
from .program import is_program, load_program
from .progress import install_scons_progress, scons_print_cmd_line
from .resources import runtime_dir
CROSS_PREFIX = {"aarch64": "aarch64-linux-gnu-"}
#: the optimisation flags of each build variant (``opt=``), given once to every C and C++
#: compile of a build (generated code, the runtime, a backend tool's host compiles). A backend
#: may raise release's level (arm64: -O3); nothing adds a level after debug's -O0.
OPT_FLAGS = {"release": ("-O2",), "debug": ("-O0", "-g"), "native": ("-O2",)}


@dataclass(frozen=True)
class BuildSettings:
    """What a backend driver's ``configure_scons`` receives: the target, the cross-compilation
    triple family ("" = native, "aarch64"), the flavour ("release" | "debug" | "native"), the
    compile options of the pass pipeline, and the command line's ``key=value`` arguments.

    A backend declares its own build variables with :meth:`variable` while it configures:
    ``scons -h`` lists them (it configures every installed backend for its help text), and
    the value comes from the command line.

    >>> BuildSettings("arm64", arguments={"march": "armv8.2-a+fp16"}).variable(
    ...     "march", "AArch64 -march of cross builds", "armv8-a")
    'armv8.2-a+fp16'
    """

    target: str
    cross: str = ""
    opt: str = "release"
    compile: CompileOptions = CompileOptions()
    #: ``key=value`` arguments of the command line (SCons' ARGUMENTS)
    arguments: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: SCons ``Variables`` that collect the backend's declarations for ``scons -h``
    variables: Any = field(default=None, compare=False, repr=False)

    def variable(self, key: str, help: str, default: str, allowed: Sequence[str] = ()) -> str:
        """Declare the backend build variable ``key`` (shown by ``scons -h`` with ``help`` and
        ``default``) and return its value: ``key=value`` from the command line, else
        ``default``. With ``allowed``, other values are refused (ValueError)."""
        if self.variables is not None:
            if allowed:
                self.variables.Add(EnumVariable(key, help, default, allowed_values=tuple(allowed)))
            else:
                self.variables.Add(key, help, default)
        value = str(self.arguments.get(key, default))
        if allowed and value not in allowed:
            raise ValueError(f"{key}={value}: expected one of {', '.join(allowed)}")
        return value


def plain_env() -> Any:
    """An SCons environment with the caller's PATH that echoes commands below the progress line
    (:func:`pto_core.progress.scons_print_cmd_line`) when one is drawn."""
    env = Environment(ENV={"PATH": os.environ.get("PATH", "")})
    echo = scons_print_cmd_line()
    if echo is not None:
        env["PRINT_CMD_LINE_FUNC"] = echo
    return env


def base_env(opt: str = "release", werror: bool = False) -> Any:
    """:func:`plain_env` with what every C compile of build variant ``opt`` gets, whatever the
    target: the runtime's include path, warnings (errors with ``werror``), :data:`OPT_FLAGS`."""
    if opt not in OPT_FLAGS:
        raise ValueError(f"opt={opt}: expected one of {', '.join(OPT_FLAGS)}")
    env = plain_env()
    env.Append(CPPPATH=[str(runtime_dir() / "include"), str(host.TEMPLATES)],
               CFLAGS=["-std=gnu11"], CCFLAGS=["-Wall", *OPT_FLAGS[opt]],
               LINKFLAGS=["-pthread"], LIBS=["m", "pthread"])
    if werror:
        env.Append(CCFLAGS=["-Werror"])
    return env


def _werror(arguments: Mapping[str, str]) -> bool:
    return str(arguments.get("werror", "")).lower() in ("1", "yes", "true")


def make_env(target: str, *, cross: str = "", opt: str = "release",
             compile_options: CompileOptions | None = None,
             arguments: Mapping[str, str] | None = None, variables: Any = None,
             engine: str = engines.DEFAULT) -> Any:
    """An SCons environment for ``target``: C flags, runtime include path, the cross compiler,
    the flags of ``engine`` (:func:`pto_core.engines.configure_env`), then whatever the
    backend's driver adds in ``configure_scons`` (reading its build variables from ``arguments``,
    default SCons' ARGUMENTS, and declaring them in ``variables`` if given)."""
    arguments = dict(ARGUMENTS if arguments is None else arguments)
    env = base_env(opt, werror=_werror(arguments))
    engines.configure_env(env, engine)
    env["PTO_TARGET"] = target
    env["PTO_CROSS"] = cross
    env["PTO_COMPILE_OPTIONS"] = compile_options or CompileOptions()
    if cross:
        if cross not in CROSS_PREFIX:
            raise ValueError(f"unknown cross target '{cross}' (known: {', '.join(CROSS_PREFIX)})")
        pre = CROSS_PREFIX[cross]
        env.Replace(CC=pre + "gcc", CXX=pre + "g++", AR=pre + "ar", RANLIB=pre + "ranlib",
                    LINK=pre + "gcc", SHLINK=pre + "gcc")
        env.Append(LINKFLAGS=["-static"])
    plugins.get_backend(target).driver.configure_scons(
        env, BuildSettings(target, cross, opt, env["PTO_COMPILE_OPTIONS"], arguments=arguments,
                           variables=variables))
    return env


# --------------------------------------------------------------------------------------------
# Source generation
# --------------------------------------------------------------------------------------------

_programs: dict[str, Any] = {}


def _load(path: str):
    if path not in _programs:
        _programs[path] = load_program(path)
    return _programs[path]


def generator_files(target: str) -> list[str]:
    """The Python files whose change must regenerate sources
    (:func:`pto_core.driver.generator_files`: the installed ``pto_core`` and the
    packages of the plugin that provides ``target``)."""
    return [str(f) for f in driver.generator_files(target)]


def _gen_emitter(target, source, env):
    gen_dir = Path(str(target[0])).parent
    prog = _load(source[0].abspath)
    files = planned_files(env["PTO_TARGET"], prog.module, env["PTO_COMPILE_OPTIONS"])
    return [File(str(gen_dir / f)) for f in files.all], source


def _gen_action(target, source, env):
    # a fresh load: the program file may have changed since the emitter ran
    prog = load_program(source[0].abspath)
    compile_module(env["PTO_TARGET"], prog.module, Path(str(target[0])).parent,
                   env["PTO_COMPILE_OPTIONS"])
    return 0


def _gen_str(target, source, env):
    return f"pto generate {source[0]} -> {Path(str(target[0])).parent}/ ({env['PTO_TARGET']})"


def add_builders(env) -> None:
    env.Append(BUILDERS={"PTOGenerate": Builder(action=Action(_gen_action, _gen_str),
                                                emitter=_gen_emitter)})


# --------------------------------------------------------------------------------------------
# Module builds
# --------------------------------------------------------------------------------------------

def runtime_libs(env, variant_dir: str) -> list:
    """``[static, shared]`` runtime libraries of the engine of ``env`` (``PTO_ENGINE``, default
    PTO's own runtime) built into ``variant_dir``."""
    return SConscript(str(runtime_dir() / "SConscript"), variant_dir=variant_dir, duplicate=0,
                      exports={"env": env})


def link_module(env, out_dir: str, name: str, gen_files: list, rt_static, npy_obj) -> dict:
    """Objects of the generated sources, ``lib<name>.so`` and (from the ``*_host.c`` among
    them, when there is one) ``<name>_host``. A backend that sets ``env["PTO_UNITY_SUFFIX"]``
    (e.g. ``".cpp"``) gets its files of that suffix compiled as one unity translation unit."""
    host_c = [f for f in gen_files if str(f).endswith("_host.c")]
    others = [f for f in gen_files if f not in host_c]
    unity = env.get("PTO_UNITY_SUFFIX")
    if unity:
        # one translation unit includes every generated file of that suffix unchanged, so a
        # heavy header is parsed once (SCons' scanner follows the includes: an edited kernel
        # still rebuilds it)
        together = [f for f in others if str(f).endswith(unity)]
        others = [f for f in others if f not in together]
        if together:
            gen_dir = Path(str(together[0])).parent
            others.append(env.Textfile(
                str(gen_dir / f"{name}_unity{unity}"),
                ["/* Generated by PTO: these files compiled as they are. */",
                 *(f'#include "{Path(str(f)).name}"' for f in together)],
                TEXTFILESUFFIX="", LINESEPARATOR="\n")[0])
    objs = [env.SharedObject(f) for f in others]
    # the runtime is linked statically (its objects are PIC), so each result stands alone
    libs = [rt_static] + list(env.get("LIBS", []))
    lib = env.SharedLibrary(f"{out_dir}/{name}", objs, LIBS=libs)
    if not host_c:
        return {"objects": objs, "lib": lib}
    host_obj = env.Object(host_c[0])
    exe = env.Program(f"{out_dir}/{name}_host", [host_obj] + objs + [npy_obj], LIBS=libs)
    return {"objects": objs, "lib": lib, "host": exe}


def build_program(env, program: str, build_dir: str, rt_static, npy_obj) -> dict:
    """Everything for one program file into ``build_dir/<stem>/``."""
    stem = Path(program).stem
    out = f"{build_dir}/{stem}"
    prog = _load(str(Path(program).resolve()))
    name = c_module_name(prog.module)
    gen = env.PTOGenerate(f"{out}/gen/.pto", program)
    Precious(gen)
    Depends(gen, generator_files(env["PTO_TARGET"]))
    res = link_module(env, out, name, gen, rt_static, npy_obj)
    res.update(gen=gen, name=name, stem=stem, out=out)
    Alias(stem, [res["lib"], res["host"]])
    return res


def build_generated_module(arguments: dict) -> None:
    """Entry of the SConstruct that :func:`pto_core.driver.build_module` writes: link
    the sources already in ``./gen`` into ``lib<name>.so`` and ``<name>_host`` (``cache=DIR``:
    an SCons cache shared between launch folders; a cross build: the static ``<name>_host``
    only, as in the root SConstruct; no ``target``: C sources of no backend, built with the
    flags of every C compile, :func:`base_env`)."""
    install_scons_progress()
    target, name = arguments.get("target", ""), arguments["name"]
    if arguments.get("cache"):
        # shared by every launch folder: a new variant of a module takes the runtime's objects
        # from it instead of compiling them again
        CacheDir(arguments["cache"])
    cross = arguments.get("cross", "")
    opt = arguments.get("opt", "release")
    engine = arguments.get("engine", engines.DEFAULT)
    if target:
        env = make_env(target, cross=cross, opt=opt, arguments=arguments, engine=engine)
    else:
        env = base_env(opt, werror=_werror(arguments))
        engines.configure_env(env, engine)
    rt_static = runtime_libs(env, "runtime")[0]
    npy_obj = env.Object("common/pto_npy", str(host.TEMPLATES / "pto_npy.c"))
    files = Path("sources.txt").read_text().split()
    res = link_module(env, ".", name, [File(f) for f in files], rt_static, npy_obj)
    Default([res["host"]] if cross else [r for k, r in res.items() if k != "objects"])


def build_runtime(arguments: dict) -> None:
    """Entry of the SConstruct that :func:`pto_core.driver.build_runtime_library` writes: the
    target-independent runtime of variant ``opt`` and engine ``engine`` into this folder
    (``cache=DIR`` as in :func:`build_generated_module`)."""
    if arguments.get("cache"):
        CacheDir(arguments["cache"])
    env = base_env(arguments.get("opt", "release"))
    engines.configure_env(env, arguments.get("engine", engines.DEFAULT))
    Default(runtime_libs(env, "."))


def find_programs(spec: str) -> list[str]:
    """Program files named by ``spec`` (comma-separated paths or globs), as
    :func:`pto_core.program.is_program` tells them: ``.pto``/``.ptoas`` files and Python files
    that define ``build_module``."""
    return [path for part in (p.strip() for p in spec.split(",")) if part
            for path in sorted(glob(part)) or [part] if is_program(path)]


def sconstruct() -> None:
    """The root SConstruct: ``scons target=<backend> [examples=...] [cross=aarch64] ...``."""
    backends = sorted(b.name for b in plugins.list_backends())
    default_target = os.environ.get("PTO_TARGET") or (backends[0] if backends else "")
    vars = Variables(None, ARGUMENTS)
    vars.Add("target", f"backend to build for (installed: {', '.join(backends) or 'none'})",
             default_target)
    vars.Add("examples", "programs to build: comma-separated files or globs", "examples/*.py")
    vars.Add(EnumVariable("cross", "cross-compile the host side for another CPU", "",
                          allowed_values=("", *CROSS_PREFIX)))
    vars.Add(PathVariable("cache", "shared build cache directory (CacheDir); empty = none", "",
                          PathVariable.PathAccept))
    vars.Add(EnumVariable("opt", "build flavour (optimisation flags of every compile)", "release",
                          allowed_values=tuple(OPT_FLAGS)))
    vars.Add(BoolVariable("werror", "warnings of C compiles are errors (what the tests build with)",
                          False))
    vars.Add(EnumVariable("O", "PTO pass pipeline level", "2", allowed_values=("0", "1", "2")))
    vars.Add("build_dir", "output root (per target: <build_dir>/<target>[-<cross>]/)", "build")
    vars.Add("workers", "runtime worker threads for the 'check' alias", "2")
    vars.Add(EnumVariable("engine", "what runs the task graphs: " + "; ".join(
        f"{e.name} = {e.description}" for e in engines.ENGINES.values()), engines.DEFAULT,
        allowed_values=tuple(engines.ENGINES)))
    vars.Add(EnumVariable("runtime", "runtime mode the 'check' alias runs programs in "
                          "(three-tier: orchestrator, scheduler threads, cores)", "default",
                          allowed_values=RUNTIME_MODES))
    vars.Add("schedulers", "three-tier: scheduler threads for the 'check' alias (empty: 3)", "")
    vars.Add("cores", "three-tier: cores for the 'check' alias (empty: workers)", "")
    probe = Environment(variables=vars)
    Help("PTO build: scons target=<backend> [options] [alias...]\n"
         "aliases: <program stem> (one program), runtime, check (run every program and compare "
         "with the reference interpreter)\n\n" + vars.GenerateHelpText(probe))
    if GetOption("help"):
        # every backend's own variables, whatever the target: configure each one for its
        # declarations only (nothing is built in a help run)
        for name in backends:
            Help(backend_help(name, cross=probe["cross"], opt=probe["opt"]), append=True)
        return
    install_scons_progress()
    target = probe["target"]
    if target not in backends:
        try:
            plugins.get_backend(target)     # raises saying why: not installed, broken, conflicting
        except PTOBackendError as e:
            print(f"scons: {e}")
        Exit(2)
    cross = probe["cross"]
    engine = probe["engine"]
    copts = engines.with_engine(CompileOptions(opt_level=int(probe["O"])), engine)
    try:
        engines.check_backend(engine, target, plugins.get_backend(target).host_kernels)
        env = make_env(target, cross=cross, opt=probe["opt"], compile_options=copts,
                       engine=engine)
    except PTOError as e:
        print(f"scons: {e}")
        Exit(2)
    add_builders(env)
    if probe["cache"]:
        CacheDir(probe["cache"])
    root = probe["build_dir"]
    # signatures live with the build, so separate build dirs never share (or race on) them
    Path(root).mkdir(parents=True, exist_ok=True)
    SConsignFile(str(Path(root).resolve() / ".sconsign"))
    # another engine's build sits beside the default one's: build/<target>[-<cross>][-<engine>]
    tdir = (f"{root}/{target}" + (f"-{cross}" if cross else "")
            + (f"-{engine}" if engine != engines.DEFAULT else ""))
    rt_static = runtime_libs(env, f"{tdir}/runtime")[0]
    # the target-independent runtime, for tools that link it directly
    Alias("runtime", runtime_libs(base_env(probe["opt"], probe["werror"]), f"{root}/runtime"))
    npy_obj = env.Object(f"{tdir}/common/pto_npy", str(host.TEMPLATES / "pto_npy.c"))
    built = []
    for p in find_programs(probe["examples"]):
        try:
            if "$" in p:            # SCons would expand it, then build another path
                raise PTOError(f"{p}: SCons reads '$' in a path as a variable: rename the "
                               f"program")
            built.append(build_program(env, p, tdir, rt_static, npy_obj))
        except PTOError as e:
            print(f"scons: {e}")
            Exit(2)
    # a cross build is for running elsewhere: only the (static) host programs
    Default(([] if cross else [r["lib"] for r in built]) + [r["host"] for r in built])
    if "check" in COMMAND_LINE_TARGETS:
        try:
            counts = {k: _count(k, probe[k]) if probe[k] else None for k in ("schedulers", "cores")}
            workers = _count("workers", probe["workers"])
            mode = runtime_mode_environment(probe["runtime"], **counts)
        except PTOError as e:
            print(f"scons: {e}")
            Exit(2)
        _add_check(env, built, cross, workers, mode)


def _count(key: str, text: str) -> int:
    """A count variable of the command line (``workers=4``) as an int >= 1, else PTOError."""
    if not re.fullmatch(r"[0-9]+", text.strip()) or int(text) < 1:
        raise PTOError(f"{key}={text!r}: expected a whole number >= 1")
    return int(text)


def backend_help(target: str, *, cross: str = "", opt: str = "release") -> str:
    """The help section of one backend's build variables (declared with
    :meth:`BuildSettings.variable` in its driver's ``configure_scons``); a backend that cannot be
    configured here says why."""
    vars = Variables(None, ARGUMENTS)
    try:
        env = make_env(target, cross=cross, opt=opt, variables=vars)
        vars.Update(env)
    except Exception as e:  # noqa: BLE001 - a broken backend must not break the help
        return f"\nbackend '{target}': cannot be configured here ({e})\n"
    text = vars.GenerateHelpText(env).strip("\n")
    return f"\nVariables of backend '{target}' (scons target={target} ...):\n\n{text}\n" if text else ""


def _add_check(env, built: list[dict], cross: str, workers: int,
               mode: Mapping[str, Any] | None = None) -> None:
    """``scons check``: run each host program on random inputs and compare with the reference
    interpreter (under qemu-aarch64 when cross-compiled), in the runtime mode of ``mode`` (the
    variables of :func:`pto_core.driver.runtime_mode_environment`)."""
    for res in built:
        act = Action(lambda target, source, env, res=res: _check_one(res, cross, workers, mode or {}),
                     f"pto check {res['stem']}")
        node = env.Command(f"{res['out']}/check.stamp", res["host"], act)
        env.AlwaysBuild(node)
        NoCache(node)
        Alias("check", node)


def _check_one(res: dict, cross: str, workers: int, mode: Mapping[str, Any]) -> int:
    from .checking import run_host_and_compare
    prog = _load(str(Path(res["gen"][0].sources[0].abspath)))
    exe = str(res["host"][0].abspath)
    with host.runtime_environment(mode):
        ok, report = run_host_and_compare(prog, exe, cross=cross, workers=workers,
                                          work_dir=Path(res["out"]) / "check")
    print(report)
    return 0 if ok else 1
