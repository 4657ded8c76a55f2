"""Choosing each kernel's configuration: a small search on the device, cached on disk, as
Triton's autotuner does, and the performance model's choice where nothing is timed.

A configuration is a :class:`~pto_cuda.config.KernelConfig` (warps per block, the warp grid of
matmul accumulators, pipeline stages), the knobs the emitter has. The tuner needs four things,
each replaceable:

- a **search space** (:class:`SearchSpace`): a kernel's candidate configurations, the default
  first (:data:`KERNEL_CONFIGS`: :func:`pto_cuda.config.candidate_configs`);
- :func:`order_candidates`: the most promising first, from the installed performance model
  (:func:`use_model`; by default :func:`pto_cuda.perf.tuning.model_order`, which ranks them by
  predicted time and drops what cannot be built), else as listed;
- a **timer**: the seconds of one candidate on the device (:func:`device_timer` builds the
  program with it and times it; tests pass their own);
- the **cache** (:class:`TuneCache`): one JSON file per kernel hash and architecture under
  the per-user cache directory, read again by every later build.

Code generation calls :func:`config_for`: a configuration fixed in the options (``threads``,
``cuda_config.<kernel>``, ``cuda_config``, or the tuner's ``kernel_configs``), else the cached
choice, else the model's choice (cached like a measured one), else the default. Nothing is timed
there; :func:`tune` and :func:`tune_module` time candidates where a device is present, in the
model's order.

>>> from pto_core import PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> f = (PTOFunctionBuilder("k").in_core().memref("a", M.GLOBAL, T.F32)
...      .tile("x", 8, 1024, T.F32).load("x", "a").exp("x", "x").store("a", "x").build())
>>> [str(c) for c in KERNEL_CONFIGS.candidates(KernelInfo(f, None, "sm_80"))]
['warps=8,stages=3', 'warps=4,stages=3', 'warps=16,stages=3']
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
from pto_core.codegen.cnames import c_function, c_names
from pto_core.driver import build_root
from pto_core.errors import PTOBackendError, PTOError
from pto_core.ir import Function, Module
from pto_core.options import CompileOptions

from . import __version__

from .config import KernelConfig, candidate_configs, cuda_options, default_config

#: a configuration: a frozen dataclass whose fields are JSON values (a KernelConfig)
Config = Any

#: the CompileOptions.extra key of explicit per-kernel configurations: ((kernel, config), ...)
CONFIGS_OPTION = "kernel_configs"


@dataclass(frozen=True)
class KernelInfo:
    """What the tuner, a search space and a performance model know of one kernel: its InCore
    function (as code generation sees it, after the passes), its module and the architecture."""

    function: Function
    module: Module | None
    arch: str

    def __post_init__(self) -> None:
        # one kernel, one key: code generation sees its values under C names
        # (pto_core.codegen.cnames), the tuner and the card under the program's
        object.__setattr__(self, "function", c_function(self.function))
        if self.module is not None:
            object.__setattr__(self, "module", c_names(self.module))

    @property
    def name(self) -> str:
        return self.function.name


class SearchSpace(Protocol):
    """The knobs of a kernel: ``candidates(kernel)`` lists its configurations, the default
    first; ``name`` tells spaces apart in the cache."""

    name: str

    def candidates(self, kernel: KernelInfo) -> Sequence[Config]: ...


class KernelConfigSpace:
    """The emitter's :class:`~pto_cuda.config.KernelConfig` knobs: warp counts, and for
    tensor-core matmul kernels their warp grids and pipeline depths
    (:func:`pto_cuda.config.candidate_configs`)."""

    name = "kernel_config"

    def candidates(self, kernel: KernelInfo) -> list[KernelConfig]:
        return candidate_configs(kernel.function, kernel.module, kernel.arch)


#: the search space code generation and the tuner use unless told otherwise
KERNEL_CONFIGS = KernelConfigSpace()


def renderer_args(config: Config) -> dict[str, Any]:
    """The emitter's arguments for ``config`` (``CudaRenderer(arch, **renderer_args(c))``)."""
    if isinstance(config, KernelConfig):
        return {"config": config}
    raise PTOError(f"the CUDA emitter has no knob for configuration {config!r}")


# ---------------------------------------------------------------------------- the model
Model = Callable[[KernelInfo, Sequence[Config]], Sequence[Config]]


def performance_model(kernel: KernelInfo, candidates: Sequence[Config]) -> list[Config]:
    """The default model: :func:`pto_cuda.perf.tuning.model_order`."""
    from .perf.tuning import model_order
    return model_order(kernel, candidates)


_model: Model | None = performance_model


def use_model(model: Model | None) -> Model | None:
    """Install the performance model that :func:`order_candidates` asks (None: none) and
    return the one it replaces. A model gets a kernel and its candidates and returns them most
    promising first; it may drop those it rejects, and returns none when it cannot judge."""
    global _model
    previous, _model = _model, model
    return previous


