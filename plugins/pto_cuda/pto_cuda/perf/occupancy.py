"""Occupancy by the CUDA rules: how many blocks of a kernel one SM holds, and what stops more.

Four limits, as in the CUDA occupancy calculator (and Nsight Compute's "Block Limit" rows):

* **threads**: ``max_warps_per_sm // warps_per_block``;
* **registers**: a warp's registers are ``regs x 32`` rounded up to the allocation unit (256);
  each of the SM's four sub-partitions holds ``regs_per_sm / 4 // that`` warps, and the SM
  holds four times that, in whole blocks;
* **shared memory**: per block ``static + dynamic + 1 KiB reserved``, rounded up to 128 B,
  against the largest carve-out of the SM;
* **blocks**: the SM's block cap (32).

The smallest wins. On a tie the block size's own limits (threads, then the block cap) are
named first: lowering registers or shared memory would not raise occupancy then.

>>> from pto_cuda.perf.devices import H100
>>> o = occupancy(H100, threads=256, registers=28, smem_bytes=33024)
>>> o.blocks, o.limiter, o.fraction
(6, 'shared memory', 0.75)
"""

from __future__ import annotations

from dataclasses import dataclass

from pto_core.errors import PTOError

from .devices import Device


@dataclass(frozen=True)
class Occupancy:
    blocks: int              # resident blocks per SM
    warps: int               # resident warps per SM
    fraction: float          # warps / the SM's maximum
    limiter: str             # "registers" | "shared memory" | "threads" | "blocks"
    limits: dict             # each limit's block count


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(device: Device, *, threads: int, registers: int, smem_bytes: int) -> Occupancy:
    """Resident blocks per SM of a kernel with ``threads`` per block, ``registers`` per thread
    and ``smem_bytes`` of shared memory (static + dynamic) per block."""
    if threads <= 0 or threads > device.max_threads_per_block:
        raise PTOError(f"{threads} threads per block: {device.name} allows 1 to "
                       f"{device.max_threads_per_block}")
    if registers > device.max_regs_per_thread:
        raise PTOError(f"{registers} registers per thread: {device.name} allows at most "
                       f"{device.max_regs_per_thread}")
    if smem_bytes > device.smem_per_block:
        raise PTOError(f"{smem_bytes} bytes of shared memory per block: {device.name} allows "
                       f"at most {device.smem_per_block}")
    warps = -(-threads // 32)
    limits = {}
    regs_per_warp = _round_up(max(registers, 1) * 32, device.reg_alloc_unit)
    parts = device.warp_alloc_granularity        # the SM's four sub-partitions
    warps_by_regs = parts * (device.regs_per_sm // parts // regs_per_warp)
    limits["threads"] = device.max_warps_per_sm // warps
    limits["blocks"] = device.max_blocks_per_sm
    limits["registers"] = warps_by_regs // warps
    smem = _round_up(smem_bytes + device.smem_reserved_per_block, device.smem_alloc_unit)
    limits["shared memory"] = device.smem_per_sm // smem
    limiter = min(limits, key=lambda k: limits[k])
    blocks = limits[limiter]
    return Occupancy(blocks, blocks * warps, blocks * warps / device.max_warps_per_sm, limiter,
                     limits)
