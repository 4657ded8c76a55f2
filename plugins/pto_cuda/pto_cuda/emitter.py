"""CUDA kernels from InCore functions: a specialisation of the shared C-style renderer.

What differs from the portable C of :class:`pto_core.codegen.cstyle.CStyleRenderer`:

* one thread block runs one tile task; the body is a ``__device__`` function every thread of the
  block executes (scalar code and loop control redundantly, tile ops split over the threads);
* every tile has a place decided from its uses (:mod:`pto_cuda.placement`): registers in the
  row layout (element-wise chains, loads, stores, broadcasts and row reductions: a thread owns
  its elements across the chain, a row reduction is a warp of shuffles), registers as MMA
  fragments (f32 accumulators of f16/bf16 matmuls), the buffers of a pipelined K loop, or
  dynamic shared memory at 128-byte aligned offsets (what threads exchange);
* a fused element-wise group (from the shared emitter's loop fusion) is one unrolled loop over
  the thread's own elements; each thread moves runs of 4 elements of global memory at once
  when the pointer and row stride allow (a uniform test, so no warp diverges);
* f16/bf16 matmuls on sm_80+ use mma.sync m16n8k16 with ldmatrix (``pto_cuda_gemm.cuh``); the
  canonical K loop (``TLOAD a(i, k); TLOAD b(k, j); TMATMUL_ACC c, c, a, b``, with or without
  its peeled first step) becomes ``gemm_mainloop``: cp.async into swizzled multi-stage shared
  memory overlapping the tensor-core math; f32 matmuls run on CUDA cores;
* on sm_90a a kernel that is exactly that loop and stores of its accumulator gets the TMA +
  wgmma main loop of ``pto_cuda_sm90.cuh`` instead (a producer warpgroup, consumer
  warpgroups, mbarriers; tensor maps made by the launcher), with the sm_80 form of the same
  kernel compiled beside it for the tasks whose tensor maps cannot be made;
* ``__syncthreads()`` only where threads hand data through shared memory;
* ``PTO_CUDA_KERNEL(...)`` (``include/pto_cuda_kernel.h``) wraps the body into a batched
  ``__global__`` kernel, a launcher and the runtime's kernel-ABI symbol.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.F32)
...      .memref("o", M.GLOBAL, T.F32).tile("x", 8, 128, T.F32).tile("r", 8, 1, T.F32)
...      .load("x", "a").rowmax("r", "x").store("o", "r").build())
>>> src, facts = CudaRenderer().render(f, m)
>>> "pto::warp_allreduce" in src and "__syncthreads" not in src and "PTO_CUDA_KERNEL(pto_kernel_k, 4, " in src
True
>>> facts.threads, facts.smem_bytes, facts.placement["k"].tiles["x"].value
(128, 0, 'reg')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pto_core.codegen.cstyle import RANDOM_HELPER, CStyleRenderer, _Out
from pto_core.codegen.cnames import kernel_symbol
from pto_core.errors import PTOBackendError
from pto_core.ir.ops import ITEM_LAYOUTS, indexed_tables
from pto_core.ir import (Break, Call, Category, Continue, ElementType, For, Function, Instr,
                         MemRefType, Module, TileType)
from pto_core.options import CompileOptions

from .config import KernelConfig, arch_major, default_config, wgmma_arch
from .placement import (MainLoop, Place, Placement, RowLayout, Sm90Plan, WarpGrid, place_tiles,
                        placement_summary, sm90_plan, user_named)

E = ElementType

#: usable dynamic shared memory per thread block on sm_90 (228 KiB per SM, 1 KiB reserved)
SMEM_PER_BLOCK_SM90 = 227 * 1024
#: the same on sm_80 (164 KiB per SM, 1 KiB reserved), the limit when building for sm_80 too
SMEM_PER_BLOCK_SM80 = 163 * 1024

def smem_capacity(arch: str) -> int:
    """Per-block shared memory of the smallest architecture in ``arch`` (``"sm_80,sm_90"``).

    >>> smem_capacity("sm_90"), smem_capacity("sm_80,sm_90") < smem_capacity("sm_90")
    (232448, True)
    """
    caps = []
    for a in arch.split(","):
        a = a.strip()
        major = int("".join(ch for ch in a[3:] if ch.isdigit()) or 90)
        caps.append(SMEM_PER_BLOCK_SM90 if major >= 90 else SMEM_PER_BLOCK_SM80 if major >= 80
                    else 96 * 1024)
    return min(caps)


@dataclass(frozen=True)
class RenderFacts:
    """What rendering one kernel decided, in the user's names: how the executor launches it
    (``threads`` per block, ``smem_bytes`` of dynamic shared memory per task, ``nargs``
    int64 argument slots per task), the configuration it was built with (``warps`` filled
    in) and where each tile of each rendered function lives (``placement``: function name ->
    :class:`~pto_cuda.placement.Placement`)."""

    symbol: str
    config: KernelConfig
    threads: int
    smem_bytes: int
    nargs: int
    placement: Mapping[str, Placement]


class CudaRenderer(CStyleRenderer):
    """CUDA C++ kernels for one thread block per tile task."""

    name = "cuda"
    suffix = ".cu"
    tile_align = 128
    stack_tile_bytes = None         # tiles live in shared memory (checked against its size)

    def __init__(self, arch: str = "sm_90", config: KernelConfig | None = None,
                 tma: bool = True) -> None:
        self.arch = arch
        #: the sm_90a main loop may be used (False: the sm_80 path whatever the arch, as on the
        #: CPU simulator)
        self.tma = tma and wgmma_arch(arch)
        #: the current kernel's sm_90a main loop, when it has one
        self._sm90: Sm90Plan | None = None
        #: render without the includes (a part of another kernel's file)
        self._bare = False
        self.config = config or default_config(arch)
        self.smem_capacity = smem_capacity(arch)
        self._smem_used = 0
        self._warps = self.config.warps or 8
        self._place = Placement(self._warps)
        #: a row-layout or register op read shared memory since the last __syncthreads (a
        #: later write to shared memory must wait for it)
        self._dirty = False
        #: the placement of each function rendered so far in the current kernel
        self._placements: dict[str, Placement] = {}

    # ---------------------------------------------------------------- types
    CTYPES = {**CStyleRenderer.CTYPES, E.F16: "__half", E.BF16: "__nv_bfloat16"}
    TO_COMPUTE = {E.F16: "__half2float({0})", E.BF16: "__bfloat162float({0})"}
    FROM_COMPUTE = {E.F16: "__float2half_rn({0})", E.BF16: "__float2bfloat16_rn({0})"}

    # math through overloads in pto_cuda_tile.cuh (one spelling for float and double)
    UNARY_F32 = {**CStyleRenderer.UNARY_F32, "abs": "pto::abs_({0})", "exp": "pto::exp_({0})",
                 "log": "pto::log_({0})", "sqrt": "pto::sqrt_({0})", "recip": "pto::recip_({0})",
                 "tanh": "pto::tanh_({0})"}
    BINARY_F32 = {**CStyleRenderer.BINARY_F32, "mul": "pto::mul_({0}, {1})",
                  "max": "pto::max_({0}, {1})",
                  "min": "pto::min_({0}, {1})", "fmod": "pto::fmod_({0}, {1})",
                  "rem": "pto::rem_({0}, {1})", "pow": "pto::pow_({0}, {1})"}
    UNARY_F64 = UNARY_F32
    BINARY_F64 = BINARY_F32
    BINARY_INT = {**CStyleRenderer.BINARY_INT, "div": "pto::idiv_({0}, {1}, &_pto_status)",
                  "mod": "pto::imod_({0}, {1}, &_pto_status)",
                  "fmod": "pto::imod_({0}, {1}, &_pto_status)",
                  "rem": "pto::irem_({0}, {1}, &_pto_status)", "pow": "pto::ipow_({0}, {1})"}

    # ---------------------------------------------------------------- text templates
    def prelude(self) -> str:
        if self._bare:
            return ""
        gemm = '#include "pto_cuda_gemm.cuh"\n' if arch_major(self.arch) >= 80 else ""
        sm90 = '#include "pto_cuda_sm90.cuh"\n' if self._sm90 else ""
        return (f'#include <stdio.h>\n#include "pto_cuda_tile.cuh"\n{gemm}{sm90}'
                f'#include "pto_cuda_kernel.h"\n'
                + RANDOM_HELPER.replace("{q}", "__device__ __forceinline__"))

    def signature(self, symbol: str) -> str:
        return f"static __device__ __forceinline__ int32_t {symbol}_block(const int64_t* args)"

    def body_qualifiers(self) -> str:
        return "static __device__ __forceinline__"

    def restrict(self) -> str:
        return "__restrict__"

    def _alloc(self, nbytes: int) -> int:
        off = self._smem_used
        self._smem_used += -(-nbytes // self.tile_align) * self.tile_align
        return off

    def tile_decl(self, name: str, t: TileType) -> str:
        ct = self.ctype(t.dtype)
        where = self._place.tiles.get(name, Place.SMEM)
        if where is Place.REG:
            lay = self._place.layout(t.shape)
            dims = f"[{lay.rpw}]" if t.cols == 1 else f"[{lay.rpw}][{lay.cpl * lay.vec}]"
            return f"{ct} {name}{dims}; pto::poison({name});"
        if where is Place.ACC and self._sm90:
            return f"pto::WgAcc<{self._sm90_ctype}, {t.rows}, {t.cols}> {name};"
        if where is Place.ACC:
            g = self._place.grids[name]
            return f"pto::Acc<{t.rows}, {t.cols}, {g.wm}, {g.wn}> {name};"
        if where is Place.STAGED:
            return f"/* {name}: in the pipelined K loop's shared-memory stages */"
        off = self._alloc(t.nbytes)
        if self._smem_largest is None or t.nbytes > self._smem_largest[1].nbytes:
            self._smem_largest = (name, t)
        return (f"{ct} (*const {name})[{t.cols}] = "
                f"reinterpret_cast<{ct} (*)[{t.cols}]>(_pto_smem + {off}); (void){name};")

    # ---------------------------------------------------------------- whole kernels
    def render(self, fn: Function, module: Module | None = None,
               options: CompileOptions | None = None, symbol: str | None = None,
               namespace: str | None = None) -> tuple[str, RenderFacts]:
        """The kernel's source file and what rendering it decided (:class:`RenderFacts`).

        On sm_90a, a kernel that is a canonical K loop and stores of its accumulator
        (:func:`~pto_cuda.placement.sm90_plan`) gets the TMA + wgmma main loop, and beside it,
        in namespace ``pto_sm80``, the same kernel on the sm_80 path for the tasks whose
        tensor maps cannot be made. ``namespace``: render only the kernel's functions, in that
        namespace, as a part of another kernel's file that does not export it."""
        symbol = symbol or kernel_symbol(fn.name)
        self._smem_used = 0
        self._smem_largest: tuple[str, TileType] | None = None   # the largest tile in shared memory
        self._placements = {}
        self._sm90 = None
        self._bare = namespace is not None
        config = self.config.with_defaults(fn, module, self.arch)
        self._warps = config.warps
        threads = 32 * self._warps
        text = super().render_kernel(fn, module, options, symbol)
        smem = self._smem_used
        plan = self._sm90
        if plan is not None:
            threads, smem = plan.threads, plan.smem_bytes
            self._sm90 = None           # the includes were written before the plan was made
            before = self.prelude()
            self._sm90 = plan
            text = text.replace(before, self.prelude(), 1)
        if smem > self.smem_capacity:
            big = self._smem_largest
            largest = (f"; largest: {big[0]} ({big[1].rows}x{big[1].cols} {big[1].dtype.value}, "
                       f"{big[1].nbytes} B)" if big else "")
            raise PTOBackendError(
                f"tiles need {smem} bytes of shared memory, more than the {self.smem_capacity} a "
                f"thread block can have on {self.arch}{largest} (use smaller tiles)",
                function=fn.name)
        nargs = sum(2 if isinstance(p.type, MemRefType) else 1 for p in fn.params)
        note = (f"\n/* {nargs} argument slots, {threads} threads, {smem} bytes of shared "
                f"memory per task */\n")
        if namespace is not None:
            text = (f"namespace {namespace} {{\n{text}{note}"
                    f"PTO_CUDA_KERNEL_LOCAL({symbol}, {nargs}, {threads}, {smem})\n}}  "
                    f"// namespace {namespace}\n")
        elif plan is None:
            text += f"{note}PTO_CUDA_KERNEL({symbol}, {nargs}, {threads}, {smem})\n"
        else:
            fallback = CudaRenderer(self.arch, self.config, tma=False)
            part, _ = fallback.render(fn, module, options, f"{symbol}_sm80", namespace="pto_sm80")
            text += "\n/* the same kernel on the sm_80 path, for tasks without tensor maps */\n"
            text += part + self._sm90_operands(fn, symbol, plan)
            text += (f"{note}PTO_CUDA_KERNEL_SM90({symbol}, {nargs}, {threads}, {smem}, 2, "
                     f"pto_sm80::{symbol}_sm80_launch)\n")
        placement = {name: user_named(p) for name, p in self._placements.items()}
        return text, RenderFacts(symbol, config, threads, smem, nargs, placement)

    def _sm90_operands(self, fn: Function, symbol: str, plan: Sm90Plan) -> str:
        """The table the launcher makes the A and B tensor maps from: argument slot, element
        size and type, box (64 columns x the tile's rows)."""
        elem = self._sm90_elem
        dtype = ("CU_TENSOR_MAP_DATA_TYPE_BFLOAT16" if elem is E.BF16
                 else "CU_TENSOR_MAP_DATA_TYPE_FLOAT16")
        items = ", ".join(f"{{{slot}, {elem.itemsize}, {dtype}, 64, {rows}}}"
                          for slot, rows in ((plan.a_slot, plan.bm), (plan.b_slot, plan.bk)))
        return (f"\n/* tensor maps: A boxes of {plan.bm} rows x 64, B boxes of {plan.bk} rows x "
                f"64 (128-byte swizzle) */\nstatic const pto::TmaOperand {symbol}_tma[2] = "
                f"{{{items}}};\n")

    def render_kernel(self, fn: Function, module: Module | None = None,
                      options: CompileOptions | None = None, symbol: str | None = None) -> str:
        """The kernel's source file (:meth:`render` without its facts)."""
        return self.render(fn, module, options, symbol)[0]

    def _render_body_function(self, out: _Out, fn: Function, options: CompileOptions) -> None:
        # every body function sees the block's dynamic shared memory; tiles of callees get
        # offsets after their caller's (offsets keep counting across the whole file)
        import dataclasses
        cfg = dataclasses.replace(self.config, warps=self._warps)
        self._place = place_tiles(fn, cfg, self.arch, self.smem_capacity - self._smem_used)
        if self.tma and not self._placements and not any(isinstance(s, Call) for s in fn.walk()):
            # the sm_90a main loop does not use the warp count: an accumulator too large for
            # this many warps' fragments may still be one for the consumer warpgroups
            for place in (self._place, place_tiles(fn, dataclasses.replace(cfg, warps=16),
                                                   self.arch, self.smem_capacity)):
                self._sm90 = sm90_plan(fn, place, cfg.stages, self.smem_capacity)
                if self._sm90 is not None:
                    self._place = place
                    break
            if self._sm90 is not None:
                # the accumulator is split over consumer warpgroups, by rows
                self._place.grids[self._sm90.mainloop.acc] = WarpGrid(self._sm90.consumers, 1)
                self._sm90_elem = fn.type_of(self._sm90.mainloop.a).dtype
                self._sm90_ctype = self.ctype(self._sm90_elem)
        self._placements[fn.name] = self._place
        self._dirty = False
        start = len(out.lines)
        super()._render_body_function(out, fn, options)
        out.lines[start + 1:start + 1] = [
            "    extern __shared__ __align__(128) unsigned char _pto_smem[];",
            f"    /* tiles: {placement_summary(self._place, fn, 'warpgroups' if self._sm90 else 'warps')} */",
            "    const int _pto_lane = threadIdx.x & 31, _pto_warp = threadIdx.x >> 5;",
            "    (void)_pto_lane; (void)_pto_warp; (void)_pto_smem;"]
        scalars = {loc.name for loc in fn.locals if not isinstance(loc.type, TileType)}
        for i in range(start + 2, len(out.lines)):   # scalars unused on some paths: no warning
            words = out.lines[i].split()
            if len(words) >= 3 and words[1] in scalars and words[2] == "=":
                out.lines[i] += f" (void){words[1]};"
                scalars.discard(words[1])

    def _param_decls(self, fn: Function) -> list[str]:
        extra = ["const pto::TmaRef* _pto_tma"] if self._sm90 else []
        return super()._param_decls(fn) + extra

    def _render_entry(self, out: _Out, fn: Function, symbol: str) -> None:
        if not self._sm90:
            super()._render_entry(out, fn, symbol)
            return
        with out.block(f"static __device__ __forceinline__ int32_t {symbol}_block("
                       "const int64_t* args, const pto::TmaRef* _pto_tma)"):
            out(f"return _pto_body_{fn.name}({', '.join([*self.abi_arguments(fn), '_pto_tma'])});")

    # ---------------------------------------------------------------- statements and barriers
    def _barrier(self, out: _Out) -> None:
        out("__syncthreads();")
        self._dirty = False

    def _smem(self, tile) -> bool:
        return isinstance(tile, str) and self._place.tiles.get(tile) is Place.SMEM

    def render_body(self, out: _Out, fn: Function, body, options: CompileOptions) -> None:
        skipped = self._place.skipped
        super().render_body(out, fn, [s for s in body if id(s) not in skipped], options)

    def end_body(self, out: _Out) -> None:
        if self._dirty:                  # the next iteration may overwrite what was read
            self._barrier(out)

    def render_stmt(self, out: _Out, fn: Function, s, options: CompileOptions) -> None:
        if isinstance(s, For) and id(s) in self._place.mainloops:
            self._render_mainloop(out, fn, self._place.mainloops[id(s)])
        elif isinstance(s, (Break, Continue)):
            # the jump skips the barrier at the end of the loop body; every thread of the
            # block takes it (scalars are the same in all), so the barrier is safe here
            dirty = self._dirty
            self._barrier(out)
            self._dirty = dirty
            super().render_stmt(out, fn, s, options)
        elif isinstance(s, Call):
            super().render_stmt(out, fn, s, options)
            self._barrier(out)
        else:
            super().render_stmt(out, fn, s, options)

    # ---------------------------------------------------------------- row-layout groups
    def render_group(self, out: _Out, fn: Function, group: list[Instr]) -> None:
        """Element-wise runs in the row layout; loads and stores of accumulator tiles move
        their MMA fragments."""
        run: list[Instr] = []
        for s in group:
            tile = s.operands[0] if s.opdef.category is Category.LOAD else s.operands[1]
            on_acc = self._place.tiles.get(s.operands[0]) is Place.ACC
            if (s.opdef.is_memory_op and self._place.tiles.get(tile) is Place.ACC) or (
                    on_acc and not s.opdef.is_memory_op):
                if run:
                    self._row_group(out, fn, run)
                    run = []
                if s.opdef.is_memory_op:
                    self._acc_move(out, fn, s)
                else:
                    self._acc_apply(out, fn, s)
            else:
                run.append(s)
        if run:
            self._row_group(out, fn, run)

    def _acc_move(self, out: _Out, fn: Function, s: Instr) -> None:
        load = s.opdef.category is Category.LOAD
        tile, mem = (s.operands[0], s.operands[1]) if load else (s.operands[1], s.operands[0])
        t = fn.type_of(tile)
        ptr = (f"{mem} + (int64_t)({self.index(s.operands[2])}) * {t.rows} * _pto_ld_{mem} + "
               f"(int64_t)({self.index(s.operands[3])}) * {t.cols}")
        out(f"/* {s} */")
        out(f"pto::acc_load({tile}, {ptr}, _pto_ld_{mem});" if load
            else f"pto::acc_store({ptr}, _pto_ld_{mem}, {tile});")

    def _acc_apply(self, out: _Out, fn: Function, s: Instr) -> None:
        """An element-wise op on an accumulator alone, on each of its registers (a fused
        epilogue: no shared memory, no barrier)."""
        ct = self.compute_type(fn.type_of(s.operands[0]).dtype)
        env = self._operands(s, ct, lambda name, v: "_pto_x")
        out(f"/* {s}: on the accumulator's registers */")
        out(f"pto::acc_apply({s.operands[0]}, [&](float _pto_x) {{ return "
            f"{self.expr(s.opdef.expr, env, ct)}; }});")

    def _operands(self, s: Instr, ct: str, tile) -> dict[str, str]:
        """The expression of each input of element-wise op ``s`` in compute type ``ct``: a
        scalar cast or literal, a tile operand as ``tile(name, value)`` gives it."""
        env = {}
        for spec in s.opdef.reads:
            v = s.operand(spec.name)
            if spec.role == "scalar":
                env[spec.name] = f"({ct})({v})" if isinstance(v, str) else self.literal(v, ct)
            else:
                env[spec.name] = tile(spec.name, v)
        return env

    def _ref(self, fn: Function, tile: str, lay: RowLayout, role: str = "") -> str:
        """This thread's element of ``tile`` at the loop position (``_pto_i``, ``_pto_j``,
        ``_pto_v``) of a row-layout iteration over ``lay``'s shape; ``role`` "row" or "col"
        for a broadcast operand."""
        reg = self._place.tiles.get(tile) is Place.REG
        if role == "row" or (role == "" and lay.cols == 1):
            return f"{tile}[_pto_i]" if reg else f"{tile}[_pto_r][0]"
        if role == "col":
            # a one-column iteration has no column index: its one column is column 0
            return f"{tile}[0][0]" if lay.cols == 1 else f"{tile}[0][_pto_c]"
        return f"{tile}[_pto_i][_pto_j * {lay.vec} + _pto_v]" if reg else f"{tile}[_pto_r][_pto_c]"

    def _run_ptr(self, tile: str, lay: RowLayout) -> str:
        """Address of this thread's run of ``lay.vec`` elements of ``tile``."""
        if self._place.tiles.get(tile) is Place.REG:
            return f"&{tile}[_pto_i][_pto_j * {lay.vec}]"
        return f"&{tile}[_pto_r][_pto_c0]"

    def _row_stmt(self, fn: Function, s: Instr, lay: RowLayout) -> str:
        """An element-wise op (or conversion) at this thread's element."""
        dst = s.operands[0]
        dt = fn.type_of(dst).dtype
        ct = self.compute_type(dt)
        cat = s.opdef.category
        if cat is Category.CONVERT:
            a = s.operands[1]
            return (f"{self._ref(fn, dst, lay)} = "
                    f"{self.convert_expr(fn.type_of(a).dtype, dt, self._ref(fn, a, lay))};")
        def tile(name: str, v: str) -> str:
            role = ("row" if cat is Category.ROW_EXPAND and name == "b" else
                    "col" if cat is Category.COL_EXPAND and name == "b" else "")
            return self.to_compute(dt, self._ref(fn, v, lay, role))
        env = self._operands(s, ct, tile)
        if cat in (Category.ROW_EXPAND, Category.COL_EXPAND) and "a" not in env:
            env["a"] = env["b"]
        return (f"{self._ref(fn, dst, lay)} = "
                f"{self.from_compute(dt, self.expr(s.opdef.expr, env, ct))};")

    def _row_group(self, out: _Out, fn: Function, group: list[Instr]) -> None:
        """One unrolled loop over this thread's elements of the group's shape."""
        shape = self.group_shape(fn, group[0])
        lay = self._place.layout(shape)
        writes = [s.operands[0] for s in group if s.opdef.category is not Category.STORE]
        reads = [v for s in group for v in s.operands[1:]]
        writes_smem = any(self._smem(t) for t in writes)
        if writes_smem and self._dirty:
            self._barrier(out)
        out("/* " + "; ".join(str(s) for s in group) + " */")
        self._row_loops(out, fn, group, lay, lambda: self._row_body(out, fn, group, lay))
        if writes_smem:
            self._barrier(out)          # other threads read what this group wrote
        elif any(self._smem(t) for t in reads):
            self._dirty = True

    def _row_loops(self, out: _Out, fn: Function, group: list[Instr], lay: RowLayout,
                   body, before=None, after=None) -> None:
        """The loops of a row-layout iteration: rows of this warp, then (for more than one
        column) this lane's runs; ``body`` prints the innermost statements, ``before`` and
        ``after`` what comes before and after the runs of one row."""
        ptrs = self._group_plan(fn, group) if group else {}
        with out.block(""):
            for k, s in enumerate(group):
                if s.opdef.is_memory_op and lay.vec > 1:
                    mem = s.operands[1] if s.opdef.category is Category.LOAD else s.operands[0]
                    vb = lay.vec * fn.type_of(mem).dtype.itemsize
                    out(f"const bool _pto_al{k} = reinterpret_cast<uintptr_t>({mem}) % {vb} == 0 "
                        f"&& _pto_ld_{mem} % {lay.vec} == 0; (void)_pto_al{k};")
            out("#pragma unroll")
            with out.block(f"for (int _pto_i = 0; _pto_i < {lay.rpw}; ++_pto_i)"):
                out(f"const int _pto_r = _pto_warp + _pto_i * {lay.warps}; (void)_pto_r;")
                with out.block(f"if ({'_pto_r < ' + str(lay.rows) if lay.row_guard else 'true'})"):
                    self._row_pointers(out, fn, group, ptrs)
                    self._ptrs = ptrs
                    if before is not None:
                        before()
                    if lay.cols == 1:
                        body()
                    else:
                        out("#pragma unroll")
                        with out.block(f"for (int _pto_j = 0; _pto_j < {lay.cpl}; ++_pto_j)"):
                            out(f"const int _pto_c0 = (_pto_j * 32 + _pto_lane) * {lay.vec}; (void)_pto_c0;")
                            with out.block(f"if ({'_pto_c0 < ' + str(lay.cols) if lay.col_guard else 'true'})"):
                                body()
                    if after is not None:
                        after()

    def _row_body(self, out: _Out, fn: Function, group: list[Instr], lay: RowLayout) -> None:
        ptrs = self._ptrs
        compute: list[Instr] = []

        def flush() -> None:
            if not compute:
                return
            if lay.cols == 1:
                for s in compute:
                    out(self._guard_lane(s, self._row_stmt(fn, s, lay)))
            else:
                out("#pragma unroll")
                with out.block(f"for (int _pto_v = 0; _pto_v < {lay.vec}; ++_pto_v)"):
                    out("const int _pto_c = _pto_c0 + _pto_v; (void)_pto_c;")
                    for s in compute:
                        out(self._row_stmt(fn, s, lay))
            compute.clear()

        for k, s in enumerate(group):
            cat = s.opdef.category
            if cat not in (Category.LOAD, Category.STORE):
                compute.append(s)
                continue
            flush()
            load = cat is Category.LOAD
            tile = s.operands[0] if load else s.operands[1]
            g = ptrs[id(s)][0]
            ct = self.ctype(fn.type_of(tile).dtype)
            if lay.cols == 1:
                ref = self._ref(fn, tile, lay)
                out(f"{ref} = pto::ld_lane0({g});" if load else
                    self._guard_lane(s, f"{g}[0] = {ref};"))
                continue
            run = self._run_ptr(tile, lay)
            vec = (f"pto::ld_run<{ct}, {lay.vec}>({run}, {g} + _pto_c0);" if load else
                   f"pto::st_run<{ct}, {lay.vec}>({g} + _pto_c0, {run});")
            if lay.vec == 1:
                out(vec)
                continue
            with out.block(f"if (_pto_al{k})"):
                out(vec)
            with out.block("else"):
                out("#pragma unroll")
                with out.block(f"for (int _pto_v = 0; _pto_v < {lay.vec}; ++_pto_v)"):
                    out("const int _pto_c = _pto_c0 + _pto_v;")
                    ref = self._ref(fn, tile, lay)
                    out(f"{ref} = {g}[_pto_c];" if load else f"{g}[_pto_c] = {ref};")
        flush()

    def _guard_lane(self, s: Instr, stmt: str) -> str:
        """Every lane holds an R x 1 element; one lane writes it to memory."""
        dst = s.operands[0]
        to_memory = (s.opdef.category is Category.STORE or self._smem(dst))
        return f"if (_pto_lane == 0) {{ {stmt} }}" if to_memory else stmt

    # ---------------------------------------------------------------- block-level tile ops
    @staticmethod
    def _at(name: str) -> str:
        return f"&{name}[0][0]"

    def _block_step(self, out: _Out, s: Instr, call: str) -> None:
        """``s`` as one call every thread of the block makes; other threads read its result,
        hence the barrier (and one before it when earlier reads may still be running)."""
        if self._dirty:
            self._barrier(out)
        out(f"/* {s} */")
        out(call)
        self._barrier(out)

    def render_reduce(self, out: _Out, fn: Function, s: Instr) -> None:
        dst, a = s.operands
        ta = fn.type_of(a)
        if s.opdef.is_arg:
            row, big = s.opdef.category is Category.ROW_REDUCE, s.opdef.reduce == "argmax"
            self._block_step(out, s, f"pto::arg_reduce<{self.ctype(ta.dtype)}, {ta.rows}, "
                                     f"{ta.cols}, {str(row).lower()}, {str(big).lower()}>"
                                     f"({self._at(dst)}, {self._at(a)});")
            return
        op = {"sum": "pto::SumOp", "max": "pto::MaxOp", "min": "pto::MinOp",
              "prod": "pto::ProdOp"}[s.opdef.reduce]
        if s.opdef.category is Category.COL_REDUCE:
            self._block_step(out, s, f"pto::col_reduce<{self.ctype(ta.dtype)}, {ta.rows}, {ta.cols}>"
                                     f"({self._at(dst)}, {self._at(a)}, {op}());")
            return
        # a warp per row: each lane folds its own elements, then a butterfly of shuffles
        lay = self._place.layout(ta.shape)
        ct = self.ctype(ta.dtype)
        if self._smem(dst) and self._dirty:
            self._barrier(out)
        out(f"/* {s} */")

        def before() -> None:
            out(f"const {op} _pto_op;")
            out(f"pto::compute_t<{ct}> _pto_acc = {op}::identity<pto::compute_t<{ct}>>();")

        def body() -> None:
            x = f"pto::up<{ct}>({self._ref(fn, a, lay)})"
            if lay.cols == 1:           # every lane holds the row's one element: fold it once
                out(f"if (_pto_lane == 0) _pto_acc = {x};")
                return
            out("#pragma unroll")
            with out.block(f"for (int _pto_v = 0; _pto_v < {lay.vec}; ++_pto_v)"):
                out("const int _pto_c = _pto_c0 + _pto_v; (void)_pto_c;")
                out(f"_pto_acc = _pto_op(_pto_acc, {x});")

        def after() -> None:
            out("_pto_acc = pto::warp_allreduce(_pto_acc, _pto_op);")
            ref = self._ref(fn, dst, self._place.layout(fn.type_of(dst).shape))
            stmt = f"{ref} = pto::down<{ct}>(_pto_acc);"
            out(f"if (_pto_lane == 0) {{ {stmt} }}" if self._smem(dst) else stmt)

        self._row_loops(out, fn, [], lay, body, before, after)
        if self._smem(dst):
            self._barrier(out)
        elif self._smem(a):
            self._dirty = True

    def uses_tensor_cores(self, fn: Function, s: Instr) -> bool:
        """f16/bf16 inputs, sides multiple of 16; f32 accumulation (on sm_80+ any result type
        is rounded from it once; WMMA before sm_80 accumulates f16 results in f16)."""
        dst, a, b = s.operands[0], s.operands[-2], s.operands[-1]
        td, ta, tb = fn.type_of(dst), fn.type_of(a), fn.type_of(b)
        if ta.dtype not in (E.F16, E.BF16):
            return False
        if arch_major(self.arch) < 80 and td.dtype is not E.F32 and not (
                ta.dtype is E.F16 and td.dtype is E.F16):
            return False
        return td.rows % 16 == 0 and td.cols % 16 == 0 and ta.cols % 16 == 0

    def render_matmul(self, out: _Out, fn: Function, s: Instr) -> None:
        ops = s.named_operands()
        dst, acc, a, b = ops["dst"], ops.get("acc"), ops["a"], ops["b"]
        if dst in (a, b):
            raise PTOBackendError("the destination of a matmul must not be one of its inputs",
                                  function=fn.name, instruction=str(s))
        td, ta = fn.type_of(dst), fn.type_of(a)
        if s.opdef.addend == "bias":
            # dst = a @ b + bias as dst = dst + a @ b with the bias row copied to every row of
            # dst first (the copy is exact; the sum is the accumulating matmul's)
            if self._dirty:
                self._barrier(out)
            out(f"/* {s}: the bias row in every row of {dst} */")
            with out.block(f"for (int _pto_e = threadIdx.x; _pto_e < {td.rows * td.cols}; "
                           f"_pto_e += blockDim.x)"):
                out(f"{dst}[_pto_e / {td.cols}][_pto_e % {td.cols}] = "
                    f"{ops['bias']}[0][_pto_e % {td.cols}];")
            self._barrier(out)
            acc = dst
        if self._place.tiles.get(dst) is Place.ACC:
            out(f"/* {s}: accumulator in registers */")
            if acc is None:
                out(f"pto::acc_fill({dst}, 0.0f);")
            out(f"pto::acc_mma<{self.ctype(ta.dtype)}, {ta.cols}>({dst}, {self._at(a)}, "
                f"{self._at(b)});")
            self._dirty = True
            return
        impl = ("matmul_simt" if not self.uses_tensor_cores(fn, s) else
                "matmul_mma" if arch_major(self.arch) >= 80 else "matmul_wmma")
        self._block_step(out, s, f"pto::{impl}<{self.ctype(ta.dtype)}, {self.ctype(td.dtype)}, "
                                 f"{td.rows}, {ta.cols}, {td.cols}, {'true' if acc else 'false'}>("
                                 f"{self._at(dst)}, {self._at(acc) if acc else 'nullptr'}, "
                                 f"{self._at(a)}, {self._at(b)});")

    def _render_mainloop(self, out: _Out, fn: Function, ml: MainLoop) -> None:
        """The canonical K loop as one pipelined tensor-core mainloop."""
        if self._sm90:
            self._render_sm90_mainloop(out, fn, ml, self._sm90)
            return
        tc, ta, tb = fn.type_of(ml.acc), fn.type_of(ml.a), fn.type_of(ml.b)
        g = self._place.grids[ml.acc]
        ct = self.ctype(ta.dtype)
        off = self._alloc(ml.stages * (ta.nbytes + tb.nbytes))
        loop = ml.loop
        k0 = self._mainloop_head(out, ml, f"{ml.stages} stages, cp.async + ldmatrix + mma.sync")
        out(f"pto::gemm_mainloop<{ct}, {tc.rows}, {tc.cols}, {ta.cols}, {g.wm}, {g.wn}, "
            f"{ml.stages}>({ml.acc}, reinterpret_cast<{ct}*>(_pto_smem + {off}), "
            f"{ml.a_mem} + (int64_t)({self.index(ml.a_row)}) * {ta.rows} * _pto_ld_{ml.a_mem}, "
            f"_pto_ld_{ml.a_mem}, {ml.b_mem} + (int64_t)({self.index(ml.b_col)}) * {tb.cols}, "
            f"_pto_ld_{ml.b_mem}, {k0}, {self.index(loop.end)});")
        self._dirty = False             # the mainloop ends with a barrier

    def _mainloop_head(self, out: _Out, ml: MainLoop, how: str) -> str:
        """The comment naming a pipelined K loop (``how`` it runs) and the accumulator's zero
        fill when the loop's first product was peeled off; returns the first K index."""
        loop = ml.loop
        k0 = str(loop.start - 1) if ml.prologue else self.index(loop.start)
        out(f"/* pipelined K loop ({how}): {'; '.join(str(s) for s in (*ml.prologue, *loop.body))} "
            f"for {loop.var} in [{k0}, {self.index(loop.end)}) */")
        if ml.prologue:
            out(f"pto::acc_fill({ml.acc}, 0.0f);")
        return k0

    def _render_sm90_mainloop(self, out: _Out, fn: Function, ml: MainLoop, p: Sm90Plan) -> None:
        """The canonical K loop as the TMA + wgmma main loop of ``pto_cuda_sm90.cuh``."""
        loop = ml.loop
        k0 = self._mainloop_head(out, ml, f"{p.stages} stages, TMA + wgmma, 1 producer and "
                                          f"{p.consumers} consumer warpgroups")
        out(f"pto::sm90_mainloop<{self._sm90_ctype}, {p.bm}, {p.bn}, {p.bk}, {p.stages}, "
            f"{p.smem_bytes}>({ml.acc}, _pto_smem, _pto_tma[0], {self.index(ml.a_row)}, "
            f"_pto_tma[1], {self.index(ml.b_col)}, {k0}, {self.index(loop.end)});")
        self._dirty = False

    def render_transpose(self, out: _Out, fn: Function, s: Instr) -> None:
        dst, a = s.operands
        ta = fn.type_of(a)
        if dst == a:                    # a square tile in place
            self._block_step(out, s, f"pto::transpose_in_place<{self.ctype(ta.dtype)}, "
                                     f"{ta.rows}>({self._at(dst)});")
            return
        self._block_step(out, s, f"pto::transpose<{self.ctype(ta.dtype)}, {ta.rows}, {ta.cols}>"
                                 f"({self._at(dst)}, {self._at(a)});")

    def render_layout(self, out: _Out, fn: Function, s: Instr) -> None:
        """The threads of the block stride over dst's elements, each copying the element the
        row's map names (the core's ``layout_source``); a barrier publishes dst. Ordered
        writes (``layout_writes``: TSCATTER's, where the last write of a position wins) run
        on one thread after it."""
        dst = s.operands[0]
        td = fn.type_of(dst)
        if self._dirty:
            self._barrier(out)
        out(f"/* {s} */")
        if s.opdef.layout in ITEM_LAYOUTS:  # the threads stride over the op's work items
            with out.block(f"for (int _pto_e = threadIdx.x; _pto_e < {self.item_count(fn, s)}; "
                           f"_pto_e += blockDim.x)"):
                self.render_item(out, fn, s)
            self._barrier(out)
            return
        for check in self.layout_checks(fn, s):
            out(check)
        with out.block(f"for (int _pto_e = threadIdx.x; _pto_e < {td.rows * td.cols}; "
                       f"_pto_e += blockDim.x)"):
            out(f"const int _pto_r = _pto_e / {td.cols}, _pto_c = _pto_e % {td.cols};")
            for line in self.layout_assignments(fn, s, "_pto_r", "_pto_c"):
                out(line)
        self._barrier(out)
        writes = self.layout_writes(fn, s)      # in order, so one thread (TSCATTER's)
        if writes:
            with out.block("if (threadIdx.x == 0)"):
                for line in writes:
                    out(line)
            self._barrier(out)

    def render_indexed(self, out: _Out, fn: Function, s: Instr) -> None:
        """MGATHER/MSCATTER: every thread checks every index (the core's ``indexed_check``),
        then the threads stride over a gather's elements; a scatter's writes run in order on
        one thread (the last write of a position wins). A barrier publishes dst."""
        t = fn.type_of(s.operand(indexed_tables(s.opdef)[1]))
        if self._dirty:
            self._barrier(out)
        out(f"/* {s} */")
        out(self.indexed_check(fn, s))
        move = self.indexed_move(fn, s, "_pto_r", "_pto_c")
        if s.opdef.outputs:
            with out.block(f"for (int _pto_e = threadIdx.x; _pto_e < {t.rows * t.cols}; "
                           f"_pto_e += blockDim.x)"):
                out(f"const int _pto_r = _pto_e / {t.cols}, _pto_c = _pto_e % {t.cols};")
                out(move)
        else:
            with out.block("if (threadIdx.x == 0)"):
                out(f"for (int _pto_r = 0; _pto_r < {t.rows}; _pto_r++) "
                    f"for (int _pto_c = 0; _pto_c < {t.cols}; _pto_c++) {move}")
        self._barrier(out)

    #: an L2 line
    PREFETCH_LINE = 128

    def render_prefetch(self, out: _Out, fn: Function, s: Instr) -> None:
        """TPREFETCH: the threads stride over the window's rows and ask L2 for each line
        (PTX ``prefetch.global.L2`` of the line's global address; the CPU simulation uses
        the compiler's builtin); the staging tile is not touched."""
        rows, lines, at = self.prefetch_rows(fn, s)
        out(f"/* {s} */")
        with out.block(f"for (int _pto_r = threadIdx.x; _pto_r < {rows}; "
                       f"_pto_r += blockDim.x)"):
            with out.block(lines):
                out("#ifdef PTO_CUDA_SIM")
                out(self.prefetch(at))
                out("#else")
                out(f'asm volatile("prefetch.global.L2 [%0];" :: '
                    f'"l"(__cvta_generic_to_global({at})));')
                out("#endif")

    def render_print(self, out: _Out, fn: Function, s: Instr) -> None:
        """TPRINT: thread 0 prints the tile (device printf; the same text in row order as
        the core's template) once every thread's writes are in, and the block waits for it
        before the tile may change; the CPU simulation, whose blocks run on several host
        threads, prints under stdout's lock (as the C backends do) and flushes."""
        if self._dirty:
            self._barrier(out)
        out(f"/* {s} */")
        with out.block("if (threadIdx.x == 0)"):
            out("#ifdef PTO_CUDA_SIM")
            out("flockfile(stdout);")
            out("#endif")
            for line in self.print_lines(fn, s):
                out(line)
            out("#ifdef PTO_CUDA_SIM")
            out("fflush(stdout);")
            out("funlockfile(stdout);")
            out("#endif")
        self._barrier(out)

    def render_convert(self, out: _Out, fn: Function, s: Instr) -> None:
        """Element by element in the row layout, like any element-wise op."""
        self._row_group(out, fn, [s])