def has_model() -> bool:
    return _model is not None


def order_candidates(kernel: KernelInfo, candidates: Sequence[Config]) -> list[Config]:
    """``candidates`` most promising first: the installed model's order, else as listed (a
    search space lists its default first).

    >>> previous = use_model(None)
    >>> order_candidates(None, [KernelConfig(8), KernelConfig(4)])
    [KernelConfig(warps=8, warp_m=None, stages=3), KernelConfig(warps=4, warp_m=None, stages=3)]
    >>> _ = use_model(previous)
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
        obj = {"kernel": kernel.name, "module": getattr(kernel.module, "name", None),
               "arch": kernel.arch,
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
def choose(kernel: KernelInfo, space: SearchSpace = KERNEL_CONFIGS,
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


def tune(kernel: KernelInfo, timer: Callable[[Config], float], space: SearchSpace = KERNEL_CONFIGS,
         cache: TuneCache | None = None, budget: int = 6, retune: bool = False) -> Choice:
    """Time up to ``budget`` candidates of ``kernel`` (most promising first) with ``timer`` and
    cache the fastest. A measured choice already cached is returned without timing unless
    ``retune``. A candidate whose timer raises is skipped (its error is kept with the timings);
    when every one fails, :class:`PTOError` names the kernel and the errors.

    >>> def timer(c): return {8: 2.0, 4: 1.0}.get(c.warps, 3.0)
    >>> tune(kernel, timer).config                                   # doctest: +SKIP
    KernelConfig(warps=4, warp_m=None, stages=3)
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
    return dict(cuda_options(options).kernel_configs)


def with_configs(options: CompileOptions, configs: Mapping[str, Config]) -> CompileOptions:
    """``options`` with ``configs`` (by kernel name) fixed on top of those it already fixes."""
    merged = {**explicit_configs(options), **configs}
    extra = [(k, v) for k, v in options.extra if k != CONFIGS_OPTION]
    extra.append((CONFIGS_OPTION, tuple(sorted(merged.items()))))
    return dataclasses.replace(options, extra=tuple(extra))


def fixed_config(function: Function, options: CompileOptions | None,
                 arch: str) -> KernelConfig | None:
    """The configuration the options fix for ``function``, if any: ``threads`` (a block size:
    that many warps, the rest the default), ``cuda_config.<function>`` or ``cuda_config``
    (``"warps=4,stages=2"``, the rest the default), or the tuner's ``kernel_configs``.
    A bad value raises :class:`PTOBackendError` naming the function."""
    opts = cuda_options(options)
    text = opts.cuda_config_of.get(function.name) or opts.cuda_config
    threads = opts.threads
    try:
        config = KernelConfig.parse(text or "", default_config(arch))
        if threads:
            config = dataclasses.replace(config, warps=max(1, int(threads) // 32))
    except ValueError as e:
        what = "threads" if threads and not text else "cuda_config"
        raise PTOBackendError(f"{what}: {e}", function=function.name) from None
    if text or threads:
        return config
    return explicit_configs(options).get(function.name)


def config_for(function: Function, module: Module | None, options: CompileOptions | None,
               arch: str, space: SearchSpace = KERNEL_CONFIGS,
               cache: TuneCache | None = None) -> KernelConfig:
    """What code generation builds ``function`` with: fixed by the options
    (:func:`fixed_config`), else :func:`choose` (the cached choice, the model's, the default).
    The one place these meet: the plugin's code generation and the performance card both ask
    it."""
    fixed = fixed_config(function, options, arch)
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
    from pto_core.driver import build_module
    from pto_core.codegen.orchestration import c_module_name

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
                arch: str = "sm_90", space: SearchSpace = KERNEL_CONFIGS,
                cache: TuneCache | None = None, budget: int = 6, retune: bool = False,
                repeat: int = 10, check: Callable[[Mapping[str, Any]], None] | None = None,
                measure: Callable[[Variant], float] | None = None) -> dict[str, Choice]:
    """Tune every kernel of ``module`` in turn on the device (:func:`device_timer` on these
    tensors; each later kernel is timed with the earlier kernels' choices in place); returns
    the choice per kernel. Later builds of the module use them (:func:`config_for`)."""
    from pto_core.driver import optimise
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
                 space: SearchSpace = KERNEL_CONFIGS, cache: TuneCache | None = None) -> str:
    """A digest of the configuration every kernel of ``module`` would be built with, so a
    build made before a kernel was tuned is not taken for a current one."""
    from pto_core.driver import optimise
    optimised, _ = optimise(module, options or CompileOptions())
    parts = [(fn.name, _as_dict(config_for(fn, optimised, options, arch, space, cache)))
             for fn in optimised.functions.values() if fn.is_incore]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
