"""The device table: what the performance model knows of each GPU.

Per-SM limits are the CUDA occupancy rules of the architecture (CUDA C++ Programming Guide,
"Compute Capabilities"; the CUDA occupancy calculator's allocation granularities). Peak rates
are NVIDIA's datasheet figures (dense, no sparsity). A figure measured on a real device and
recorded in ``bench/README.md`` replaces the datasheet's and says so in ``sources``. Figures
that are neither (a loaded memory latency, a launch cost) are estimates and say that too.

>>> DEVICES["h100"].sms, DEVICES["a100"].smem_per_sm
(132, 167936)
>>> device_for("sm_80").name, device_for("sm_90a").name
('a100', 'h100')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from pto_core.errors import PTOError


@dataclass(frozen=True)
class Device:
    """One GPU model. Rates are per second for the whole device unless the name says per SM."""

    name: str
    title: str
    arch: str                        # the SASS family, "sm_90" / "sm_80"
    sms: int
    clock_ghz: float                 # boost clock of the SMs (per-clock rates below use it)
    # ---- per-SM limits (occupancy)
    max_threads_per_sm: int = 2048
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256        # registers are given to a warp in units of this many
    warp_alloc_granularity: int = 4  # sub-partitions sharing the register file
    max_regs_per_thread: int = 255
    smem_per_sm: int = 0             # the largest shared-memory carve-out, bytes
    smem_per_block: int = 0          # the most one block may have (opt-in), bytes
    smem_reserved_per_block: int = 1024   # the driver's own use, per resident block
    smem_alloc_unit: int = 128
    # ---- rates
    dram_gbs: float = 0.0            # peak DRAM bandwidth (datasheet), GB/s
    copy_gbs: float = 0.0            # device-to-device copy, bytes read + written per second
    l2_gbs: float = 0.0              # L2 bandwidth to the SMs (0: not in the table, every byte
                                     # a kernel moves is charged to DRAM)
    smem_bytes_per_clk: int = 128    # shared-memory bandwidth per SM
    peaks_tflops: Mapping[str, float] = field(default_factory=dict)   # unit -> TFLOP/s
    mem_latency_us: float = 0.9      # one dependent global-memory round trip in a loop, loaded
    launch_us: float = 2.0           # fixed cost of one kernel launch in a stream or graph
    sources: Mapping[str, str] = field(default_factory=dict)

    def peak(self, unit: str) -> float:
        """FLOP/s of ``unit`` (``tensor.bf16``, ``mma_sync.bf16``, ``fp32``, ``sfu`` ...)."""
        if unit not in self.peaks_tflops:
            raise PTOError(f"device {self.name} has no peak for '{unit}' "
                           f"(known: {', '.join(sorted(self.peaks_tflops))})")
        return self.peaks_tflops[unit] * 1e12

    @property
    def smem_gbs_per_sm(self) -> float:
        return self.smem_bytes_per_clk * self.clock_ghz

    def assumptions(self) -> tuple[str, ...]:
        """The figures an estimate rests on, each with where it comes from."""
        return tuple(f"{k}: {v}" for k, v in self.sources.items())


def _peaks(sms: int, clock_ghz: float, *, tensor16: float, mma_sync16: float, fp32: float,
           fp64: float) -> dict[str, float]:
    """TFLOP/s by unit from the datasheet's dense tensor and SIMT figures; tf32 runs at half
    and int8 at twice the 16-bit tensor rate; INT32 lanes do 64 and the SFU 16 results per
    clock per SM (sm_80 and sm_90)."""
    lanes = sms * clock_ghz / 1e3
    return {"tensor.bf16": tensor16, "tensor.f16": tensor16, "tensor.tf32": tensor16 / 2,
            "tensor.i8": tensor16 * 2, "mma_sync.bf16": mma_sync16, "mma_sync.f16": mma_sync16,
            "mma_sync.i8": mma_sync16 * 2, "fp32": fp32, "fp64": fp64, "int": 64 * lanes,
            "sfu": 16 * lanes}


H100 = Device(
    name="h100", title="NVIDIA H100 SXM5 80GB HBM3", arch="sm_90", sms=132, clock_ghz=1.98,
    smem_per_sm=228 * 1024, smem_per_block=227 * 1024,
    dram_gbs=3350.0, copy_gbs=2988.0, l2_gbs=5500.0,
    # mma.sync (HMMA) on Hopper issues at about two thirds of warpgroup MMA (HGMMA)
    peaks_tflops=_peaks(132, 1.98, tensor16=989.4, mma_sync16=660.0, fp32=66.9, fp64=33.5),
    mem_latency_us=0.9, launch_us=2.0,
    sources={
        "copy_gbs": "2,988 GB/s measured (device-to-device cudaMemcpy, H100 80GB HBM3, "
                    "bench/README.md)",
        "dram_gbs": "3,350 GB/s datasheet",
        "l2_gbs": "5,500 GB/s estimate, not measured here: the order of the L2 bandwidth "
                  "published microbenchmarks report for H100 (e.g. Chips and Cheese, 'Nvidia's "
                  "H100: Funny L2, and Tons of Bandwidth', 2023, on the 114-SM PCIe card); the "
                  "SXM card's 132 SMs at a higher clock should reach more, so it errs low",
        "clock": "1.98 GHz boost clock, 132 SMs (datasheet, H100 SXM5)",
        "peaks": "datasheet (dense): 989.4 TFLOP/s bf16/f16 on warpgroup MMA (HGMMA); "
                 "mma_sync = 2/3 of the HGMMA peak, an estimate",
        "mem_latency_us": "0.9 us estimate: a loaded round trip in a load loop (DRAM latency "
                          "plus queueing and the loop's own instructions), fitted to the share "
                          "of gemm_tile's time Nsight attributed to global-load stalls",
        "launch_us": "2 us estimate: kernel-to-kernel cost in a stream or graph",
    })

A100 = Device(
    name="a100", title="NVIDIA A100 SXM4 80GB", arch="sm_80", sms=108, clock_ghz=1.41,
    smem_per_sm=164 * 1024, smem_per_block=163 * 1024,
    dram_gbs=2039.0, copy_gbs=0.9 * 2039.0,
    peaks_tflops=_peaks(108, 1.41, tensor16=312.0, mma_sync16=312.0, fp32=19.5, fp64=9.7),
    mem_latency_us=0.8, launch_us=2.0,
    sources={
        "copy_gbs": "0.9 x the 2,039 GB/s datasheet bandwidth, an estimate (not measured)",
        "dram_gbs": "2,039 GB/s datasheet",
        "l2_gbs": "not in the table: every byte a kernel moves is charged to DRAM",
        "peaks": "datasheet (dense); mma.sync is the native tensor-core path of sm_80",
        "mem_latency_us": "0.8 us estimate, scaled from the H100 figure by the unloaded "
                          "latencies",
        "launch_us": "2 us estimate",
    })

DEVICES: dict[str, Device] = {d.name: d for d in (H100, A100)}

#: the device ``pto perf`` assumes for an architecture when ``--device`` is not given
DEFAULT_DEVICE = {"sm_80": "a100", "sm_86": "a100", "sm_89": "a100", "sm_90": "h100"}


def arch_family(arch: str) -> str:
    """``"sm_90a"`` -> ``"sm_90"``."""
    return arch.rstrip("af")


def device_for(arch: str, name: str | None = None) -> Device:
    """The device called ``name``, or the default one for ``arch``."""
    if name is None:
        name = DEFAULT_DEVICE.get(arch_family(arch))
        if name is None:
            raise PTOError(f"no device in the table for {arch}; give --device "
                           f"({', '.join(DEVICES)})")
    key = name.lower()
    if key not in DEVICES:
        raise PTOError(f"--device {name}: unknown device (known: {', '.join(DEVICES)})")
    return DEVICES[key]
