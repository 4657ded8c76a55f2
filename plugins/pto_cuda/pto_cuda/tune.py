"""Choosing each kernel's configuration by a small search on the device, cached on disk, as
Triton's autotuner does.

A configuration is a frozen dataclass of the knobs the emitter exposes (today the block size,
:class:`BlockSize`; tile shapes, warps and stages as the emitter grows them). The tuner only
needs four things, each replaceable:

- a **search space** (:class:`SearchSpace`): a kernel's candidate configurations, its default
  first (:data:`BLOCK_SIZE` is the one the emitter has now);
- :func:`order_candidates`: the most promising first, from a performance model when one is
  installed (:func:`use_model`), else as listed;
- a **timer**: the seconds of one candidate on the device (:func:`device_timer` builds the
  program with it and times it; tests pass their own);
- the **cache** (:class:`TuneCache`): one JSON file per kernel hash and architecture under
  the per-user cache directory, read again by every later build.

Code generation calls :func:`config_for`: an explicit configuration from the options, else the
cached choice, else the model's choice (cached like a measured one), else the default. Nothing
is timed there; :func:`tune` and :func:`tune_module` time candidates where a device is present.

>>> space = BlockSizeSpace()
>>> [c.threads for c in space.candidates_for(256)]
[256, 64, 128, 512]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from pto_core.asm.printer import print_function
from pto_core.codegen.driver import build_root
from pto_core.errors import PTOError
from pto_core.ir import Function, Module
from pto_core.options import CompileOptions

from . import __version__

#: a configuration: a frozen dataclass whose fields are JSON values
Config = Any

#: the CompileOptions.extra key of explicit per-kernel configurations: ((kernel, config), ...)
CONFIGS_OPTION = "kernel_configs"


@dataclass(frozen=True)
class KernelInfo:
    """What the tuner, a search space and a performance model know of one kernel: its InCore
    function (as code generation sees it, after the passes), its module and the architecture."""

    function: Function
    module: Module
    arch: str

    @property
    def name(self) -> str:
        return self.function.name


class SearchSpace(Protocol):
    """The knobs of a kernel: ``candidates(kernel)`` lists its configurations, the default
    first; ``name`` tells spaces apart in the cache."""

    name: str

    def candidates(self, kernel: KernelInfo) -> Sequence[Config]: ...


@dataclass(frozen=True)
class BlockSize:
    """Threads per block (warps x 32): the knob the emitter has now (``CudaRenderer(threads=)``)."""

    threads: int


class BlockSizeSpace:
    """Block sizes from 2 to 16 warps, the emitter's own choice first."""

    name = "block_size"
    sizes = (64, 128, 256, 512)

    def candidates_for(self, default: int) -> list[BlockSize]:
        return [BlockSize(default)] + [BlockSize(t) for t in self.sizes if t != default]

    def candidates(self, kernel: KernelInfo) -> list[BlockSize]:
        from .emitter import CudaRenderer
        return self.candidates_for(CudaRenderer(kernel.arch).threads_for(kernel.function,
                                                                         kernel.module))


#: the search space code generation and the tuner use unless told otherwise
BLOCK_SIZE = BlockSizeSpace()


def renderer_args(config: Config) -> dict[str, Any]:
    """The emitter's arguments for ``config`` (``CudaRenderer(arch, **renderer_args(c))``)."""
    if isinstance(config, BlockSize):
        return {"threads": config.threads}
    raise PTOError(f"the CUDA emitter has no knob for configuration {config!r}")


# ---------------------------------------------------------------------------- the model
_model: Callable[[KernelInfo, Sequence[Config]], Sequence[Config]] | None = None


def use_model(model: Callable[[KernelInfo, Sequence[Config]], Sequence[Config]] | None) -> None:
    """Install the performance model that :func:`order_candidates` asks (None: none). It gets
    a kernel and its candidates and returns them most promising first (it may drop some)."""
    global _model
    _model = model


def has_model() -> bool:
    return _model is not None


def order_candidates(kernel: KernelInfo, candidates: Sequence[Config]) -> list[Config]:
    """``candidates`` most promising first: the installed model's order, else as listed (a
    search space lists its default first).

    >>> order_candidates(None, [BlockSize(256), BlockSize(64)])   # no model installed
    [BlockSize(threads=256), BlockSize(threads=64)]
    """
    if _model is None:
        return list(candidates)
    ordered = list(_model(kernel, candidates))
    allowed = set(candidates)
    strays = [c for c in ordered if c not in allowed]
    if strays:
        raise PTOError(f"the performance model returned configurations that were not candidates "
                       f"of kernel '{getattr(kernel, 'name', kernel)}': {strays}")
    return ordered


# ---------------------------------------------------------------------------- the cache
def cache_dir() -> Path:
    """Where choices are kept: ``tune/`` under the build root (the per-user cache directory,
    ``PTO_BUILD_DIR`` when set), so it moves with the builds."""
    return build_root() / "tune"


