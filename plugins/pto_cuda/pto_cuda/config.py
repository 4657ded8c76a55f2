"""The shape of a generated CUDA kernel: warps per block, how matmul accumulators split over
them, and the depth of the K-loop pipeline; defaults per architecture, and the candidates a
tuner may try.

A task's tile is the program's choice; what the backend chooses is how one thread block works
on it. :class:`KernelConfig` is that choice, frozen and printable so it can be a cache key and
an option value (``--set``-style ``"warps=8,warp_m=2,stages=3"``)::

>>> c = KernelConfig.parse("warps=4,stages=2")
>>> c, str(c), KernelConfig.parse(str(c)) == c
(KernelConfig(warps=4, warp_m=None, stages=2), 'warps=4,stages=2', True)
>>> default_config("sm_80").stages, default_config("sm_90").stages
(3, 4)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from pto_core.ir import Category, Function, Module
from pto_core.options import backend_settings

from .scons_tool import DEFAULT_ARCH

#: warps per block a kernel may have (a block is at most 1,024 threads; fewer than one warp
#: per scheduler leaves tensor cores idle)
WARP_CHOICES = (1, 2, 4, 8, 16)
STAGE_CHOICES = (2, 3, 4, 5)


@dataclass(frozen=True)
class CudaOptions:
    """The options of the ``cuda`` and ``cuda_sim`` backends (``CompileOptions.extra``).

    >>> from pto_core.options import CompileOptions
    >>> o = cuda_options(CompileOptions(extra=(("arch", "sm_80"), ("cuda_config.k", "warps=4"))))
    >>> o.arch, o.cuda_config_of["k"], cuda_options(None).arch
    ('sm_80', 'warps=4', 'sm_90')
    """

    #: ``"sm_90"`` or a comma list such as ``"sm_80,sm_90"``
    arch: str = DEFAULT_ARCH
    #: the block size of every kernel
    threads: int | None = None
    #: a :class:`KernelConfig` text for every kernel (``"warps=8,warp_m=2,stages=3"``) ...
    cuda_config: str | None = None
    #: ... and per kernel (``cuda_config.<function>``), which wins
    cuda_config_of: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: the tuner's per-kernel configurations (:func:`pto_cuda.tune.with_configs`)
    kernel_configs: tuple = ()


def cuda_options(options: Any) -> CudaOptions:
    """The CUDA options of ``options`` (a ``CompileOptions``, or None: the defaults); an
    unknown option is a PTOError naming it."""
    return backend_settings("cuda", CudaOptions, options)


def arch_major(arch: str) -> int:
    """The smallest compute capability in an arch list, as ``major * 10 + minor``.

    >>> arch_major("sm_90a"), arch_major("sm_80,sm_90")
    (90, 80)
    """
    out = []
    for a in str(arch).split(","):
        digits = "".join(ch for ch in a.strip()[3:] if ch.isdigit())
        out.append(int(digits or 90))
    return min(out)


def wgmma_arch(arch: str) -> bool:
    """Every architecture in ``arch`` is sm_90a, the one with wgmma and the TMA instructions
    the sm_90a main loop needs (plain sm_90 code cannot use them).

    >>> wgmma_arch("sm_90a"), wgmma_arch("sm_90"), wgmma_arch("sm_80,sm_90a")
    (True, False, False)
    """
    return all(a.strip() == "sm_90a" for a in str(arch).split(","))


@dataclass(frozen=True)
class KernelConfig:
    """How one thread block runs one tile task.

    ``warps``: warps per block (None: from the tile sizes). ``warp_m``: rows of the warp grid
    over a matmul accumulator (None: the squarest warp tiles). ``stages``: shared-memory
    buffers of a pipelined K loop (fewer are used when they do not fit).
    """

    warps: int | None = None
    warp_m: int | None = None
    stages: int = 3

    def __post_init__(self) -> None:
        if self.warps is not None and self.warps not in WARP_CHOICES:
            raise ValueError(f"warps must be one of {WARP_CHOICES}, got {self.warps}")
        if self.warp_m is not None and (self.warp_m < 1 or (self.warps and self.warps % self.warp_m)):
            raise ValueError(f"warp_m must divide warps ({self.warps}), got {self.warp_m}")
        if self.stages not in STAGE_CHOICES:
            raise ValueError(f"stages must be one of {STAGE_CHOICES}, got {self.stages}")

    def __str__(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                        if getattr(self, f.name) is not None)

    @classmethod
    def parse(cls, text: str, base: "KernelConfig | None" = None) -> "KernelConfig":
        """``"warps=8,warp_m=2,stages=3"`` (any subset; the rest from ``base``) -> a config;
        bad keys or values raise ValueError naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in str(text).split(","))):
            key, _, value = part.partition("=")
            if key not in names:
                raise ValueError(f"unknown kernel config key '{key}' (known: {sorted(names)})")
            try:
                kw[key] = int(value)
            except ValueError:
                raise ValueError(f"kernel config '{key}' needs an integer, got '{value}'") from None
        return dataclasses.replace(base or cls(), **kw)

    def with_defaults(self, fn: Function, module: Module | None, arch: str) -> "KernelConfig":
        """The same config with ``warps`` filled in from the kernel's tiles when unset."""
        if self.warps is not None:
            return self
        return dataclasses.replace(self, warps=default_warps(fn, module))


