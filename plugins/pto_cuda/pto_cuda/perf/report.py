"""The CUDA backend's performance cards: ``pto perf FILE --target cuda --arch sm_90a``.

For each InCore function: the kernel as code generation makes it (the configuration
:func:`pto_cuda.tune.config_for` gives it, rendered by the emitter, which also says where each
tile lives), compiled for the architecture (:mod:`.resources`), its occupancy on the device
(:mod:`.occupancy`), its launches in the executor's plan (:mod:`.plan`), its traffic and work
from the IR (:mod:`pto_core.perf.work`) with the shared-memory traffic of the emitter's tile
placement (:func:`shared_traffic`), and the estimate of each launch (:mod:`.model`). The run's
card adds the launches up.

>>> import sys; sys.path.insert(0, "bench/cuda")                       # doctest: +SKIP
>>> import softmax                                                    # doctest: +SKIP
>>> r = perf_report(softmax.build_module(), CompileOptions(), {"num_tiles": 8192},
...                 {"arch": "sm_90a"})                               # doctest: +SKIP
>>> r.kernels[0].limiter                                              # doctest: +SKIP
'registers'
"""

from __future__ import annotations

import math
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pto_core.driver import optimise
from pto_core.errors import PTOBackendError
from pto_core.ir import Category, Function, Module, TileType
from pto_core.options import CompileOptions
from pto_core.perf import (Executed, KernelCard, PerfReport, RunCard, WholeRunCard, Work,
                           executed, minimum_traffic, task_levels, works_by_task)
from pto_core.reference import trace_calls

from .. import scons_tool, tune
from ..emitter import CudaRenderer, RenderFacts
from ..placement import Place, Placement
from .devices import Device, device_for
from .model import Estimate, KernelProfile, estimate_launch
from .occupancy import Occupancy, occupancy
from .plan import (HOST_MODEL, POLICY, capacity, host_us, plan_launches, plan_whole_run,
                   submissions)
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


def all_shared(fn: Function) -> Placement:
    """The tile placement of the kernels up to commit 9d2f6dc (what the calibration measured):
    every tile in shared memory, matmuls on WMMA fragments loaded from and stored to it."""
    return Placement(8, {t: Place.SMEM for t in fn.tiles})


def in_shared_memory(placement: Placement, tile: str) -> bool:
    """Whether ``tile`` lives in shared memory: a shared tile, or an operand a pipelined K loop
    stages there."""
    return placement.tiles.get(tile, Place.SMEM) in (Place.SMEM, Place.STAGED)


def shared_traffic(fn: Function, s: Any, renderer: CudaRenderer, placement: Placement) -> int:
    """Shared-memory bytes one execution of tile instruction ``s`` reads and writes, where the
    emitter placed its tiles (``placement``): each op reads its operands and writes its result
    where they live in shared memory (row-layout and accumulator tiles are registers). A matmul
    into a register accumulator split over a ``wm x wn`` grid of warps reads each warp's rows of
    ``a`` and columns of ``b`` once per K step (``|a| x wn + |b| x wm``); one into shared
    memory on tensor cores reads a 16 x K strip of ``a`` and a K x 16 strip of ``b`` per 16 x 16
    output block and loads (ACC) and stores its result; a SIMT matmul reads K elements of each
    operand per output element."""
    ops = s.named_operands()
    cat = s.opdef.category

    def size(name: str) -> int:
        return fn.type_of(name).nbytes if in_shared_memory(placement, name) else 0
    if cat is Category.LOAD:
        return size(ops["dst"])
    if cat is Category.STORE:
        return size(ops["src"])
    if cat is Category.MATMUL:
        td, ta, tb = fn.type_of(ops["dst"]), fn.type_of(ops["a"]), fn.type_of(ops["b"])
        a_sh, b_sh = in_shared_memory(placement, ops["a"]), in_shared_memory(placement, ops["b"])
        if placement.tiles.get(ops["dst"]) is Place.ACC:
            g = placement.grids[ops["dst"]]
            return ta.nbytes * g.wn * a_sh + tb.nbytes * g.wm * b_sh
        k = ta.cols
        acc = size(ops["dst"]) + (size(ops[s.opdef.addend]) if s.opdef.addend else 0)
        a_el, b_el = ta.dtype.itemsize * a_sh, tb.dtype.itemsize * b_sh
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


