"""The CUDA backend's performance cards: ``pto perf FILE --target cuda --arch sm_90a``.

For each InCore function: the generated kernel compiled for the architecture
(:mod:`.resources`), its occupancy on the device (:mod:`.occupancy`), its launches in the
executor's plan (:mod:`.plan`), its traffic and work from the IR (:mod:`pto_core.perf.work`)
with the shared-memory traffic of today's tile placement (:func:`shared_traffic`), and the
estimate of each launch (:mod:`.model`). The run's card adds the launches up.

>>> import sys; sys.path.insert(0, "bench/cuda")                       # doctest: +SKIP
>>> import softmax                                                    # doctest: +SKIP
>>> r = perf_report(softmax.build_module(), CompileOptions(), {"num_tiles": 8192},
...                 {"arch": "sm_90a"})                               # doctest: +SKIP
>>> r.kernels[0].limiter                                              # doctest: +SKIP
'shared memory'
"""

from __future__ import annotations

import math
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pto_core.codegen.driver import optimise
from pto_core.errors import PTOBackendError
from pto_core.ir import Category, Function, Module, TileType
from pto_core.options import CompileOptions
from pto_core.perf import (Executed, KernelCard, PerfReport, RunCard, Work, executed,
                           minimum_traffic, task_levels, works_by_task)
from pto_core.reference import trace_calls

from .. import scons_tool
from ..emitter import CudaRenderer
from .devices import Device, device_for
from .model import Estimate, KernelProfile, estimate_launch
from .occupancy import Occupancy, occupancy
from .plan import POLICY, capacity, plan_launches
from .resources import (ASYNC_COPY, TENSOR_CORE, KernelResources, global_load_shape,
                        kernel_resources, sass_counts, sass_mix)

#: the architecture ``pto perf --target cuda`` compiles for without ``--arch``
DEFAULT_PERF_ARCH = "sm_90a"


@dataclass(frozen=True)
class KernelFacts:
    """Everything the card of one kernel is computed from."""

    name: str
    resources: KernelResources
    occupancy: Occupancy
    profile: KernelProfile
    tasks: int
    work: Work                       # all tasks of the kernel
    units: Mapping[str, int]         # FLOPs of all tasks by the unit that executes them
    nargs: int


def all_shared(fn: Function, tile: str) -> bool:
    """Today's tile placement: every tile of a CUDA kernel lives in shared memory."""
    return True


#: where the emitter places tiles (fn, tile name -> in shared memory?): the model's view of
#: the kernels, to be changed together with the emitter's placement
PLACEMENT: Callable[[Function, str], bool] = all_shared