def default_config(arch: str) -> KernelConfig:
    """Sensible defaults: 3 pipeline stages on sm_80 (164 KiB of shared memory per SM), 4 on
    sm_90 (228 KiB)."""
    return KernelConfig(stages=4 if arch_major(arch) >= 90 else 3)


def _functions(fn: Function, module: Module | None) -> list[Function]:
    fns, todo = [fn], [fn]
    while todo and module is not None:
        for s in todo.pop().walk():
            callee = module.functions.get(getattr(s, "callee", None) or "")
            if callee is not None and callee not in fns:
                fns.append(callee)
                todo.append(callee)
    return fns


def default_warps(fn: Function, module: Module | None) -> int:
    """Enough warps that every thread has a few elements of the largest tile: 8 for large
    tiles (one per row of an 8-row reduction; 2 x 4 warps over a 128 x 128 accumulator)."""
    largest = max((t.rows * t.cols for f in _functions(fn, module) for t in f.tiles.values()),
                  default=0)
    return 8 if largest >= 2048 else 4 if largest >= 512 else 2 if largest >= 128 else 1


def candidate_configs(fn: Function, module: Module | None, arch: str) -> list[KernelConfig]:
    """The configurations worth trying for one kernel, the default first: warp counts from 4
    to 16 (and the default), and, only where the kernel has a tensor-core matmul, each warp
    grid of its accumulators and each pipeline depth. A tuner times them (or ranks them with
    a performance model) and passes the winner as the ``cuda_config`` option.

    >>> from pto_core import PTOFunctionBuilder, ElementType as T, MemorySpace as M
    >>> f = (PTOFunctionBuilder("k").in_core().memref("a", M.GLOBAL, T.F32)
    ...      .tile("x", 8, 1024, T.F32).load("x", "a").exp("x", "x").store("a", "x").build())
    >>> [str(c) for c in candidate_configs(f, None, "sm_80")]
    ['warps=8,stages=3', 'warps=4,stages=3', 'warps=16,stages=3']
    """
    from .placement import Place, place_tiles, warp_grid
    from .emitter import smem_capacity
    base = default_config(arch).with_defaults(fn, module, arch)
    warps = [base.warps] + [w for w in (4, 8, 16) if w != base.warps]
    has_mma = any(getattr(s, "opdef", None) is not None and s.opdef.category is Category.MATMUL
                  for f in _functions(fn, module) for s in f.walk())
    out: list[KernelConfig] = []
    for w in warps:
        if not has_mma:
            out.append(dataclasses.replace(base, warps=w))
            continue
        for stages in (base.stages, *[s for s in STAGE_CHOICES if s != base.stages]):
            cfg = dataclasses.replace(base, warps=w, stages=stages)
            p = place_tiles(fn, cfg, arch, smem_capacity(arch))
            accs = [t for t, where in p.tiles.items() if where is Place.ACC]
            if p.mainloops and any(ml.stages != stages for ml in p.mainloops.values()):
                continue                     # that many stages do not fit
            if not p.mainloops and stages != base.stages:
                continue                     # no K loop: the depth changes nothing
            grids = {None}
            for t in accs:
                ty = fn.tiles[t]
                for wm in range(1, w + 1):
                    g = warp_grid(ty.rows, ty.cols, w, wm)
                    if g is not None and g.wm == wm:
                        grids.add(wm)
            for wm in sorted(grids, key=lambda x: (x is not None, x or 0)):
                out.append(dataclasses.replace(cfg, warp_m=wm))
    return list(dict.fromkeys(out))
