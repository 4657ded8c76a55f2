"""The estimate: how long one launch of a kernel takes, and what bounds it.

A launch of ``B`` blocks, ``r`` of which fit on one of the device's ``S`` SMs, runs in
``rounds = ceil(B / (S r))`` rounds (``waves = B / (S r)``). Five times are computed; the
largest, plus the fixed cost of a launch, is the estimate (docs/performance-model.md):

``memory``
    the bytes that must come from DRAM (each tensor a kernel touches, once; the rest of its
    traffic re-reads what the L2 holds) over the copy bandwidth, all bytes over the L2
    bandwidth (where the device table has one), or the bytes read over the bandwidth loads can
    reach,
    ``bytes in flight / latency``, when that takes longer (Little's law: an SM keeps ``resident
    blocks x bytes in flight per block`` outstanding; a block has ``threads x load width x
    loads issued before the first wait`` in flight, or half its shared memory when it copies
    asynchronously; stores are posted and need no round trip);
``compute``
    each unit's FLOPs over its peak, summed over the units, with the peak scaled by the share
    of SM time that has blocks (``active SMs / S`` for a partial wave, ``waves / rounds``
    otherwise: wave quantisation);
``shared``
    shared-memory bytes over the SMs' shared-memory bandwidth, scaled the same way;
``latency``
    ``rounds x`` the critical path of one block: its dependent round trips to global memory
    times the loaded latency, plus its own shared-memory and arithmetic time on one SM (the
    phases of a block are separated by barriers, so they add up; in a pipelined main loop,
    whose copies run beside the math, the larger of the two);
``launch``
    the fixed cost of a launch; the bound is ``launch`` when it exceeds the device time.

>>> from pto_cuda.perf.devices import H100
>>> p = KernelProfile(threads=256, resident=6, bytes_per_task=65536, read_per_task=32768,
...                   smem_per_task=229376,
...                   flops_per_task={"sfu": 16384, "fp32": 40960}, round_trips=8,
...                   inflight_per_block=4096)
>>> e = estimate_launch(H100, p, blocks=174)
>>> e.bound, 6 < e.device_us < 20
('latency', True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from pto_core.errors import PTOError

from .devices import Device


@dataclass(frozen=True)
class KernelProfile:
    """What one task (one block) of a kernel asks of the device."""

    threads: int
    resident: int                       # blocks per SM (occupancy)
    bytes_per_task: int                 # global memory, read + written
    read_per_task: int                  # of which read (stores are posted: no round trip)
    smem_per_task: int                  # shared-memory bytes read + written
    flops_per_task: Mapping[str, int]   # by unit ("mma_sync.bf16", "fp32", "sfu" ...)
    round_trips: int                    # dependent global-memory round trips of one block
    inflight_per_block: int             # global bytes a block has outstanding while loading
    dram_per_task: int | None = None    # of bytes_per_task, what DRAM serves (None: all)
    overlapped: bool = False            # copies run asynchronously beside the math (a
                                        # pipelined main loop): a block's shared-memory and
                                        # arithmetic time overlap instead of adding up


@dataclass(frozen=True)
class Estimate:
    device_us: float                    # the device's time for the launch
    us: float                           # device time + the fixed launch cost
    bound: str                          # "memory" | "compute" | "latency" | "launch"
    waves: float
    achieved_occupancy: float           # warps on an active SM / the SM's maximum
    times_us: Mapping[str, float] = field(default_factory=dict)


def estimate_launch(device: Device, p: KernelProfile, blocks: int) -> Estimate:
    """The model's time for one launch of ``blocks`` blocks (see the module doc)."""
    if blocks < 1:
        raise PTOError(f"a launch has at least one block, got {blocks}")
    S, r = device.sms, max(p.resident, 1)
    waves = blocks / (S * r)
    rounds = max(1, math.ceil(waves))
    active = min(S, blocks)
    resident = min(blocks, S * r)           # blocks on the SMs at once
    util = active / S if rounds == 1 else waves / rounds
    lat = device.mem_latency_us * 1e-6
    copy = device.copy_gbs * 1e9
    l2 = device.l2_gbs * 1e9
    dram = p.bytes_per_task if p.dram_per_task is None or not l2 else p.dram_per_task
    near = l2 or copy                       # where loads are served from
    inflight = resident * p.inflight_per_block
    loads = min(near, inflight / lat) if inflight else near
    t_memory = blocks * max(p.read_per_task / loads, dram / copy,
                            p.bytes_per_task / l2 if l2 else 0.0)
    t_compute = sum(blocks * n / (device.peak(u) * util) for u, n in p.flops_per_task.items())
    smem_bw = device.smem_gbs_per_sm * 1e9
    t_shared = blocks * p.smem_per_task / (S * util * smem_bw)
    on_sm = (p.smem_per_task / smem_bw, sum(n / (device.peak(u) / S)
                                            for u, n in p.flops_per_task.items()))
    block_path = p.round_trips * lat + (max(on_sm) if p.overlapped else sum(on_sm))
    t_latency = rounds * block_path
    times = {"memory": t_memory * 1e6, "compute": t_compute * 1e6, "shared": t_shared * 1e6,
             "latency": t_latency * 1e6}
    device_us = max(times.values())
    worst = max(times, key=lambda k: times[k])
    bound = "compute" if worst == "shared" else worst
    if device.launch_us > device_us:
        bound = "launch"
    times["launch"] = device.launch_us
    warps = -(-p.threads // 32)
    achieved = resident / active * warps / device.max_warps_per_sm
    return Estimate(device_us, device_us + device.launch_us, bound, waves, achieved, times)
