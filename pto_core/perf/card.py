"""The performance card: what one kernel costs on one device, and what a whole run costs.

A backend fills a :class:`KernelCard` per InCore function (from its compiler's resource report,
its machine code and its executor's plan) and a :class:`RunCard` per run; ``pto perf`` prints
them (:func:`format_report`) or writes them as JSON (:func:`report_json`). Sizes are in bytes,
times in microseconds. What each figure means, and its formula, is in docs/performance-model.md.

>>> k = KernelCard(name="k", registers=32, smem_bytes=1024, spill_bytes=0, threads=128,
...                occupancy=1.0, limiter="threads", launches=1, blocks=264, waves=1.0,
...                bytes_read=4096, bytes_written=4096, flops={"fp32": 100}, sass={"FFMA": 3},
...                predicted_us=5.0, bound="launch")
>>> r = RunCard(launches=1, bytes_min=8192, bytes_moved=8192, predicted_us=5.0,
...             fraction_of_roofline=0.1, roofline="device copy")
>>> sorted(report_json(PerfReport("demo", "cuda", "sm_90a", "h100", (k,), r))["run"])[:3]
['bytes_min', 'bytes_moved', 'fraction_of_roofline']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

#: what limits a kernel's time (``KernelCard.bound``)
BOUNDS = ("memory", "compute", "latency", "launch")


@dataclass(frozen=True)
class KernelCard:
    """One InCore function's kernel on one device, over all its launches in the run."""

    name: str
    #: resources per thread and block, from the compiler for the target architecture
    registers: int
    smem_bytes: int                 # static + dynamic shared memory per block
    spill_bytes: int                # spill stores + spill loads (local memory traffic per thread)
    threads: int                    # per block
    #: theoretical occupancy (resident warps / the SM's maximum) and what limits it
    occupancy: float
    limiter: str                    # "registers" | "shared memory" | "threads" | "blocks"
    #: launch shape from the executor's plan
    launches: int
    blocks: int                     # blocks (tasks) over all launches
    waves: float                    # the smallest launch's blocks / (SMs x resident blocks)
    #: work over all launches, from the IR
    bytes_read: int
    bytes_written: int
    flops: Mapping[str, int]        # by the unit that executes them ("tensor.bf16", "fp32", ...)
    #: instruction mix: static count of each SASS mnemonic in the kernel
    sass: Mapping[str, int]
    #: the estimate over all launches, and what bounds it
    predicted_us: float
    bound: str
    resident_blocks: int = 0        # per SM
    achieved_occupancy: float = 0.0  # predicted: warps resident on an active SM / maximum
    local_bytes: int = 0            # stack frame per thread
    grids: Mapping[int, int] = field(default_factory=dict)   # blocks per launch -> launches
    times_us: Mapping[str, float] = field(default_factory=dict)  # each bound's time
    mix: Mapping[str, int] = field(default_factory=dict)     # SASS by class
    notes: tuple[str, ...] = ()     # findings a profiler would flag (too few waves, spills ...)


@dataclass(frozen=True)
class RunCard:
    """The whole run: launches one after the other (as a replayed CUDA graph runs them)."""

    launches: int
    bytes_min: int                  # each input byte read once, each output byte written once
    bytes_moved: int
    predicted_us: float
    fraction_of_roofline: float     # roofline time of the run / predicted time
    roofline: str                   # what the fraction is of: "device copy" or "tensor peak"
    roofline_us: float = 0.0

    @property
    def traffic_ratio(self) -> float:
        """Bytes moved / the minimum (1.0 = no byte moved twice)."""
        return self.bytes_moved / self.bytes_min if self.bytes_min else 0.0


@dataclass(frozen=True)
class WholeRunCard:
    """A whole run as the executor sends it out while the orchestration submits (not a replay
    of recorded launches): its runtime tasks (a range task is one), launches and grids, and
    the host time (a model of the host's cost per run and per task, ``host_model`` says from
    what) added to the device time of those grids."""

    label: str                      # what this run is ("range tasks on", ...)
    tasks: int                      # runtime tasks submitted
    tiles: int                      # kernel executions (blocks over all grids)
    launches: int
    grids: int
    tiles_per_launch: tuple[int, int, int]   # min, median, max
    host_us: float
    device_us: float
    host_model: str = ""

    @property
    def whole_us(self) -> float:
        """Host and device time added (no overlap assumed)."""
        return self.host_us + self.device_us


