"""CUDA kernels from InCore functions: a specialisation of the shared C-style renderer.

What differs from the portable C of :class:`pto_core.codegen.cstyle.CStyleRenderer`:

* one thread block runs one tile task; the body is a ``__device__`` function every thread of the
  block executes (scalar code and loop control redundantly, tile ops split over the threads);
* tiles live in dynamic shared memory at 128-byte aligned offsets, declared as pointers to rows
  so the shared statement code (``x[r][c]``) reads unchanged;
* a fused element-wise group (from the shared emitter's loop fusion) is ONE loop with threads
  over elements; when the row length, strides and pointers allow, each thread moves 16 bytes of
  global memory at once (``uint4``: float4 for f32) - the alignment test is uniform, so no warp
  diverges;
* row reductions are a warp per row with ``__shfl_xor_sync``; column reductions a thread per
  column; f16/bf16 TMATMUL(_ACC) use tensor cores (``nvcuda::wmma`` 16x16x16, f32 accumulation)
  and f32 runs on CUDA cores - all in ``include/pto_cuda_tile.cuh``;
* ``__syncthreads()`` after every tile step that hands data between threads;
* ``PTO_CUDA_KERNEL(...)`` (``include/pto_cuda_kernel.h``) wraps the body into a batched
  ``__global__`` kernel, a launcher and the runtime's kernel-ABI symbol.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.F32)
...      .memref("o", M.GLOBAL, T.F32).tile("x", 8, 128, T.F32).tile("r", 8, 1, T.F32)
...      .load("x", "a").rowmax("r", "x").store("o", "r").build())
>>> src = CudaRenderer().render_kernel(f, m)
>>> "pto::row_reduce<float, 8, 128>" in src and "PTO_CUDA_KERNEL(pto_kernel_k, 4, " in src
True
"""

from __future__ import annotations

from pto_core.codegen.cstyle import CStyleRenderer, _Out
from pto_core.errors import PTOBackendError
from pto_core.ir import Category, ElementType, Function, Instr, MemRefType, Module, TileType
from pto_core.options import CompileOptions

E = ElementType

#: usable dynamic shared memory per thread block on sm_90 (228 KiB per SM, 1 KiB reserved)
SMEM_PER_BLOCK_SM90 = 227 * 1024
#: the same on sm_80 (164 KiB per SM, 1 KiB reserved), the limit when building for sm_80 too
SMEM_PER_BLOCK_SM80 = 163 * 1024

_VEC_TYPE = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}


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