def kernel_hash(kernel: KernelInfo, space: SearchSpace, candidates: Sequence[Config]) -> str:
    """The cache key of a kernel besides its architecture: its IR, the search space and its
    candidates, and the backend's version (a new emitter may prefer other choices)."""
    h = hashlib.sha256()
    h.update(repr((__version__, space.name, [_as_dict(c) for c in candidates])).encode())
    h.update(print_function(kernel.function).encode())
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Choice:
    """A kernel's configuration and where it came from: ``measured`` (timed just now),
    ``cache`` (timed earlier), ``model`` (the performance model's pick), ``default``.
    ``timings`` holds (configuration, seconds or None, error or "") of every candidate timed."""

    config: Config
    source: str
    timings: tuple[tuple[Config, float | None, str], ...] = field(default=())


class TuneCache:
    """One JSON file per (architecture, kernel hash): ``<root>/<arch>/<hash>.json``. Written
    atomically; a file that cannot be read or names no current candidate counts as absent."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else cache_dir()

    def path(self, arch: str, digest: str) -> Path:
        safe = "".join(ch for ch in arch if ch.isalnum() or ch in "_,") or "any"
        return self.root / safe / f"{digest}.json"

    def load(self, arch: str, digest: str, candidates: Sequence[Config]) -> Choice | None:
        try:
            obj = json.loads(self.path(arch, digest).read_text())
            wanted = obj["config"]
            source = str(obj["source"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        by_dict = {json.dumps(_as_dict(c), sort_keys=True): c for c in candidates}
        config = by_dict.get(json.dumps(wanted, sort_keys=True))
        if config is None:
            return None
        timings = tuple((by_dict.get(json.dumps(t[0], sort_keys=True), t[0]), t[1], t[2])
                        for t in obj.get("timings", ()) if isinstance(t, list) and len(t) == 3)
        return Choice(config, "cache" if source == "measured" else source, timings)

    def store(self, kernel: KernelInfo, digest: str, choice: Choice) -> Path:
        path = self.path(kernel.arch, digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        obj = {"kernel": kernel.name, "module": kernel.module.name, "arch": kernel.arch,
               "config": _as_dict(choice.config), "source": choice.source,
               "timings": [[_as_dict(c), t, err] for c, t, err in choice.timings],
               "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=1)
        os.replace(tmp, path)
        return path


def _as_dict(config: Config) -> dict[str, Any]:
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise PTOError(f"a configuration must be a dataclass instance, got {config!r}")
    return dataclasses.asdict(config)


# ---------------------------------------------------------------------------- choosing
def choose(kernel: KernelInfo, space: SearchSpace = BLOCK_SIZE,
           cache: TuneCache | None = None) -> Choice:
    """The configuration to build ``kernel`` with, without timing anything: the cached choice,
    else the model's first candidate (then cached), else the space's default."""
    cache = cache or TuneCache()
    candidates = list(space.candidates(kernel))
    if not candidates:
        raise PTOError(f"search space '{space.name}' has no candidate for kernel '{kernel.name}'")
    digest = kernel_hash(kernel, space, candidates)
    hit = cache.load(kernel.arch, digest, candidates)
    if hit is not None:
        return hit
    if has_model():
        ordered = order_candidates(kernel, candidates)
        if ordered:
            choice = Choice(ordered[0], "model")
            cache.store(kernel, digest, choice)
            return choice
    return Choice(candidates[0], "default")


def tune(kernel: KernelInfo, timer: Callable[[Config], float], space: SearchSpace = BLOCK_SIZE,
         cache: TuneCache | None = None, budget: int = 6, retune: bool = False) -> Choice:
    """Time up to ``budget`` candidates of ``kernel`` (most promising first) with ``timer`` and
    cache the fastest. A measured choice already cached is returned without timing unless
    ``retune``. A candidate whose timer raises is skipped (its error is kept with the timings);
    when every one fails, :class:`PTOError` names the kernel and the errors.

    >>> def timer(c): return {256: 2.0, 64: 1.0}.get(c.threads, 3.0)
    >>> tune(kernel, timer).config                                   # doctest: +SKIP
    BlockSize(threads=64)
    """
    if budget < 1:
        raise PTOError(f"tune: budget must be at least 1, got {budget}")
    cache = cache or TuneCache()
    candidates = list(space.candidates(kernel))
    digest = kernel_hash(kernel, space, candidates)
    hit = cache.load(kernel.arch, digest, candidates)
    if hit is not None and hit.source == "cache" and not retune:
        return hit
    timings: list[tuple[Config, float | None, str]] = []
    for config in order_candidates(kernel, candidates)[:budget]:
        try:
            seconds = float(timer(config))
        except Exception as e:  # noqa: BLE001 - a candidate that fails to build or run is skipped
            timings.append((config, None, f"{type(e).__name__}: {e}"[:500]))
            continue
        timings.append((config, seconds, ""))
    timed = [(c, t) for c, t, _ in timings if t is not None]
    if not timed:
        errors = "; ".join(f"{_as_dict(c)}: {err}" for c, _, err in timings)
        raise PTOError(f"tune: every candidate of kernel '{kernel.name}' failed ({errors})")
    best = min(timed, key=lambda ct: ct[1])[0]
    choice = Choice(best, "measured", tuple(timings))
    cache.store(kernel, digest, choice)
    return choice


def explicit_configs(options: CompileOptions | None) -> dict[str, Config]:
    """The per-kernel configurations the options fix (``extra`` key ``kernel_configs``)."""
    extra = dict(getattr(options, "extra", ()) or ())
    return dict(extra.get(CONFIGS_OPTION, ()) or ())


def with_configs(options: CompileOptions, configs: Mapping[str, Config]) -> CompileOptions:
    """``options`` with ``configs`` (by kernel name) fixed on top of those it already fixes."""
    merged = {**explicit_configs(options), **configs}
    extra = [(k, v) for k, v in options.extra if k != CONFIGS_OPTION]
    extra.append((CONFIGS_OPTION, tuple(sorted(merged.items()))))
    return dataclasses.replace(options, extra=tuple(extra))


def config_for(function: Function, module: Module, options: CompileOptions | None,
               arch: str, space: SearchSpace = BLOCK_SIZE,
               cache: TuneCache | None = None) -> Config:
    """What code generation builds ``function`` with: fixed by the options, else :func:`choose`."""
    fixed = explicit_configs(options).get(function.name)
    if fixed is not None:
        return fixed
    return choose(KernelInfo(function, module, arch), space, cache).config


# ---------------------------------------------------------------------------- on a device
@dataclass(frozen=True)
class Variant:
    """One candidate built and loaded: its configuration, build directory and device run."""

    config: Config
    build_dir: Path
    run: Any       # pto_cuda.launch.DeviceRun


def device_timer(target: str, module: Module, kernel: str, tensors: Mapping[str, Any],
                 scalars: Mapping[str, Any], options: CompileOptions | None = None, *,
                 repeat: int = 10, check: Callable[[Mapping[str, Any]], None] | None = None,
                 measure: Callable[[Variant], float] | None = None) -> Callable[[Config], float]:
    """A timer for :func:`tune`: builds ``module`` with ``kernel`` set to the candidate (each
    candidate in its own build directory), runs it once on ``tensors``, lets ``check`` inspect
    the outputs (it raises on a wrong result, which rejects the candidate), then returns
    ``measure(variant)``: by default the seconds of one CUDA Graph replay of the run."""
    from pto_core.codegen.driver import build_module
    from pto_core.orchestration import c_module_name

    from .launch import DeviceRun
    options = options or CompileOptions()
    m = c_module_name(module)

    def time_config(config: Config) -> float:
        opts = with_configs(options, {kernel: config})
        tag = hashlib.sha256(json.dumps(_as_dict(config), sort_keys=True).encode()).hexdigest()[:12]
        bdir = build_module(target, module, opts,
                            build_dir=build_root() / target / "tune" / m / f"{kernel}-{tag}")
        with DeviceRun(bdir / f"lib{m}.so", module, tensors, scalars) as d:
            d.run()
            if check is not None:
                check(d.fetch())
            variant = Variant(config, bdir, d)
            return measure(variant) if measure is not None else d.time_graph(repeat)
    return time_config


def tune_module(target: str, module: Module, tensors: Mapping[str, Any],
                scalars: Mapping[str, Any], options: CompileOptions | None = None, *,
                arch: str = "sm_90", space: SearchSpace = BLOCK_SIZE,
                cache: TuneCache | None = None, budget: int = 6, retune: bool = False,
                repeat: int = 10, check: Callable[[Mapping[str, Any]], None] | None = None,
                measure: Callable[[Variant], float] | None = None) -> dict[str, Choice]:
    """Tune every kernel of ``module`` in turn on the device (:func:`device_timer` on these
    tensors; each later kernel is timed with the earlier kernels' choices in place); returns
    the choice per kernel. Later builds of the module use them (:func:`config_for`)."""
    from pto_core.codegen.driver import optimise
    options = options or CompileOptions()
    optimised, _ = optimise(module, options)
    chosen: dict[str, Choice] = {}
    for fn in (f for f in optimised.functions.values() if f.is_incore):
        timer = device_timer(target, module, fn.name, tensors, scalars,
                             with_configs(options, {k: c.config for k, c in chosen.items()}),
                             repeat=repeat, check=check, measure=measure)
        chosen[fn.name] = tune(KernelInfo(fn, optimised, arch), timer, space, cache, budget,
                               retune)
    return chosen


def build_digest(module: Module, options: CompileOptions | None, arch: str,
                 space: SearchSpace = BLOCK_SIZE, cache: TuneCache | None = None) -> str:
    """A digest of the configuration every kernel of ``module`` would be built with, so a
    build made before a kernel was tuned is not taken for a current one."""
    from pto_core.codegen.driver import optimise
    optimised, _ = optimise(module, options or CompileOptions())
    parts = [(fn.name, _as_dict(config_for(fn, optimised, options, arch, space, cache)))
             for fn in optimised.functions.values() if fn.is_incore]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