@dataclass(frozen=True)
class PerfReport:
    """The cards of one program on one backend, architecture and device."""

    module: str
    backend: str
    arch: str
    device: str
    kernels: tuple[KernelCard, ...]
    run: RunCard
    assumptions: tuple[str, ...] = ()   # the device figures the estimate used, with sources
    whole_runs: tuple[WholeRunCard, ...] = ()   # whole runs (host included), where modelled


def report_json(report: PerfReport) -> dict[str, Any]:
    """The report as JSON-ready data: ``{"kernels": [...], "run": {...}}`` plus the context."""
    kernels = []
    for k in report.kernels:
        d = asdict(k)
        d["flops"] = dict(k.flops)
        d["sass"] = dict(k.sass)
        d["grids"] = {str(b): n for b, n in sorted(k.grids.items())}
        d["notes"] = list(k.notes)
        kernels.append(d)
    run = asdict(report.run)
    run["traffic_ratio"] = report.run.traffic_ratio
    return {"module": report.module, "backend": report.backend, "arch": report.arch,
            "device": report.device, "kernels": kernels, "run": run,
            "assumptions": list(report.assumptions),
            "whole_runs": [{**asdict(w), "whole_us": w.whole_us} for w in report.whole_runs]}


def _si(n: float, unit: str = "B") -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:.3g} {unit}"


def format_report(report: PerfReport) -> str:
    """A card per kernel and the run's summary, as text a person reads top to bottom."""
    L = [f"pto perf: module '{report.module}', {report.backend} {report.arch}, "
         f"device {report.device} (the model's figures, not measurements)"]
    for k in report.kernels:
        L.append("")
        L.append(f"kernel {k.name}")
        L.append(f"  resources   {k.registers} registers/thread, {k.threads} threads/block, "
                 f"{_si(k.smem_bytes)} shared/block, spills {k.spill_bytes} B, "
                 f"stack {k.local_bytes} B")
        L.append(f"  occupancy   {k.resident_blocks} blocks/SM = {k.occupancy:.0%} theoretical "
                 f"(limited by {k.limiter}); {k.achieved_occupancy:.1%} achieved on active SMs")
        grids = ", ".join(f"{n} x {b}" for b, n in sorted(k.grids.items(), reverse=True)[:4])
        more = " ..." if len(k.grids) > 4 else ""
        L.append(f"  launches    {k.launches} ({grids}{more} blocks); smallest launch "
                 f"{k.waves:.2f} waves")
        L.append(f"  traffic     read {_si(k.bytes_read)}, written {_si(k.bytes_written)}")
        L.append("  work        " + (", ".join(f"{c} {_si(n, 'FLOP')}" for c, n in
                                              sorted(k.flops.items())) or "none"))
        L.append("  sass        " + (", ".join(f"{c} {n}" for c, n in k.mix.items() if n)
                                     or "not available"))
        times = ", ".join(f"{b} {t:.3g}" for b, t in k.times_us.items())
        L.append(f"  estimate    {k.predicted_us:.4g} us, {k.bound}-bound ({times} us)")
        for n in k.notes:
            L.append(f"  ! {n}")
    r = report.run
    L.append("")
    L.append(f"run: {r.launches} launches, {r.predicted_us:.4g} us predicted; traffic "
             f"{_si(r.bytes_moved)} moved / {_si(r.bytes_min)} minimum = {r.traffic_ratio:.2f}x; "
             f"{r.fraction_of_roofline:.2f} of the {r.roofline} ({r.roofline_us:.4g} us)")
    if report.whole_runs:
        L.append("")
        L.append("whole run (host + device, model output): tasks, launches and grids are the "
                 "executor's plan; host us = " + report.whole_runs[0].host_model)
        L.append(f"  {'':<18}{'tasks':>8}{'tiles':>8}{'launches':>9}{'grids':>7}"
                 f"{'tiles/launch min/med/max':>26}{'host us':>10}{'device us':>10}"
                 f"{'whole us':>10}")
        for w in report.whole_runs:
            L.append(f"  {w.label:<18}{w.tasks:>8}{w.tiles:>8}{w.launches:>9}{w.grids:>7}"
                     f"{'/'.join(map(str, w.tiles_per_launch)):>26}{w.host_us:>10.4g}"
                     f"{w.device_us:>10.4g}{w.whole_us:>10.4g}")
    if report.assumptions:
        L.append("device figures: " + "; ".join(report.assumptions))
    return "\n".join(L) + "\n"