class CudaRenderer(CStyleRenderer):
    """CUDA C++ kernels for one thread block per tile task."""

    name = "cuda"
    suffix = ".cu"
    tile_align = 128
    stack_tile_bytes = None         # tiles live in shared memory (checked against its size)

    def __init__(self, arch: str = "sm_90", threads: int | None = None) -> None:
        self.arch = arch
        self.fixed_threads = threads
        self.smem_capacity = smem_capacity(arch)
        self._smem_used = 0
        #: shared-memory bytes per task of the last rendered kernel
        self.last_smem_bytes = 0

    # ---------------------------------------------------------------- types
    CTYPES = {**CStyleRenderer.CTYPES, E.F16: "__half", E.BF16: "__nv_bfloat16"}
    TO_COMPUTE = {E.F16: "__half2float({0})", E.BF16: "__bfloat162float({0})"}
    FROM_COMPUTE = {E.F16: "__float2half_rn({0})", E.BF16: "__float2bfloat16_rn({0})"}

    # math through overloads in pto_cuda_tile.cuh (one spelling for float and double)
    UNARY_F32 = {**CStyleRenderer.UNARY_F32, "abs": "pto::abs_({0})", "exp": "pto::exp_({0})",
                 "log": "pto::log_({0})", "sqrt": "pto::sqrt_({0})", "recip": "pto::recip_({0})",
                 "tanh": "pto::tanh_({0})"}
    BINARY_F32 = {**CStyleRenderer.BINARY_F32, "max": "pto::max_({0}, {1})",
                  "min": "pto::min_({0}, {1})"}
    UNARY_F64 = UNARY_F32
    BINARY_F64 = BINARY_F32
    BINARY_INT = {**CStyleRenderer.BINARY_INT, "div": "pto::idiv_({0}, {1}, &_pto_status)",
                  "mod": "pto::imod_({0}, {1}, &_pto_status)"}

    # ---------------------------------------------------------------- text templates
    def prelude(self) -> str:
        return '#include "pto_cuda_tile.cuh"\n#include "pto_cuda_kernel.h"\n'

    def signature(self, symbol: str) -> str:
        return f"static __device__ __forceinline__ int32_t {symbol}_block(const int64_t* args)"

    def body_qualifiers(self) -> str:
        return "static __device__ __forceinline__"

    def restrict(self) -> str:
        return "__restrict__"

    def tile_decl(self, name: str, t: TileType) -> str:
        off = self._smem_used
        self._smem_used += -(-t.nbytes // self.tile_align) * self.tile_align
        ct = self.ctype(t.dtype)
        return (f"{ct} (*const {name})[{t.cols}] = "
                f"reinterpret_cast<{ct} (*)[{t.cols}]>(_pto_smem + {off}); (void){name};")

    # ---------------------------------------------------------------- whole kernels
    def threads_for(self, fn: Function, module: Module | None) -> int:
        """Block size: enough threads that every thread has a few elements of the largest tile;
        256 for large tiles (8 warps: one per row of an 8-row reduction, 8 WMMA warps)."""
        if self.fixed_threads:
            return self.fixed_threads
        fns = [fn] + (self._callees(fn, module) if module is not None else [])
        largest = max((t.rows * t.cols for f in fns for t in f.tiles.values()), default=0)
        return 256 if largest >= 2048 else 128 if largest >= 512 else 64 if largest >= 128 else 32

    def render_kernel(self, fn: Function, module: Module | None = None,
                      options: CompileOptions | None = None, symbol: str | None = None) -> str:
        from pto_core.codegen.cstyle import kernel_symbol
        symbol = symbol or kernel_symbol(fn.name)
        self._smem_used = 0
        text = super().render_kernel(fn, module, options, symbol)
        smem = self.last_smem_bytes = self._smem_used
        if smem > self.smem_capacity:
            raise PTOBackendError(
                f"tiles need {smem} bytes of shared memory, more than the {self.smem_capacity} a "
                f"thread block can have on {self.arch}", function=fn.name)
        nargs = sum(2 if isinstance(p.type, MemRefType) else 1 for p in fn.params)
        threads = self.threads_for(fn, module)
        return text + (f"\n/* {nargs} argument slots, {threads} threads, {smem} bytes of shared "
                       f"memory per task */\nPTO_CUDA_KERNEL({symbol}, {nargs}, {threads}, {smem})\n")

    def _render_body_function(self, out: _Out, fn: Function, options: CompileOptions) -> None:
        # every body function sees the block's dynamic shared memory; tiles of callees get
        # offsets after their caller's (offsets keep counting across the whole file)
        start = len(out.lines)
        super()._render_body_function(out, fn, options)
        out.lines.insert(start + 1, "    extern __shared__ __align__(128) unsigned char _pto_smem[];")
        scalars = {loc.name for loc in fn.locals if not isinstance(loc.type, TileType)}
        for i in range(start + 2, len(out.lines)):   # scalars unused on some paths: no warning
            words = out.lines[i].split()
            if len(words) >= 3 and words[1] in scalars and words[2] == "=":
                out.lines[i] += f" (void){words[1]};"
                scalars.discard(words[1])

    # ---------------------------------------------------------------- element-wise groups
    def render_group(self, out: _Out, fn: Function, group: list[Instr]) -> None:
        """Threads over the elements of the group's shape; a 16-byte vector variant when the
        shapes allow and the pointers turn out aligned."""
        out("/* " + "; ".join(str(s) for s in group) + " */")
        rows, cols = self.group_shape(fn, group[0])
        ptrs = self._group_plan(fn, group)
        width = self._vector_width(fn, group)
        if width:
            cond = self._aligned_condition(fn, group, width)
            with out.block(f"if ({cond})"):
                self._vector_loop(out, fn, group, ptrs, rows, cols, width)
            with out.block("else"):
                self._scalar_loop(out, fn, group, ptrs, rows, cols)
        else:
            self._scalar_loop(out, fn, group, ptrs, rows, cols)
        out("__syncthreads();")

    def _scalar_loop(self, out: _Out, fn: Function, group: list[Instr], ptrs: dict,
                     rows: int, cols: int) -> None:
        with out.block(f"for (int _pto_i = threadIdx.x; _pto_i < {rows * cols}; "
                       f"_pto_i += blockDim.x)"):
            out(f"const int _pto_r = _pto_i / {cols}, _pto_c = _pto_i % {cols};")
            self._row_pointers(out, fn, group, ptrs)
            for s in group:
                out(self.element_stmt(fn, s, ptrs, "_pto_r", "_pto_c"))

    def _group_dtypes(self, fn: Function, group: list[Instr]) -> set[ElementType]:
        out: set[ElementType] = set()
        for s in group:
            for v in s.operands:
                t = fn.type_of(v) if isinstance(v, str) else None
                if isinstance(t, (TileType, MemRefType)):
                    out.add(t.dtype)
        return out

    def _vector_width(self, fn: Function, group: list[Instr]) -> int:
        """Elements per thread step so the widest element moves 16 bytes, if the group touches
        global memory and the row length is a multiple of it; else 0."""
        if not any(s.opdef.is_memory_op for s in group):
            return 0
        width = 16 // max(d.itemsize for d in self._group_dtypes(fn, group))
        _, cols = self.group_shape(fn, group[0])
        return width if width >= 2 and cols % width == 0 else 0

    def _aligned_condition(self, fn: Function, group: list[Instr], width: int) -> str:
        conds = []
        for s in group:
            if s.opdef.is_memory_op:
                mem = s.operands[1] if s.opdef.category is Category.LOAD else s.operands[0]
                vb = width * fn.type_of(mem).dtype.itemsize
                c = (f"(reinterpret_cast<uintptr_t>({mem}) % {vb} == 0 && "
                     f"_pto_ld_{mem} % {width} == 0)")
                if c not in conds:
                    conds.append(c)
        return " && ".join(conds)

    def _vector_loop(self, out: _Out, fn: Function, group: list[Instr], ptrs: dict,
                     rows: int, cols: int, width: int) -> None:
        per_row = cols // width
        with out.block(f"for (int _pto_i = threadIdx.x; _pto_i < {rows * per_row}; "
                       f"_pto_i += blockDim.x)"):
            out(f"const int _pto_r = _pto_i / {per_row}, _pto_c0 = (_pto_i % {per_row}) * {width};")
            self._row_pointers(out, fn, group, ptrs)
            run: list[Instr] = []         # consecutive compute ops share one unrolled loop

            def flush() -> None:
                if run:
                    out("#pragma unroll")
                    with out.block(f"for (int _pto_c = _pto_c0; _pto_c < _pto_c0 + {width}; "
                                   f"++_pto_c)"):
                        for s in run:
                            out(self.element_stmt(fn, s, ptrs, "_pto_r", "_pto_c"))
                    run.clear()

            for s in group:
                cat = s.opdef.category
                if cat in (Category.LOAD, Category.STORE):
                    flush()
                    tile = s.operands[0] if cat is Category.LOAD else s.operands[1]
                    vt = _VEC_TYPE[width * fn.type_of(tile).dtype.itemsize]
                    g = f"{ptrs[id(s)][0]} + _pto_c0"
                    sm = f"&{tile}[_pto_r][_pto_c0]"
                    if cat is Category.LOAD:
                        out(f"*reinterpret_cast<{vt}*>({sm}) = "
                            f"__ldg(reinterpret_cast<const {vt}*>({g}));")
                    else:
                        out(f"*reinterpret_cast<{vt}*>({g}) = "
                            f"*reinterpret_cast<const {vt}*>({sm});")
                else:
                    run.append(s)
            flush()

    # ---------------------------------------------------------------- block-level tile ops
    @staticmethod
    def _at(name: str) -> str:
        return f"&{name}[0][0]"

    @staticmethod
    def _block_step(out: _Out, s: Instr, call: str) -> None:
        """``s`` as one call every thread of the block makes; other threads read its result,
        hence the barrier."""
        out(f"/* {s} */")
        out(call)
        out("__syncthreads();")

    def render_reduce(self, out: _Out, fn: Function, s: Instr) -> None:
        dst, a = s.operands
        ta = fn.type_of(a)
        op = {"sum": "pto::SumOp()", "max": "pto::MaxOp()", "min": "pto::MinOp()"}[s.opdef.reduce]
        kind = "row_reduce" if s.opdef.category is Category.ROW_REDUCE else "col_reduce"
        self._block_step(out, s, f"pto::{kind}<{self.ctype(ta.dtype)}, {ta.rows}, {ta.cols}>"
                                 f"({self._at(dst)}, {self._at(a)}, {op});")

    def uses_tensor_cores(self, fn: Function, s: Instr) -> bool:
        """f16/bf16 inputs, sides multiple of 16, accumulator f32 (or f16 for f16)."""
        dst, a, b = s.operands[0], s.operands[-2], s.operands[-1]
        td, ta, tb = fn.type_of(dst), fn.type_of(a), fn.type_of(b)
        if ta.dtype not in (E.F16, E.BF16):
            return False
        if td.dtype is not E.F32 and not (ta.dtype is E.F16 and td.dtype is E.F16):
            return False
        return td.rows % 16 == 0 and td.cols % 16 == 0 and ta.cols % 16 == 0

    def render_matmul(self, out: _Out, fn: Function, s: Instr) -> None:
        ops = s.named_operands()
        dst, acc, a, b = ops["dst"], ops.get("acc"), ops["a"], ops["b"]
        if dst in (a, b):
            raise PTOBackendError("the destination of a matmul must not be one of its inputs",
                                  function=fn.name, instruction=str(s))
        td, ta = fn.type_of(dst), fn.type_of(a)
        impl = "matmul_wmma" if self.uses_tensor_cores(fn, s) else "matmul_simt"
        self._block_step(out, s, f"pto::{impl}<{self.ctype(ta.dtype)}, {self.ctype(td.dtype)}, "
                                 f"{td.rows}, {ta.cols}, {td.cols}, {'true' if acc else 'false'}>("
                                 f"{self._at(dst)}, {self._at(acc) if acc else 'nullptr'}, "
                                 f"{self._at(a)}, {self._at(b)});")

    def render_transpose(self, out: _Out, fn: Function, s: Instr) -> None:
        dst, a = s.operands
        ta = fn.type_of(a)
        self._block_step(out, s, f"pto::transpose<{self.ctype(ta.dtype)}, {ta.rows}, {ta.cols}>"
                                 f"({self._at(dst)}, {self._at(a)});")

    def render_convert(self, out: _Out, fn: Function, s: Instr) -> None:
        dst, a = s.operands
        td, ta = fn.type_of(dst), fn.type_of(a)
        self._block_step(out, s, f"pto::convert<{self.ctype(td.dtype)}, {self.ctype(ta.dtype)}, "
                                 f"{ta.rows * ta.cols}>({self._at(dst)}, {self._at(a)});")