@dataclass(frozen=True)
class LoadShape:
    """How a thread of a kernel loads global memory: the widest load in bytes, how many loads
    it issues before it waits for one, and whether it copies asynchronously (cp.async, TMA)."""

    width: int
    run: int
    asynchronous: bool


def sass_load_shape(res: KernelResources) -> LoadShape:
    """The load shape the SASS shows."""
    width, run = global_load_shape(res.sass)
    return LoadShape(width, run, any(sass_counts(res.sass).get(m) for m in ASYNC_COPY))


def kernel_profile(fn: Function, res: KernelResources, device: Device,
                   per_task: list[tuple[Work, list[Executed], int]], renderer: CudaRenderer,
                   placements: Mapping[str, Placement], shape: LoadShape | None = None,
                   footprint: int | None = None) -> KernelFacts:
    """The facts of kernel ``fn`` with resources ``res``, running ``per_task`` (work,
    executed instructions, number of tasks with them) with its tiles where ``placements``
    (function name -> placement) says; ``shape`` is how it loads (default: what its SASS
    shows); ``footprint``: the bytes of the tensors its tasks touch, what DRAM must serve
    once (None: every byte it moves comes from DRAM)."""
    occ = occupancy(device, threads=res.threads, registers=res.registers,
                    smem_bytes=res.smem_bytes)
    counts = sass_counts(res.sass)
    shape = shape or sass_load_shape(res)
    tasks = sum(n for _, _, n in per_task)
    work, smem, trips = Work(), 0, 0
    for w, exe, n in per_task:
        work = work + w.scaled(n)
        smem += n * sum(shared_traffic(e.function, e.instr, renderer,
                                       placements[e.function.name]) * e.count for e in exe)
        if shape.asynchronous:
            trips += n * 2          # the pipeline's fill and drain; the rest overlaps
        else:
            step = res.threads * shape.width * shape.run
            trips += n * sum(math.ceil(b / step) * c for b, c in w.loads.items())
    tensor = any(renderer.uses_tensor_cores(e.function, e.instr) for _, exe, _ in per_task
                 for e in exe if e.instr.opdef.category is Category.MATMUL)
    units = hardware_units(work.flops, counts, tensor)
    inflight = (res.smem_bytes // 2 if shape.asynchronous
                else res.threads * shape.width * shape.run)
    t = max(tasks, 1)
    profile = KernelProfile(
        threads=res.threads, resident=occ.blocks, bytes_per_task=work.bytes_moved // t,
        read_per_task=work.bytes_read // t, smem_per_task=smem // t,
        flops_per_task={u: n // t for u, n in units.items()}, round_trips=-(-trips // t),
        inflight_per_block=inflight, overlapped=shape.asynchronous,
        dram_per_task=None if footprint is None else min(work.bytes_moved, footprint) // t)
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


def render_kernels(module: Module, names: list[str], arch: str,
                   options: CompileOptions | None = None) -> dict[str, tuple[str, RenderFacts]]:
    """Each kernel's source and render facts as code generation makes them: with the
    configuration :func:`pto_cuda.tune.config_for` gives it (fixed in the options, tuned,
    the model's or the default)."""
    out = {}
    for n in names:
        fn = module.functions[n]
        config = tune.config_for(fn, module, options, arch)
        out[n] = CudaRenderer(arch, config=config).render(fn, module, options)
    return out


def kernel_facts(module: Module, scalars: Mapping[str, Any], arch: str, device: Device,
                 options: CompileOptions | None = None,
                 resources: Mapping[str, KernelResources] | None = None,
                 placement: Callable[[Function], Placement] | None = None
                 ) -> tuple[list, dict[str, KernelFacts]]:
    """The tasks of ``module``'s entry run (an optimised module) and the facts of each kernel
    they call, generated as code generation generates them with ``options`` and compiled for
    ``arch``. ``resources`` gives a kernel's resources instead of compiling it (figures a
    profiler reported, say); ``placement`` gives each function's tile placement instead of the
    emitter's (:func:`all_shared`: the kernels before placement existed)."""
    calls = list(trace_calls(module, scalars, module.entry))
    by_kernel: dict[str, dict[tuple, list]] = {}
    for tc, w in works_by_task(module, calls):
        slot = by_kernel.setdefault(tc.callee, {}).setdefault(tc.scalars, [w, 0])
        slot[1] += 1
    names = list(by_kernel)
    rendered = render_kernels(module, names, arch, options)
    given = dict(resources or {})
    todo = [n for n in names if n not in given]
    with ThreadPoolExecutor(max_workers=2) as pool:
        given.update(zip(todo, pool.map(lambda n: kernel_resources(rendered[n][0], arch), todo)))
    renderer = CudaRenderer(arch)
    footprints = kernel_footprints(module, scalars, calls)
    facts: dict[str, KernelFacts] = {}
    for n in names:
        per_task = [(w, executed(module, n, dict(sc)), count)
                    for sc, (w, count) in by_kernel[n].items()]
        places = ({f.name: placement(f) for f in module.functions.values()} if placement
                  else rendered[n][1].placement)
        facts[n] = kernel_profile(module.functions[n], given[n], device, per_task, renderer,
                                  places, footprint=footprints.get(n))
    return calls, facts


def kernel_footprints(module: Module, scalars: Mapping[str, Any], calls: list) -> dict[str, int]:
    """Kernel -> bytes of the tensors its tasks read or write: what DRAM serves when every
    re-read of a tile another task of the same kernel already fetched hits the L2 (the model's
    assumption: one wave's working set fits the L2; see docs/performance-model.md)."""
    from pto_core.shapes import derive_shapes
    touched: dict[str, set[str]] = {}
    for tc in calls:
        touched.setdefault(tc.callee, set()).update(r.tensor for r in tc.regions)
    tensors = sorted(set().union(*touched.values())) if touched else []
    if not tensors:
        return {}
    from pto_core.reference import Intermediate
    named = [t for t in tensors if not isinstance(t, Intermediate)]
    shapes = derive_shapes(module, scalars, entry=module.entry, only=named)
    memrefs = module.functions[module.entry].memrefs
    size = {t: shapes[t][0] * shapes[t][1] * memrefs[t].dtype.itemsize for t in named}
    for tc in calls:            # a runtime-owned intermediate: a buffer per region written
        for r in tc.regions:
            if isinstance(r.tensor, Intermediate) and r.mode == "out":
                size[r.tensor] = size.get(r.tensor, 0) + r.rows * r.cols * r.tensor.dtype.itemsize
    return {k: sum(size.get(t, 0) for t in ts) for k, ts in touched.items()}


def perf_report(module: Module, options: CompileOptions | None, scalars: Mapping[str, Any],
                settings: Mapping[str, str]) -> PerfReport:
    """The cards of ``module``'s entry run with ``scalars`` (see the module doc). ``settings``:
    ``arch`` (default sm_90a), ``device`` (default: the table's for the arch), ``policy``
    (the executor's, default :data:`pto_cuda.perf.plan.POLICY`). The kernels are those code
    generation makes with ``options`` (``cuda_config``, ``threads``, tuned configurations)."""
    options = options or CompileOptions()
    arch = settings.get("arch") or DEFAULT_PERF_ARCH
    archs = scons_tool.parse_arch(arch)
    if len(archs) != 1:
        raise PTOBackendError(f"--arch {arch}: the card is for one architecture at a time")
    device = device_for(arch, settings.get("device"))
    policy = settings.get("policy") or POLICY
    optimised, _ = optimise(module, options)
    entry = optimised.entry
    calls, facts = kernel_facts(optimised, scalars, arch, device, options)
    names = list(facts)
    levels = task_levels(calls)
    launches = plan_launches([tc.callee for tc in calls], levels,
                             {n: capacity(f.nargs, f.resources.tma_operands)
                              for n, f in facts.items()}, policy)
    cards, total_us = [], 0.0
    for n in names:
        f = facts[n]
        mine = [l for l in launches if l.kernel == n]
        grids = Counter(l.blocks for l in mine)
        ests: dict[int, Estimate] = {b: estimate_launch(device, f.profile, b) for b in grids}
        us = sum(ests[b].us * k for b, k in grids.items())
        total_us += us
        per_launch = Counter()
        for l in mine:
            per_launch[l.launch] += l.blocks
        smallest = min(per_launch.values())      # the smallest launch, all its grids together
        first = estimate_launch(device, f.profile, smallest)
        biggest = max(grids, key=lambda b: ests[b].us * grids[b])
        main = ests[biggest]
        times = {k: sum(ests[b].times_us[k] * c for b, c in grids.items())
                 for k in main.times_us}
        counts = sass_counts(f.resources.sass)
        cards.append(KernelCard(
            name=n, registers=f.resources.registers, smem_bytes=f.resources.smem_bytes,
            spill_bytes=f.resources.spill_bytes, threads=f.resources.threads,
            occupancy=f.occupancy.fraction, limiter=f.occupancy.limiter,
            launches=len(per_launch), blocks=f.tasks, waves=first.waves,
            bytes_read=f.work.bytes_read, bytes_written=f.work.bytes_written,
            flops=dict(f.units), sass=counts, predicted_us=us, bound=main.bound,
            resident_blocks=f.occupancy.blocks, achieved_occupancy=main.achieved_occupancy,
            local_bytes=f.resources.stack_bytes, grids=dict(grids), times_us=times,
            mix=sass_mix(counts) if counts else {},
            notes=_notes(f, device, smallest, first.waves, first.achieved_occupancy)))
    bmin_r, bmin_w = minimum_traffic(optimised, scalars, entry)
    moved = sum(f.work.bytes_moved for f in facts.values())
    roof, roof_us = _roofline(device, facts.values(), bmin_r + bmin_w)
    run = RunCard(launches=len({l.launch for l in launches}), bytes_min=bmin_r + bmin_w, bytes_moved=moved,
                  predicted_us=total_us, fraction_of_roofline=roof_us / total_us if total_us else 0.0,
                  roofline=roof, roofline_us=roof_us)
    notes = (f"executor policy: {policy}",) + device.assumptions()
    wholes = whole_runs(optimised, calls, facts, device) if policy == "fill" else ()
    return PerfReport(optimised.name, "cuda", arch, device.name, tuple(cards), run, notes,
                      wholes)


def whole_runs(module: Module, calls: list, facts: Mapping[str, KernelFacts],
               device: Device) -> tuple[WholeRunCard, ...]:
    """The whole run of ``calls`` with range tasks and without: the runtime tasks
    (:func:`.plan.submissions`), the grids the executor sends while the orchestration submits
    (:func:`.plan.plan_whole_run`, each kernel's fill from its occupancy on ``device``), the
    host time of that many tasks (:func:`.plan.host_us`) and the device time of those grids
    (:func:`.model.estimate_launch`, one after the other)."""
    caps = {n: capacity(f.nargs, f.resources.tma_operands) for n, f in facts.items()}
    fills = {n: max(1, device.sms * f.occupancy.blocks) for n, f in facts.items()}
    ests: dict[tuple[str, int], float] = {}
    out = []
    for label, ranges in (("range tasks on", True), ("range tasks off", False)):
        subs = submissions(module, calls, ranges)
        grids = plan_whole_run(subs, task_levels([s.call for s in subs]), caps, fills)
        for g in grids:
            if (g.kernel, g.blocks) not in ests:
                ests[(g.kernel, g.blocks)] = estimate_launch(device, facts[g.kernel].profile,
                                                             g.blocks).us
        tiles_of: Counter = Counter()
        for g in grids:
            tiles_of[g.launch] += g.blocks
        per_launch = sorted(tiles_of.values())
        out.append(WholeRunCard(
            label=label, tasks=len(subs), tiles=sum(s.tiles for s in subs),
            launches=len(per_launch), grids=len(grids),
            tiles_per_launch=(per_launch[0], per_launch[len(per_launch) // 2], per_launch[-1])
            if per_launch else (0, 0, 0),
            host_us=host_us(len(subs)),
            device_us=sum(ests[(g.kernel, g.blocks)] for g in grids), host_model=HOST_MODEL))
    return tuple(out)


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