def shared_traffic(fn: Function, s: Any, renderer: CudaRenderer,
                   placement: Callable[[Function, str], bool] | None = None) -> int:
    """Shared-memory bytes one execution of tile instruction ``s`` reads and writes: each op
    reads its operands and writes its result where they live in shared memory
    (``placement``, default :data:`PLACEMENT`); a tensor-core matmul reads a 16 x K strip of
    ``a`` and a K x 16 strip of ``b`` per 16 x 16 output fragment and loads (ACC) and stores
    its accumulator; a SIMT matmul reads K elements of each operand per output element."""
    shared = placement or PLACEMENT
    ops = s.named_operands()
    cat = s.opdef.category

    def size(name: str) -> int:
        return fn.type_of(name).nbytes if shared(fn, name) else 0
    if cat is Category.LOAD:
        return size(ops["dst"])
    if cat is Category.STORE:
        return size(ops["src"])
    if cat is Category.MATMUL:
        td, ta, tb = fn.type_of(ops["dst"]), fn.type_of(ops["a"]), fn.type_of(ops["b"])
        k = ta.cols
        acc = size(ops["dst"]) + (size(ops["acc"]) if "acc" in ops else 0)
        a_el = ta.dtype.itemsize * shared(fn, ops["a"])
        b_el = tb.dtype.itemsize * shared(fn, ops["b"])
        if renderer.uses_tensor_cores(fn, s):
            frags = (td.rows // 16) * (td.cols // 16)
            return frags * 16 * k * (a_el + b_el) + acc
        return td.rows * td.cols * k * (a_el + b_el) + acc
    tiles = [v for o, v in ops.items() if isinstance(v, str) and isinstance(fn.type_of(v), TileType)]
    return sum(size(v) for v in tiles)


def hardware_units(flops: Mapping[str, int], counts: Mapping[str, int],
                   tensor_fallback: bool) -> dict[str, int]:
    """IR work classes -> the units that execute them, read from the SASS: ``mma.bf16`` runs on
    warpgroup MMA (``tensor.bf16``) when the kernel has HGMMA, on ``mma_sync.bf16`` with HMMA
    (or, without SASS, when the emitter chose tensor cores: ``tensor_fallback``), else on the
    FP32 lanes; ``mma.f32`` runs on the FP32 lanes; ``mma.i8`` on IMMA or the integer lanes."""
    out: Counter = Counter()
    for cls, n in flops.items():
        if not cls.startswith("mma."):
            out[cls] += n
            continue
        t = cls[4:]
        if t in ("f16", "bf16"):
            if counts.get("HGMMA"):
                out[f"tensor.{t}"] += n
            elif counts.get("HMMA") or (not counts and tensor_fallback):
                out[f"mma_sync.{t}"] += n
            else:
                out["fp32"] += n
        elif t == "i8":
            out["mma_sync.i8" if counts.get("IMMA") or counts.get("IGMMA") else "int"] += n
        else:
            out["fp64" if t == "f64" else "fp32"] += n
    return dict(out)


def _kernel_facts(fn: Function, res: KernelResources, device: Device,
                  per_task: list[tuple[Work, list[Executed], int]], renderer: CudaRenderer,
                  placement: Callable[[Function, str], bool] | None) -> KernelFacts:
    occ = occupancy(device, threads=res.threads, registers=res.registers,
                    smem_bytes=res.smem_bytes)
    counts = sass_counts(res.sass)
    width, run = global_load_shape(res.sass)
    asynchronous = any(counts.get(m) for m in ASYNC_COPY)
    tasks = sum(n for _, _, n in per_task)
    work, smem, trips = Work(), 0, 0
    for w, exe, n in per_task:
        work = work + w.scaled(n)
        smem += n * sum(shared_traffic(e.function, e.instr, renderer, placement) * e.count
                        for e in exe)
        if asynchronous:
            trips += n * 2          # the pipeline's fill and drain; the rest overlaps
        else:
            step = res.threads * width * run
            trips += n * sum(math.ceil(b / step) * c for b, c in w.loads.items())
    tensor = any(renderer.uses_tensor_cores(e.function, e.instr) for _, exe, _ in per_task
                 for e in exe if e.instr.opdef.category is Category.MATMUL)
    units = hardware_units(work.flops, counts, tensor)
    inflight = (res.smem_bytes // 2 if asynchronous else res.threads * width * run)
    t = max(tasks, 1)
    profile = KernelProfile(
        threads=res.threads, resident=occ.blocks, bytes_per_task=work.bytes_moved // t,
        read_per_task=work.bytes_read // t, smem_per_task=smem // t,
        flops_per_task={u: n // t for u, n in units.items()}, round_trips=-(-trips // t),
        inflight_per_block=inflight)
    return KernelFacts(fn.name, res, occ, profile, tasks, work, units, res.args)


def _notes(f: KernelFacts, device: Device, smallest: int, waves: float,
           achieved: float) -> tuple[str, ...]:
    out = []
    if waves < 1:
        out.append(f"too few waves: the smallest launch has {smallest} blocks, {waves:.2f} of "
                   f"a wave ({device.sms} SMs x {f.occupancy.blocks} blocks)")
    if achieved < 0.5 * f.occupancy.fraction or f.occupancy.fraction < 0.25:
        out.append(f"low occupancy: {achieved:.1%} of the warps an SM holds are resident "
                   f"(theoretical {f.occupancy.fraction:.0%}, limited by {f.occupancy.limiter})")
    if f.resources.spill_bytes:
        out.append(f"register spills: {f.resources.spill_stores} B stored, "
                   f"{f.resources.spill_loads} B loaded per thread")
    half = any(c in ("mma.f16", "mma.bf16") for c in f.work.flops)
    if half and not any(u.startswith(("tensor.", "mma_sync.")) for u in f.units):
        out.append("a f16/bf16 matmul runs on the FP32 lanes, not on tensor cores")
    if f.resources.sass_note:
        out.append(f"no instruction mix: {f.resources.sass_note}")
    return tuple(out)


def kernel_facts(module: Module, scalars: Mapping[str, Any], arch: str, device: Device,
                 threads: int | None = None,
                 resources: Mapping[str, KernelResources] | None = None,
                 placement: Callable[[Function, str], bool] | None = None
                 ) -> tuple[list, dict[str, KernelFacts]]:
    """The tasks of ``module``'s entry run (an optimised module) and the facts of each kernel
    they call, compiled for ``arch`` (``threads`` forces the block size). ``resources`` gives
    a kernel's resources instead of compiling it (figures a profiler reported, say);
    ``placement`` says which tiles live in shared memory (default :data:`PLACEMENT`)."""
    calls = list(trace_calls(module, scalars, module.entry))
    by_kernel: dict[str, dict[tuple, list]] = {}
    for tc, w in works_by_task(module, calls):
        slot = by_kernel.setdefault(tc.callee, {}).setdefault(tc.scalars, [w, 0])
        slot[1] += 1
    names = list(by_kernel)
    renderer = CudaRenderer(arch, threads)
    given = dict(resources or {})
    todo = [n for n in names if n not in given]
    sources = {n: renderer.render_kernel(module.functions[n], module) for n in todo}
    with ThreadPoolExecutor(max_workers=2) as pool:
        given.update(zip(todo, pool.map(lambda n: kernel_resources(sources[n], arch), todo)))
    facts: dict[str, KernelFacts] = {}
    for n in names:
        per_task = [(w, executed(module, n, dict(sc)), count)
                    for sc, (w, count) in by_kernel[n].items()]
        facts[n] = _kernel_facts(module.functions[n], given[n], device, per_task, renderer,
                                 placement)
    return calls, facts


def perf_report(module: Module, options: CompileOptions | None, scalars: Mapping[str, Any],
                settings: Mapping[str, str]) -> PerfReport:
    """The cards of ``module``'s entry run with ``scalars`` (see the module doc). ``settings``:
    ``arch`` (default sm_90a), ``device`` (default: the table's for the arch), ``policy``
    (the executor's, default :data:`pto_cuda.perf.plan.POLICY`), ``threads``."""
    options = options or CompileOptions()
    arch = settings.get("arch") or DEFAULT_PERF_ARCH
    archs = scons_tool.parse_arch(arch)
    if len(archs) != 1:
        raise PTOBackendError(f"--arch {arch}: the card is for one architecture at a time")
    device = device_for(arch, settings.get("device"))
    policy = settings.get("policy") or POLICY
    optimised, _ = optimise(module, options)
    entry = optimised.entry
    threads = settings.get("threads")
    calls, facts = kernel_facts(optimised, scalars, arch, device, int(threads) if threads else None)
    names = list(facts)
    levels = task_levels(calls)
    launches = plan_launches([tc.callee for tc in calls], levels,
                             {n: capacity(f.nargs) for n, f in facts.items()}, policy)
    cards, total_us = [], 0.0
    for n in names:
        f = facts[n]
        grids = Counter(l.blocks for l in launches if l.kernel == n)
        ests: dict[int, Estimate] = {b: estimate_launch(device, f.profile, b) for b in grids}
        us = sum(ests[b].us * k for b, k in grids.items())
        total_us += us
        smallest = min(grids)
        biggest = max(grids, key=lambda b: ests[b].us * grids[b])
        main = ests[biggest]
        times = {k: sum(ests[b].times_us[k] * c for b, c in grids.items())
                 for k in main.times_us}
        counts = sass_counts(f.resources.sass)
        cards.append(KernelCard(
            name=n, registers=f.resources.registers, smem_bytes=f.resources.smem_bytes,
            spill_bytes=f.resources.spill_bytes, threads=f.resources.threads,
            occupancy=f.occupancy.fraction, limiter=f.occupancy.limiter,
            launches=sum(grids.values()), blocks=f.tasks, waves=ests[smallest].waves,
            bytes_read=f.work.bytes_read, bytes_written=f.work.bytes_written,
            flops=dict(f.units), sass=counts, predicted_us=us, bound=main.bound,
            resident_blocks=f.occupancy.blocks, achieved_occupancy=main.achieved_occupancy,
            local_bytes=f.resources.stack_bytes, grids=dict(grids), times_us=times,
            mix=sass_mix(counts) if counts else {},
            notes=_notes(f, device, smallest, ests[smallest].waves,
                         ests[smallest].achieved_occupancy)))
    bmin_r, bmin_w = minimum_traffic(optimised, scalars, entry)
    moved = sum(f.work.bytes_moved for f in facts.values())
    roof, roof_us = _roofline(device, facts.values(), bmin_r + bmin_w)
    run = RunCard(launches=len(launches), bytes_min=bmin_r + bmin_w, bytes_moved=moved,
                  predicted_us=total_us, fraction_of_roofline=roof_us / total_us if total_us else 0.0,
                  roofline=roof, roofline_us=roof_us)
    notes = (f"executor policy: {policy}",) + device.assumptions()
    return PerfReport(optimised.name, "cuda", arch, device.name, tuple(cards), run, notes)


def _roofline(device: Device, facts, bytes_min: int) -> tuple[str, float]:
    """What the run is measured against: the tensor-core peak when it multiplies matrices and
    that takes longer than moving its minimum traffic at copy speed, else the copy."""
    copy_us = bytes_min / (device.copy_gbs * 1e9) * 1e6
    mma_us = 0.0
    for f in facts:
        for cls, n in f.work.flops.items():
            if cls.startswith("mma."):
                unit = f"tensor.{cls[4:]}"
                peak = device.peak(unit) if unit in device.peaks_tflops else device.peak("fp32")
                mma_us += n / peak * 1e6
    return ("tensor peak", mma_us) if mma_us > copy_us else ("device copy", copy_us)
