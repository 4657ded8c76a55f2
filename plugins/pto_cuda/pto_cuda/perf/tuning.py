"""Ordering a kernel's candidate configurations (warps, warp grid, stages) by the performance
model, so that without a device the model picks and with one only the most promising are timed.

:func:`rank` orders candidates by a predictor's time and drops those it rejects (a pipeline
that does not fit in shared memory, a block the device cannot hold). :func:`model_order` is
the tuner's model (``pto_cuda.tune.use_model``; installed by default): it ranks a kernel's
:class:`~pto_cuda.config.KernelConfig` candidates by :func:`kernel_predictor`, the time per
task of the kernel when its launches fill the GPU.

The tuner's predictor runs in code generation, for every candidate of every kernel, so it does
not compile anything: it renders each candidate (which places its tiles and sizes its shared
memory, as the build will) and estimates what ptxas and the SASS would say from that rendering
(:func:`estimated_resources`, :func:`rendered_load_shape`), as triton-lang/kernels'
``matmul_perf_model`` estimates without compiling. ``pto perf`` reads the real figures from
ptxas and the SASS.

>>> rank([{"t": 64}, {"t": 128}, {"t": 256}], lambda c: {64: 3.0, 128: 1.0, 256: 2.0}[c["t"]])
[({'t': 128}, 1.0), ({'t': 256}, 2.0), ({'t': 64}, 3.0)]

:func:`model_predictor` predicts a whole run instead, for knobs of the program itself (tile
sizes, say), with the same report ``pto perf`` prints.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

from pto_core.codegen.cnames import c_value
from pto_core.errors import PTOError
from pto_core.ir import Category, Function, Module
from pto_core.options import CompileOptions
from pto_core.perf import executed, task_work

from ..config import KernelConfig, arch_major
from ..emitter import CudaRenderer, RenderFacts
from ..placement import Place, renamed
from .devices import Device, device_for
from .model import estimate_launch
from .report import LoadShape, kernel_profile
from .resources import KernelResources

Config = Any

#: registers a thread holds besides its tiles (addresses, indices, loop counters): ptxas gives
#: the bench kernels 18 to 30 more than their tile words
REG_BASE = 32


def rank(candidates: Sequence[Config], predict: Callable[[Config], float]
         ) -> list[tuple[Config, float]]:
    """Candidates with their predicted time, fastest first (ties keep the candidates' order);
    a candidate whose prediction raises :class:`PTOError` (it cannot be built) is left out."""
    scored = []
    for i, c in enumerate(candidates):
        try:
            scored.append((predict(c), i, c))
        except PTOError:
            continue
    scored.sort(key=lambda t: (t[0], t[1]))
    return [(c, us) for us, _, c in scored]


def _functions(module: Module, facts: RenderFacts) -> dict[str, Function]:
    return {name: module.functions[name] for name in facts.placement}


def estimated_resources(module: Module, facts: RenderFacts) -> KernelResources:
    """What ptxas would report for a rendered kernel, without compiling it: threads, shared
    memory and argument slots as rendered; registers :data:`REG_BASE` plus the words of the
    largest function's register tiles (row-layout elements; accumulator fragments and one K
    step of their operand fragments); no spills."""
    words = 0
    for name, fn in _functions(module, facts).items():
        p = facts.placement[name]
        n = 0
        for t, where in p.tiles.items():
            ty = fn.tiles[t]
            if where is Place.REG:
                n += p.layout(ty.shape).per_thread * max(1, ty.dtype.itemsize // 4)
            elif where is Place.ACC:
                g = p.grids[t]
                wr, wc = ty.rows // g.wm, ty.cols // g.wn
                n += wr * wc // 32 + (wr + wc) * 16 * 2 // (32 * 4)
        words = max(words, n)
    return KernelResources(registers=min(255, REG_BASE + words), spill_stores=0, spill_loads=0,
                           stack_bytes=0, static_smem=0, dynamic_smem=facts.smem_bytes,
                           threads=facts.threads, args=facts.nargs,
                           sass_note="estimated from the rendered kernel (not compiled)")


def rendered_load_shape(module: Module, facts: RenderFacts) -> LoadShape:
    """How the rendered kernel loads global memory, read from its placement: a row-layout
    tile moves runs of ``vec`` elements, all of a thread's runs unrolled before their first use;
    a shared tile is copied 16 bytes at a time, each load stored before the next; accumulator
    fragments load 8 bytes at a time; a pipelined K loop copies asynchronously."""
    width, run, asynchronous = 4, 1, False
    for name, fn in _functions(module, facts).items():
        p = facts.placement[name]
        asynchronous |= bool(p.mainloops)
        for s in fn.walk():
            if getattr(s, "opdef", None) is None or s.opdef.category is not Category.LOAD:
                continue
            t = s.named_operands()["dst"]
            ty, where = fn.tiles[t], p.tiles.get(t, Place.SMEM)
            if where is Place.REG:
                lay = p.layout(ty.shape)
                width = max(width, lay.vec * ty.dtype.itemsize)
                run = max(run, lay.rpw * lay.cpl)
            elif where is Place.ACC:
                g = p.grids[t]
                width = max(width, 8)
                run = max(run, ty.rows // g.wm * ty.cols // g.wn // 64)
            elif where is Place.SMEM:
                width = max(width, 16)
    return LoadShape(width, run, asynchronous)


def tuning_device(arch: str) -> Device:
    """The table's device for the oldest architecture of ``arch`` (a kernel built for several
    must fit the smallest)."""
    return device_for(f"sm_{arch_major(arch)}")


def kernel_predictor(kernel: Any, device: Device | None = None) -> Callable[[KernelConfig], float]:
    """``predict(config)``: the model's microseconds per task of ``kernel``
    (:class:`pto_cuda.tune.KernelInfo`) built with ``config``, in a launch of one full wave
    (SMs x resident blocks), with resources estimated from the rendering. Raises
    :class:`PTOError` at once when the kernel's work depends on its scalar arguments (nothing
    to judge it by), and from ``predict`` for a configuration that cannot be built or launched."""
    fn = kernel.function
    module = kernel.module if kernel.module is not None else Module("kernel", [fn])
    device = device or tuning_device(kernel.arch)
    work = task_work(module, fn.name, {})
    exe = executed(module, fn.name, {})
    renderer = CudaRenderer(kernel.arch)

    def predict(config: KernelConfig) -> float:
        _, facts = CudaRenderer(kernel.arch, config=config).render(fn, module)
        # the kernel's values carry C names (KernelInfo), the facts the program's
        facts = dataclasses.replace(facts, placement={
            n: renamed(p, c_value) for n, p in facts.placement.items()})
        res = estimated_resources(module, facts)
        f = kernel_profile(fn, res, device, [(work, exe, 1)], renderer, facts.placement,
                           rendered_load_shape(module, facts))
        blocks = device.sms * f.occupancy.blocks
        return estimate_launch(device, f.profile, blocks).device_us / blocks
    return predict


def model_order(kernel: Any, candidates: Sequence[KernelConfig]) -> list[KernelConfig]:
    """The tuner's model: ``candidates`` fastest first by :func:`kernel_predictor`, without
    those that cannot be built; none when the model cannot judge the kernel (its work depends
    on its scalar arguments, or no device in the table has its architecture), so the tuner
    keeps its default."""
    try:
        predict = kernel_predictor(kernel)
    except PTOError:
        return []
    return [c for c, _ in rank(candidates, predict)]


def model_predictor(build: Callable[[Config], Module], scalars: Mapping[str, Any] |
                    Callable[[Config], Mapping[str, Any]], arch: str,
                    device: str | None = None) -> Callable[[Config], float]:
    """``predict(config)``: the predicted microseconds of the run of ``build(config)`` with
    ``scalars`` (or ``scalars(config)``), as ``pto perf`` reports it; a configuration
    ``build`` cannot make, or whose kernel does not fit the device, raises :class:`PTOError`."""
    from .report import perf_report

    def predict(config: Config) -> float:
        sc = scalars(config) if callable(scalars) else scalars
        settings = {"arch": arch, "device": device}
        report = perf_report(build(config), CompileOptions(), sc,
                             {k: v for k, v in settings.items() if v is not None})
        return report.run.predicted_us
    return predict
