"""PTO-ISA C++ kernels for Ascend NPUs: a specialisation of the core's C-style renderer.

The shared :class:`pto_core.codegen.cstyle.CStyleRenderer` keeps what every C-family backend
shares (statement structure, loops, IF, scalar instructions, literals, parameter naming). This
subclass overrides the templates that differ on Ascend:

* types and qualifiers: ``__gm__`` pointers, ``AICORE`` functions, an
  ``extern "C" __global__ AICORE void name(...)`` entry (the file CANN's ccec compiles);
* tiles: each IR tile becomes one or more ``pto::Tile<TileType::..., T, R, C, ...>`` objects
  placed with ``TASSIGN`` at offsets from the buffer plan (UB for vector tiles; L1, L0A, L0B and
  L0C for the cube path), checked against the architecture's capacities;
* instructions: one PTO-ISA call per IR instruction (TLOAD/TSTORE through ``GlobalTensor``
  views, TADD ..., TROWSUM with its scratch tile, TMATMUL through Mat->Left/Right TMOVs into an
  Acc tile); element-wise ops the library lacks (TSILU, TGELU) are lowered from the instruction
  table's expression trees onto library instructions;
* synchronisation: ``set_flag/wait_flag`` pairs wherever data crosses pipes (MTE2 -> V -> MTE3,
  MTE2 -> MTE1 -> M -> FIX), found by tracking which pipe last touched each byte range;
  ``pipe_barrier(PIPE_ALL)`` around loops and branches and at the end.

Everything an architecture decides comes from :class:`pto_ascend_common.arch.AscendArch`.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> from pto_ascend_common.arch import A5
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.F32)
...      .memref("o", M.GLOBAL, T.F32).tile("x", 8, 16, T.F32).load("x", "a").exp("x", "x")
...      .store("o", "x").build())
>>> src = AscendRenderer(A5).render_kernel(f, m)
>>> 'extern "C" __global__ AICORE void pto_aicore_k(__gm__ float* pto_v_a' in src
True
>>> "TEXP(pto_v_x, pto_v_x);" in src
True
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from pto_core.codegen.cnames import c_names, user_names, user_text
from pto_core.codegen.cstyle import CStyleRenderer, _Out
from pto_core.errors import PTOBackendError
from pto_core.ir import (Break, Call, Category, Continue, ElementType, For, Function, If, Instr,
                         Local, MemRefType, Module, Return, TileType, While)
from pto_core.ir.ops import INTERLEAVES, OPS, PART_ARGS, RANDOM_WORDS, Expr, indexed_tables
from pto_core.options import CompileOptions

from .arch import AscendArch

from pto_core.passes.buffer_reuse import plan_buffers

E = ElementType

def _isa_by_kind(category: Category) -> dict[str, str]:
    """Expression kind -> the library instruction of the table row of ``category`` that is that
    one kind applied to its inputs (element-wise: unary and tile-tile; tile-scalar)."""
    return {op.single_kind: op.isa for op in OPS.values()
            if op.isa and op.single_kind and op.category is category}


#: expression kinds -> library instructions, on tiles (unary, tile-tile) and a tile and a scalar
ISA_TILE = _isa_by_kind(Category.ELEMENTWISE)
ISA_TILE_SCALAR = _isa_by_kind(Category.TILE_SCALAR)

#: on-chip buffer of each tile kind, and the placement alignment used there
BUFFER_OF = {"Vec": "UB", "Mat": "L1", "Left": "L0A", "Right": "L0B", "Acc": "L0C",
             "BiasMat": "L1", "Bias": "BT"}
ALIGN = {"UB": 64, "L1": 512, "L0A": 512, "L0B": 512, "L0C": 1024, "BT": 64}


def aicore_symbol(function_name: str) -> str:
    """The ``__global__`` AICORE entry of an InCore function's kernel (namespaced like every
    generated symbol, :mod:`pto_core.codegen.cnames`).

    >>> aicore_symbol("exit")
    'pto_aicore_exit'
    """
    return f"pto_aicore_{function_name}"


@dataclass
class PhysTile:
    """One ``pto::Tile`` object of the generated kernel."""

    name: str
    kind: str                  # Vec | Mat | Left | Right | Acc | Bias (and BiasMat: the
                               # bias row's one-row L1 copy)
    dtype: ElementType
    rows: int                  # storage shape (padded to the layout's alignment)
    cols: int
    valid_rows: int            # the IR tile's shape
    valid_cols: int
    cpp: str                   # the C++ type
    offset: int = 0
    alias_of: str | None = None    # another view of this tile's bytes (placed with it)

    @property
    def buffer(self) -> str:
        return BUFFER_OF[self.kind]

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.dtype.itemsize


#: TPRINT's format attribute -> the library's PrintFormat (include/pto/common/type.hpp)
PRINT_FORMAT_NAMES = {"w8p4": "Width8_Precision4", "w8p2": "Width8_Precision2",
                      "w10p6": "Width10_Precision6"}


@dataclass
class _Step:
    """One emitted instruction: its text, its pipe and the tiles it reads and writes."""

    text: str
    pipe: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    barrier: bool = False          # the text starts with pipe_barrier(PIPE_ALL)


@dataclass
class _Sync:
    """Which pipe last touched which byte range, and which pipe pairs are ordered since."""

    log: list = field(default_factory=list)        # (buffer, lo, hi, pipe, write, seq)
    synced: dict = field(default_factory=dict)     # (src, dst) -> seq
    seq: int = 1


@dataclass(frozen=True)
class KernelFacts:
    """What rendering one kernel decided, beside its text: the physical tiles with their
    offsets, the UB bytes its vector tiles occupy (what the runtime records per task), the GM
    workspace its last parameter must point to (0: none), and the ``(C type, name)`` of every
    parameter of its ``__global__`` entry."""

    tiles: Mapping[str, PhysTile]
    ub_bytes: int
    workspace_bytes: int
    params: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class AscendRenderer:
    """Renders InCore functions as PTO-ISA C++ kernels for ``arch``. It keeps nothing between
    kernels: each call plans and renders one function afresh (:class:`_KernelRenderer`)."""

    arch: AscendArch
    suffix = ".cpp"

    def render(self, fn: Function, module: Module | None = None,
               options: CompileOptions | None = None) -> tuple[str, KernelFacts]:
        """The kernel source of ``fn`` (static AICORE body functions and the ``__global__``
        entry) and the facts of its plan."""
        k = _KernelRenderer(self.arch, options or CompileOptions())
        text = k.render_kernel(fn, module, options)
        return text, k.facts(k.rendered)

    def render_kernel(self, fn: Function, module: Module | None = None,
                      options: CompileOptions | None = None) -> str:
        """The kernel source alone (:meth:`render`)."""
        return self.render(fn, module, options)[0]

    def facts(self, fn: Function, options: CompileOptions | None = None) -> KernelFacts:
        """The facts of ``fn``'s plan, without rendering it; a buffer that overflows is a
        PTOBackendError naming the function and its largest tiles."""
        return _KernelRenderer(self.arch, options or CompileOptions()).facts(fn)



@dataclass(frozen=True)
class KernelEntry:
    """How a binding reaches one kernel: the InCore function (under its C names), the symbol
    and parameter list of its ``__global__`` entry, and the arguments that call it from the
    runtime's argument slots ``args``."""

    function: Function
    symbol: str
    params: str
    arguments: str


def kernel_entries(arch: AscendArch, module: Module, kernels: Sequence[Any] = (),
                   pointer: str = "{0}*", workspace: str = "") -> list[KernelEntry]:
    """The :class:`KernelEntry` of each InCore function of ``module``, from the facts its
    rendering returned (``kernels``: the :class:`~pto_core.hookspecs.KernelSource` list a
    binding receives) or, for a kernel not among them, from planning it now. ``pointer``
    formats a tensor's pointer type from its element type; ``workspace`` formats the C
    expression of a kernel's GM workspace from its byte count."""
    given = {k.function: k.facts for k in kernels if isinstance(k.facts, KernelFacts)}
    out = []
    for fn in c_names(module).functions.values():
        if not fn.is_incore:
            continue
        r = _KernelRenderer(arch, CompileOptions())
        facts = given.get(fn.name) or r.facts(fn)
        params = ", ".join(f"{t} {n}" for t, n in facts.params) or "void"
        args = r.abi_arguments(fn, pointer)
        if facts.workspace_bytes:
            args.append(workspace.format(facts.workspace_bytes))
        out.append(KernelEntry(fn, aicore_symbol(fn.name), params, ", ".join(args)))
    return out


class _KernelRenderer(CStyleRenderer):
    """Renders one InCore function as a PTO-ISA C++ kernel for ``arch``: an object per kernel,
    holding that kernel's plan while it is rendered."""

    suffix = ".cpp"
    stack_tile_bytes = None         # tiles are TASSIGNed into the on-chip buffers (planned)

    def __init__(self, arch: AscendArch, options: CompileOptions) -> None:
        self.arch = arch
        self.name = arch.name
        self._tiles: dict[str, PhysTile] = {}
        self._roles: dict[str, set[str]] = {}
        self._pending_acc: dict[str, tuple] = {}
        self._sync = _Sync()
        self._fn: Function | None = None
        self._options = options
        self._ws: dict[str, int] = {}         # tile -> byte offset in the GM workspace
        self._ws_size = 0
        self._vec_written: set[str] = set()
        self._cube_pad = 16

    # ---------------------------------------------------------------- templates: types
    CTYPES = {**CStyleRenderer.CTYPES, E.F16: "half", E.BF16: "bfloat16_t"}

    def prelude(self) -> str:
        return ("#include <stdint.h>\n#include <pto/pto-inst.hpp>\n\nusing namespace pto;\n")

    def body_qualifiers(self) -> str:
        return "static AICORE inline"

    def restrict(self) -> str:
        return ""

    def _param_decls(self, fn: Function) -> list[str]:
        if self._fn is not fn:
            self._begin(fn)
        decls = []
        for p in fn.params:
            if isinstance(p.type, MemRefType):
                decls += [f"__gm__ {self.ctype(p.type.dtype)}* {p.name}", f"int64_t _pto_ld_{p.name}"]
            else:
                decls.append(f"{self.scalar_ctype(p.type.dtype)} {p.name}")
        if self._ws_size:
            # global-memory workspace through which cube results reach the vector core (A2/A3)
            decls.append("__gm__ uint8_t* _pto_ws")
        return decls

    def workspace_bytes(self, fn: Function) -> int:
        """Bytes of GM workspace the kernel's last parameter must point to (0: none)."""
        if self._fn is not fn:
            self._begin(fn)
        return self._ws_size

    def kernel_params(self, fn: Function) -> list[tuple[str, str]]:
        """(C type, name) of every parameter of the ``__global__`` kernel, in order."""
        out = []
        for decl in self._param_decls(fn):
            ctype, name = decl.rsplit(" ", 1)
            out.append((ctype, name))
        return out

    # ---------------------------------------------------------------- whole kernels
    def render_kernel(self, fn: Function, module: Module | None = None,
                      options: CompileOptions | None = None, symbol: str | None = None) -> str:
        """The kernel source: static AICORE body functions and the ``__global__`` entry."""
        options = options or CompileOptions()
        self._options = options
        with user_names():
            return self._render_kernel(*self.c_named(fn, module), options)

    def _render_kernel(self, fn: Function, module: Module | None,
                       options: CompileOptions) -> str:
        out = _Out()
        out.comment(f"Generated by PTO ({self.name} backend, {self.arch.chips}, "
                    f"--cce-aicore-arch={self.arch.cce_arch}) from InCore function '{fn.name}'. "
                    "Do not edit.")
        for line in self.prelude().rstrip("\n").split("\n"):
            out(line)
        out()
        for st in fn.walk():
            if isinstance(st, Call):
                raise PTOBackendError(f"InCore call of '{st.callee}' was not inlined; the Ascend "
                                      f"backends need the inline pass (-O1 or higher)",
                                      function=fn.name, instruction=str(st))
        self._render_body_function(out, fn, options)
        out()
        params = ", ".join(f"{t} {n}" for t, n in self.kernel_params(fn)) or "void"
        with out.block(f'extern "C" __global__ AICORE void {aicore_symbol(fn.name)}({params})'):
            args = ", ".join(n for _, n in self.kernel_params(fn))
            out(f"(void)_pto_body_{fn.name}({args});")
        return "\n".join(out.lines) + "\n"

    def _render_body_function(self, out: _Out, fn: Function, options: CompileOptions) -> None:
        self._begin(fn)
        params = ", ".join(self._param_decls(fn)) or "void"
        with out.block(f"{self.body_qualifiers()} int32_t _pto_body_{fn.name}({params})"):
            for t in self._tiles.values():
                out(f"{t.cpp} {t.name};")
                out(f"TASSIGN({t.name}, 0x{t.offset:x});")
            for loc in fn.locals:
                if not isinstance(loc.type, TileType):
                    ct = self.scalar_ctype(loc.type.dtype)
                    out(f"{ct} {loc.name} = {self.literal(0, ct)};")
            for p in fn.params:
                if isinstance(p.type, MemRefType):
                    out(f"(void)_pto_ld_{p.name};")
            self.render_body(out, fn, fn.body, options)
            self._barrier(out)
            out("return 0;")

    # ---------------------------------------------------------------- buffer plan
    @property
    def rendered(self) -> Function:
        """The function (under its C names) this object planned last."""
        assert self._fn is not None, "nothing planned yet"
        return self._fn

    def facts(self, fn: Function) -> KernelFacts:
        """The plan of ``fn`` (made now unless this object rendered or planned ``fn`` last)."""
        if self._fn is not fn:
            self._begin(fn)
        ub = max((t.offset + t.nbytes for t in self._tiles.values() if t.buffer == "UB"),
                 default=0)
        return KernelFacts(dict(self._tiles), ub, self._ws_size, tuple(self.kernel_params(fn)))

    def _begin(self, fn: Function) -> None:
        """Roles, physical tiles (scratch included, found by a dry run of the lowering) and
        their offsets: a sequential plan per buffer, checked against the capacities."""
        self._fn = fn
        self._roles = self._analyse_roles(fn)
        self._cube_pad = max([16] + [32 // tt.dtype.itemsize for n, tt in fn.tiles.items()
                                     if self._roles.get(n, set()) & {"Left", "Right", "Acc"}])
        self._tiles = {}
        self._pending_acc = {}
        self._ws, self._ws_size = {}, 0
        for name, tt in fn.tiles.items():
            for kind in sorted(self._roles.get(name, {"Vec"})):
                self._phys(name, kind, tt)
        for s in fn.walk():
            if isinstance(s, Instr) and s.opdef.is_tile_op:
                self._lower(fn, s)
        self._pending_acc = {}
        self._sync = _Sync()
        used: dict[str, int] = {}
        placed: set[str] = set()
        # the IR's vector tiles go where the core's buffer planner puts them (with reuse of
        # tiles whose lifetimes do not overlap); scratch and cube tiles follow sequentially
        vec = {n: self._tiles[n] for n in fn.tiles if n in self._tiles}
        if vec:
            padded = replace(fn, locals=tuple(
                Local(l.name, TileType(vec[l.name].rows, vec[l.name].cols, l.type.dtype))
                for l in fn.locals if l.name in vec))
            bp = plan_buffers(padded, reuse=self._options.enabled("buffer_reuse"),
                              align=ALIGN["UB"])
            for n, t in vec.items():
                t.offset = bp.offset(n)
            placed.update(vec)
            used["UB"] = bp.total_bytes
        for t in self._tiles.values():
            if t.name in placed or t.alias_of is not None:
                continue
            a = ALIGN[t.buffer]
            off = -(-used.get(t.buffer, 0) // a) * a
            t.offset = off
            used[t.buffer] = off + t.nbytes
        for t in self._tiles.values():
            if t.alias_of is not None:
                t.offset = self._tiles[t.alias_of].offset
        for buf, n in used.items():
            cap = self.arch.capacities[buf]
            if n > cap:
                big = sorted((t for t in self._tiles.values() if t.buffer == buf),
                             key=lambda t: -t.nbytes)[:3]
                names = ", ".join(f"{t.name} ({t.valid_rows}x{t.valid_cols} {t.dtype.value}, "
                                  f"{t.nbytes} B)" for t in big)
                raise PTOBackendError(
                    f"tiles need {n} bytes of {buf} but {self.arch.name} has {cap}; "
                    f"largest: {names}", function=fn.name)

    def _analyse_roles(self, fn: Function) -> dict[str, set[str]]:
        self._vec_written = set()
        roles: dict[str, set[str]] = {}
        cube_only: set[str] = set()
        for s in fn.walk():
            if not isinstance(s, Instr) or not s.opdef.is_tile_op:
                continue
            cat = s.opdef.category
            if cat is Category.MATMUL:
                ops = s.named_operands()
                roles.setdefault(ops["a"], set()).add("Left")
                roles.setdefault(ops["b"], set()).add("Right")
                roles.setdefault(ops["dst"], set()).add("Acc")
                if "acc" in ops:
                    roles.setdefault(ops["acc"], set()).add("Acc")
                if "bias" in ops:           # GM -> L1 (one row) -> bias table
                    roles.setdefault(ops["bias"], set()).update(("Bias", "BiasMat"))
                cube_only.update(v for v in s.operands if isinstance(v, str))
        for s in fn.walk():
            if not isinstance(s, Instr) or not s.opdef.is_tile_op:
                continue
            cat = s.opdef.category
            if cat is Category.MATMUL:
                continue
            tiles = [v for v, spec in zip(s.operands, s.opdef.operands)
                     if spec.is_tile]
            for t in tiles:
                if cat in (Category.LOAD, Category.STORE) and t in cube_only:
                    continue
                roles.setdefault(t, set()).add("Vec")
            if cat not in (Category.STORE, Category.LOAD):
                ops = s.named_operands()
                self._vec_written.update(ops[n] for n in s.opdef.tile_outputs)
        # a product that another matmul multiplies, or that adds an accumulator of the vector
        # side (_lower_matmul's TADD), is a vector tile as well: the product moves L0C -> UB
        # (_acc_out), and from there to L1 where a matmul reads it (the TADD's sum is there).
        # So is an accumulator that a matmul also multiplies (TMATMUL_ACC %u, %y, %w, %y): its
        # load cannot fold into the sum's atomic-add store, L1 needs it
        products = [s.named_operands() for s in fn.walk()
                    if isinstance(s, Instr) and s.opdef.category is Category.MATMUL]
        changed = True
        while changed:
            changed = False
            for ops in products:
                r, acc = roles[ops["dst"]], ops.get("acc")
                if "Vec" not in r and (r & {"Left", "Right"} or (
                        acc is not None and "Vec" in roles.get(acc, ()))):
                    r.add("Vec")
                    changed = True
                if acc is not None and "Vec" not in roles[acc] and roles[acc] & {"Left", "Right"}:
                    roles[acc].add("Vec")
                    changed = True
        self._vec_written.update(ops["dst"] for ops in products if "Vec" in roles[ops["dst"]])
        for name, r in roles.items():
            if "Left" in r or "Right" in r:
                r.add("Mat")
        return roles

    def _phys(self, name: str, kind: str, tt: TileType) -> PhysTile:
        suffix = {"Vec": "", "Mat": "_l1", "Left": "_l0a", "Right": "_l0b", "Acc": "_l0c",
                  "BiasMat": "_l1row", "Bias": "_bt"}[kind]
        pname = name + suffix
        if pname in self._tiles:
            return self._tiles[pname]
        T = self.ctype(tt.dtype)
        size = tt.dtype.itemsize
        R, C = tt.rows, tt.cols
        cube = self._roles.get(name, set()) & {"Left", "Right", "Acc", "Mat"}
        if kind in ("Bias", "BiasMat"):
            # one row as wide as the product's padded columns (the bias table moves
            # 64-byte bursts: TMov.hpp "col * sizeof(srcDType) must be aligned to 64")
            loc = "Bias" if kind == "Bias" else "Mat"
            rows, cols = 1, -(-C // self._cube_pad) * self._cube_pad
            cpp = f"Tile<TileType::{loc}, {T}, 1, {cols}, BLayout::RowMajor, 1, {C}>"
        elif kind == "Vec" and not cube:
            if (C * size) % 32 == 0:
                cpp = f"Tile<TileType::Vec, {T}, {R}, {C}, BLayout::RowMajor, {R}, {C}>"
                rows, cols = R, C
            elif C == 1 and (R * size) % 32 == 0:
                cpp = f"Tile<TileType::Vec, {T}, {R}, 1, BLayout::ColMajor, {R}, 1>"
                rows, cols = R, 1
            else:
                cols = -(-C * size // 32) * 32 // size       # pad rows to 32 bytes
                rows = R
                cpp = f"Tile<TileType::Vec, {T}, {R}, {cols}, BLayout::RowMajor, {R}, {C}>"
        else:
            # cube tiles are fractal: pad every dimension to the 16 x (32 B) boxes of the
            # narrowest cube element type, so Left/Right/Acc shapes agree
            p = self._cube_pad
            rows, cols = -(-R // p) * p, -(-C // p) * p
            if kind == "Vec":
                cpp = f"Tile<TileType::Vec, {T}, {rows}, {cols}, BLayout::RowMajor, {R}, {C}>"
            elif kind == "Mat":
                cpp = (f"Tile<TileType::Mat, {T}, {rows}, {cols}, BLayout::ColMajor, {R}, {C}, "
                       f"SLayout::RowMajor, 512>")
            elif kind == "Left":
                outer = "ColMajor" if self.arch.left_col_major else "RowMajor"
                cpp = (f"Tile<TileType::Left, {T}, {rows}, {cols}, BLayout::{outer}, {R}, {C}, "
                       f"SLayout::RowMajor, 512>")
            elif kind == "Right":
                cpp = (f"Tile<TileType::Right, {T}, {rows}, {cols}, BLayout::RowMajor, {R}, {C}, "
                       f"SLayout::ColMajor, 512>")
            else:
                cpp = (f"Tile<TileType::Acc, {T}, {rows}, {cols}, BLayout::ColMajor, {R}, {C}, "
                       f"SLayout::RowMajor, 1024>")
        t = PhysTile(pname, kind, tt.dtype, rows, cols, R, C, cpp)
        self._tiles[pname] = t
        return t

    def _row_view(self, name: str, tt: TileType) -> str:
        """The tile to name in an element-wise instruction: the tile itself, or for an R x 1
        column-major tile (R contiguous elements) a 1 x R row-major view of the same bytes,
        since the library's element-wise instructions take row-major tiles only
        (docs/isa/TADDS.md: "Tile layout must be row-major")."""
        t = self._phys(name, "Vec", tt)
        if "BLayout::ColMajor" not in t.cpp or t.kind != "Vec":
            return t.name
        view = f"{t.name}_row"
        if view not in self._tiles:
            T = self.ctype(tt.dtype)
            self._tiles[view] = PhysTile(
                view, "Vec", tt.dtype, 1, t.rows, 1, t.valid_rows,
                f"Tile<TileType::Vec, {T}, 1, {t.rows}, BLayout::RowMajor, 1, {t.valid_rows}>",
                alias_of=t.name)
        return view

    def _row_copy(self, fn: Function, a_name: str, d_name: str, a: str, d: str) -> _Step | None:
        """TTRANS between a 1 x R row and an R x 1 column-major tile, as a TMOV: both hold
        the same R contiguous elements, and the library's TTRANS takes row-major tiles only
        (an R x 1 column-major source or destination does not compile). None for any other
        pair of shapes."""
        ta, td = fn.type_of(a_name), fn.type_of(d_name)
        if ta.rows == 1 and td.cols == 1:
            a, d = a, self._row_view(d_name, td)
        elif ta.cols == 1 and td.rows == 1:
            a, d = self._row_view(a_name, ta), d
        else:
            return None
        if a == self._phys(a_name, "Vec", ta).name and d == self._phys(d_name, "Vec", td).name:
            return None                                 # neither is column-major
        sa, sd = self._tiles[a], self._tiles[d]
        if (sa.rows, sa.cols) != (sd.rows, sd.cols):
            return None
        return _Step(f"TMOV({d}, {a});", "V", (a,), (d,))

    def _row_block(self, fn: Function, name: str, index: int = 60) -> tuple[str, list[_Step]]:
        """The per-row operand of a TROWEXPAND* instruction, as the library takes it
        (docs/isa/TROWEXPANDADD.md): a column-major R x 1 tile ("Mode 1") as it is; a padded
        row-major one (R x 1 values in 32-byte rows) first broadcast by TROWEXPAND into a
        scratch R x (32 B) block per row ("Mode 2": the block repeats along the row; scratch
        ``index``, one per operand of an instruction)."""
        tt = fn.type_of(name)
        t = self._phys(name, "Vec", tt)
        if "BLayout::ColMajor" in t.cpp or t.valid_cols != 1:
            return t.name, []
        blk = self._scratch(tt, index, rows=tt.rows, cols=32 // tt.dtype.itemsize)
        return blk, [_Step(f"TROWEXPAND({blk}, {t.name});", "V", (t.name,), (blk,))]

    def _scratch(self, like: TileType, index: int, rows: int | None = None,
                 cols: int | None = None, storage: str | None = None) -> str:
        """A vector scratch tile (shape of ``like`` unless given), shared by instructions;
        with ``storage`` (a vector tile's name) stored like that tile, so the two can be
        copied into each other (TMOV takes tiles of one storage shape): a vector tile that is
        also a cube operand keeps the cube's padded rows."""
        R, C = rows or like.rows, cols or like.cols
        st = self._tiles[storage] if storage is not None else None
        if st is None or "BLayout::ColMajor" in st.cpp or (st.rows, st.cols) == (R, C):
            name = f"_pto_tmp{index}_{R}x{C}_{like.dtype.value}"
            if name not in self._tiles:
                self._phys(name, "Vec", TileType(R, C, like.dtype))
            return name
        name = f"_pto_tmp{index}_{R}x{C}_in_{st.rows}x{st.cols}_{like.dtype.value}"
        if name not in self._tiles:
            self._tiles[name] = PhysTile(
                name, "Vec", like.dtype, st.rows, st.cols, R, C,
                f"Tile<TileType::Vec, {self.ctype(like.dtype)}, {st.rows}, {st.cols}, "
                f"BLayout::RowMajor, {R}, {C}>")
        return name

    # ---------------------------------------------------------------- statements
    def render_stmt(self, out: _Out, fn: Function, s, options: CompileOptions) -> None:
        if isinstance(s, (For, If, While, Call)):
            # control flow: every pipe drains before and after, so bodies start clean
            self._barrier(out)
            super().render_stmt(out, fn, s, options)
            self._barrier(out)
            return
        if isinstance(s, (Break, Continue)):
            # the jump skips the drain at the end of the loop body
            self._barrier(out, force=True)
            super().render_stmt(out, fn, s, options)
            return
        if isinstance(s, Return):
            self._barrier(out, force=True)
            out("return 0;")
            return
        if s.opdef.category is Category.SCALAR:
            super().render_stmt(out, fn, s, options)
            return
        self._emit(out, fn, s)

    def render_body(self, out: _Out, fn: Function, body: Sequence, options: CompileOptions) -> None:
        # one library instruction per IR instruction, in program order (no loop fusion: the
        # tile instructions are the loops)
        for s in body:
            self.render_stmt(out, fn, s, options)
        self._barrier(out)

    def render_group(self, out: _Out, fn: Function, group: list[Instr]) -> None:
        for s in group:
            self._emit(out, fn, s)

    def render_reduce(self, out: _Out, fn: Function, s: Instr) -> None:
        self._emit(out, fn, s)

    render_matmul = render_transpose = render_convert = render_indexed = render_reduce
    render_print = render_reduce

    # ---------------------------------------------------------------- synchronisation
    def _barrier(self, out: _Out, force: bool = False) -> None:
        if self._sync.log or force:
            out("pipe_barrier(PIPE_ALL);")
        self._sync.log.clear()

    def _emit(self, out: _Out, fn: Function, s: Instr) -> None:
        out(f"// {user_text(str(s))}")
        for step in self._lower(fn, s):
            self._order(out, step)
            out(step.text)

    def _order(self, out: _Out, step: _Step) -> None:
        """Insert set_flag/wait_flag for every earlier access of another pipe this step
        depends on (read after write, write after read or write)."""
        st = self._sync
        if step.barrier:
            st.log.clear()
        ranges = [(self._tiles[t], False) for t in step.reads] + \
                 [(self._tiles[t], True) for t in step.writes]
        need: list[str] = []
        for t, write in ranges:
            lo, hi = t.offset, t.offset + t.nbytes
            for buf, alo, ahi, pipe, awrite, seq in st.log:
                if buf != t.buffer or ahi <= lo or hi <= alo or pipe == step.pipe:
                    continue
                if not (write or awrite):
                    continue
                if st.synced.get((pipe, step.pipe), 0) <= seq and pipe not in need:
                    need.append(pipe)
        for src in need:
            out(f"set_flag(PIPE_{src}, PIPE_{step.pipe}, EVENT_ID0);")
            out(f"wait_flag(PIPE_{src}, PIPE_{step.pipe}, EVENT_ID0);")
            st.synced[(src, step.pipe)] = st.seq
            st.seq += 1
        for t, write in ranges:
            st.log.append((t.buffer, t.offset, t.offset + t.nbytes, step.pipe, write, st.seq))
        st.seq += 1

    # ---------------------------------------------------------------- lowering
    def _err(self, fn: Function, s: Instr, msg: str) -> PTOBackendError:
        return PTOBackendError(f"{msg} on {self.arch.name}", function=fn.name, instruction=str(s))

    def _gm_view(self, fn: Function, mem: str, tile: PhysTile, row, col) -> str:
        """A GlobalTensor over the R x C window of ``mem`` at tile offset (row, col)."""
        T = self.ctype(fn.type_of(mem).dtype)
        R, C = tile.valid_rows, tile.valid_cols
        dn = tile.kind == "Vec" and "ColMajor" in tile.cpp
        layout = ", Layout::DN" if dn else ""
        shape, stride = f"Shape<1, 1, 1, {R}, {C}>", "Stride<1, 1, 1, DYNAMIC, 1>"
        off = f"({self.index(row)}) * {R} * _pto_ld_{mem} + ({self.index(col)}) * {C}"
        return (f"GlobalTensor<{T}, {shape}, {stride}{layout}> _pto_gm({mem} + {off}, {shape}(), "
                f"{stride}(_pto_ld_{mem}));")

    def _lower(self, fn: Function, s: Instr) -> list[_Step]:
        cat = s.opdef.category
        ops = s.named_operands()
        tt = fn.type_of(s.operands[0]) if cat is not Category.STORE else fn.type_of(s.operands[1])
        roles = self._roles
        if cat is Category.LOAD:
            x, mem = ops["dst"], ops["src"]
            steps = []
            r = roles.get(x, {"Vec"})
            if "Acc" in r and "Vec" not in r:
                # C += A @ B against global memory: the load folds into an atomic-add store
                self._pending_acc[x] = (mem, ops["row"], ops["col"], x)
                return []
            for kind in ("Mat", "BiasMat", "Vec"):
                if kind in r:
                    t = self._phys(x, kind, tt)
                    steps.append(_Step("{ " + self._gm_view(fn, mem, t, ops["row"], ops["col"])
                                       + f" TLOAD({t.name}, _pto_gm); }}", "MTE2", (), (t.name,)))
            return steps
        if cat is Category.STORE:
            x, mem = ops["src"], ops["dst"]
            r = roles.get(x, {"Vec"})
            if "Acc" in r and "Vec" not in r:
                t = self._phys(x, "Acc", tt)
                pend = self._pending_acc.pop(x, None)
                view = self._gm_view(fn, mem, t, ops["row"], ops["col"])
                if pend is not None:
                    if pend[:3] != (mem, ops["row"], ops["col"]):
                        m, r, c, acc = pend
                        raise self._err(fn, s, (
                            f"the sum '{x}' of TMATMUL_ACC onto accumulator '{acc}' (loaded "
                            f"from {m}[{r}, {c}]) is stored to {mem}[{ops['row']}, {ops['col']}], "
                            f"not where the accumulator was loaded from: the cube unit adds a "
                            f"product to an accumulator in global memory with an atomic-add "
                            f"store into that window"))
                    return [_Step("{ " + view + f" TSTORE<decltype({t.name}), decltype(_pto_gm), "
                                  f"AtomicType::AtomicAdd>(_pto_gm, {t.name}); }}", "FIX",
                                  (t.name,))]
                return [_Step("{ " + view + f" TSTORE(_pto_gm, {t.name}); }}", "FIX", (t.name,))]
            t = self._phys(x, "Vec", tt)
            return [_Step("{ " + self._gm_view(fn, mem, t, ops["row"], ops["col"])
                          + f" TSTORE(_pto_gm, {t.name}); }}", "MTE3", (t.name,))]
        if cat is Category.MATMUL:
            return self._lower_matmul(fn, s, ops)
        if cat is Category.INDEXED:
            return self._lower_indexed(fn, s, ops)
        if s.opdef.isa in self.arch.lacks:
            raise self._err(fn, s, f"{s.op} is not available (docs/isa/{s.op}.md)")
        # vector instructions from here on: the vector unit computes in its own types only
        types = self.arch.vector_types
        for v, spec in zip(s.operands, s.opdef.operands):
            if spec.is_tile and fn.type_of(v).dtype not in types:
                raise self._err(fn, s, f"the vector unit has no {fn.type_of(v).dtype.value} "
                                        f"arithmetic (it computes in "
                                        f"{', '.join(t.value for t in types)})")
        if cat is Category.HINT:    # TPREFETCH: the library's DMA of the window into dst,
            t = self._phys(ops["dst"], "Vec", tt)      # a staging tile nothing else reads
            return [_Step("{ " + self._gm_view(fn, ops["src"], t, ops["row"], ops["col"])
                          + f" TPREFETCH({t.name}, _pto_gm); }}", "MTE2", (), (t.name,))]
        allowed = self.arch.isa_types.get(s.opdef.isa or "")
        reduces = cat in (Category.ROW_REDUCE, Category.COL_REDUCE)   # (source types: below)
        data = fn.type_of(ops[s.opdef.data_operand]).dtype       # (a compare's: its source's)
        if allowed == ():
            raise self._err(fn, s, f"{s.op} has no vector-tile form")
        if allowed is not None and not reduces and data not in allowed:
            raise self._err(fn, s, f"{s.opdef.isa or s.op} takes {', '.join(t.value for t in allowed)} tiles, "
                                   f"not {data.value},")
        if cat is Category.DEBUG:   # TPRINT of a Vec tile: the scalar unit prints it after
            t = self._phys(ops["src"], "Vec", tt).name      # the library's barrier
            fmt = PRINT_FORMAT_NAMES[s.attr("format")]
            return [_Step(f"pipe_barrier(PIPE_ALL); TPRINT<PrintFormat::{fmt}>({t});", "S",
                          (t,), (), barrier=True)]
        dst = ops["dst"]
        d = self._phys(dst, "Vec", tt).name
        vec = lambda n: self._phys(n, "Vec", fn.type_of(n)).name  # noqa: E731
        if cat in (Category.ELEMENTWISE, Category.TILE_SCALAR):
            vec = lambda n: self._row_view(n, fn.type_of(n))  # noqa: E731
            d = vec(dst)
        if cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
            a = vec(ops["a"])
            ta = fn.type_of(ops["a"])
            allowed = self.arch.reduce_types(s.op)
            if ta.dtype not in allowed:
                names = [t.value for t in allowed]
                raise self._err(fn, s, f"{s.op} supports {', '.join(names[:-1])} and "
                                        f"{names[-1]} tiles, not {ta.dtype.value}")
            if (cat is Category.ROW_REDUCE and not s.opdef.is_arg
                    and "BLayout::ColMajor" in self._tiles[a].cpp):
                # an R x 1 source (column-major on the vector unit, which the library's row
                # reductions refuse) reduces one element a row: the result is the source
                return [_Step(f"TMOV({self._row_view(dst, tt)}, {self._row_view(ops['a'], ta)});",
                              "V", (a,), (d,))]
            if cat is Category.ROW_REDUCE or s.opdef.is_arg:
                if self.arch.row_reduce_scratch_full:
                    tmp = self._scratch(ta, 0)
                else:
                    tmp = self._scratch(ta, 0, rows=1, cols=32 // ta.dtype.itemsize)
                return [_Step(f"{s.op}({d}, {a}, {tmp});", "V", (a,), (d, tmp))]
            return [_Step(f"{s.op}({d}, {a});", "V", (a,), (d,))]
        if cat is Category.ROW_EXPAND and "BLayout::ColMajor" in self._tiles[d].cpp:
            # an R x 1 destination (column-major on the vector unit; the library's TROWEXPAND*
            # want it row-major) has one element a row: the broadcast is element-wise on
            # 1 x R row views of the three tiles
            return self._lower_expr(fn, s, ops, tt, lambda n: self._row_view(n, fn.type_of(n)))
        if cat is Category.COL_EXPAND and "BLayout::ColMajor" in self._tiles[d].cpp:
            # the library's column broadcasts static-assert a row-major dst (a5/TColExpandBinOp.hpp:
            # "TCOLEXPANDOP not supported Layout type"): refused here, not by the C++ compiler
            raise self._err(fn, s, f"{s.op} takes row-major tiles: tile '{dst}' "
                                   f"({tt.rows}x1) is column-major")
        if cat is Category.TRANSPOSE:
            a = vec(ops["a"])
            row = self._row_copy(fn, ops["a"], dst, a, d)
            if row is not None:
                return [row]
            # docs/isa/TTRANS.md, "Temporary tile": an H x W source needs W rows of H
            # elements rounded up to the row stride (16 elements, 32 for 1-byte types)
            stride = 32 if tt.dtype.itemsize == 1 else 16
            tmp = self._scratch(tt, 0, rows=tt.rows, cols=-(-tt.cols // stride) * stride)
            steps = []
            if ops["a"] == dst:
                # in place, the library's TTRANS reads elements it has already written (the
                # official CPU simulator shows it): it transposes a copy
                src = self._scratch(tt, 1, storage=a)
                steps.append(_Step(f"TMOV({src}, {a});", "V", (a,), (src,)))
                a = src
            return steps + [_Step(f"TTRANS({d}, {a}, {tmp});", "V", (a,), (d, tmp))]
        if cat is Category.CONVERT:
            a = vec(ops["a"])
            return [_Step(f"TCVT({d}, {a}, RoundMode::CAST_RINT);", "V", (a,), (d,))]
        ct = self.ctype(tt.dtype)
        if cat is Category.MASK:
            return self._lower_mask(fn, s, ops, d, vec)
        if s.opdef.layout == "reshape":
            return self._lower_reshape(fn, s, ops, d, vec)
        if s.opdef.layout == "pad":
            return self._lower_pad(fn, s, ops, d, vec)
        if s.opdef.layout == "sort32":
            return self._lower_sort32(fn, s, ops, d, vec)
        if s.opdef.layout == "scatter":
            return self._lower_scatter(fn, s, ops, d, vec)
        if s.opdef.layout == "histogram":
            return self._lower_histogram(s, ops, d, vec)
        if s.opdef.layout == "gatherb":
            return self._lower_gatherb(fn, s, ops, d, vec)
        if s.opdef.layout in ("quant", "quant_asym"):
            return self._lower_quant(fn, s, ops, d, vec)
        if s.opdef.layout == "gather":    # docs/isa/TGATHER.md: "continuous dst storage"
            self._need_unpadded(fn, s, (ops["dst"], ops["a"], ops["idx"]), vec,
                                "indexes the tile's storage")
        if s.opdef.layout in ("partial", "pair", *PART_ARGS, *INTERLEAVES):
            # docs/isa/TPARTADD.md, TPairReduceSum.md, TPARTARGMAX.md, TINTERLEAVE.md
            for v in (ops[o.name] for o in s.opdef.operands if o.is_tile):
                if "BLayout::ColMajor" in self._tiles[vec(v)].cpp:
                    raise self._err(fn, s, f"{s.op} takes row-major tiles: tile '{v}' "
                                           f"({fn.type_of(v).rows}x1) is column-major")
        if s.opdef.isa:
            # the library call's operands by name (a second output, such as TPARTARGMAX's
            # dst_idx, is written like dst), in the row's order or the row's isa_args
            steps, arg, reads = [], {"dst": d}, [d] if s.opdef.read_write else []
            for spec in s.opdef.operands[1:]:
                v = ops[spec.name]
                if spec.role == "scalar":
                    arg[spec.name] = f"static_cast<{ct}>({self.scalar_value(fn, v)})"
                    continue
                if spec.role == "index":           # TEXTRACT's offsets: uint16_t
                    arg[spec.name] = f"static_cast<uint16_t>({self.index(v)})"
                    continue
                x = vec(v)
                if cat is Category.ROW_EXPAND and not s.opdef.is_copy and spec.name == "b":
                    x, steps = self._row_block(fn, v)
                arg[spec.name] = x
                if spec.is_read:
                    reads.append(x)
            args = [arg[n] for n in s.opdef.isa_args or [o.name for o in s.opdef.operands]]
            writes = tuple(arg[n] for n in s.opdef.tile_outputs)
            shape = s.opdef.scratch_shape(tt.rows, tt.cols) if s.opdef.scratch_shape else (None, None)
            like = TileType(tt.rows, tt.cols, s.opdef.scratch_dtype or tt.dtype)
            tmps = [self._scratch(like, i, *shape) for i in range(s.opdef.scratch)]
            # offsets known only at run time are checked first (layout_checks)
            checks = "".join(f"{c} " for c in self.layout_checks(fn, s))
            return steps + [_Step(f"{checks}{s.opdef.isa}({', '.join(args + tmps)});", "V",
                                  tuple(reads), (*writes, *tmps))]
        if cat in (Category.ELEMENTWISE, Category.TILE_SCALAR):
            return self._lower_expr(fn, s, ops, tt, vec)
        raise self._err(fn, s, f"{s.op} has no PTO-ISA lowering")

    def _lower_sort32(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """TSORT32 takes uint32_t indices (docs/isa/TSORT32.md): our i32 tile through a
        uint32_t view of its bytes. A row that is not whole blocks of 32 takes the 4-operand
        form, whose tmp holds the row padded to a multiple of 32 ("tmpSize = ceil_32(C)")."""
        a, view = vec(ops["a"]), self._unsigned_view(vec(ops["idx"]))
        ta = fn.type_of(ops["a"])
        tmps = []
        if ta.cols % 32:
            tmps = [self._scratch(TileType(1, -(-ta.cols // 32) * 32, ta.dtype), 62)]
        return [_Step(f"TSORT32({', '.join([d, a, view, *tmps])});", "V", (a, view),
                      (d, *tmps))]

    def _unsigned_view(self, name: str) -> str:
        """A view of integer tile ``name``'s bytes typed with the unsigned type of its width
        (the library's uint16_t/uint32_t operands of TSORT32 and THISTOGRAM)."""
        t = self._tiles[name]
        view = f"{name}_u"
        if view not in self._tiles:
            signed = self.ctype(t.dtype)
            self._tiles[view] = replace(t, name=view, cpp=t.cpp.replace(signed, "u" + signed, 1),
                                        alias_of=t.name)
        return view

    def _lower_histogram(self, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """THISTOGRAM<HistByte::BYTE_k>(dst, src, idx) on uint32_t counts and uint16_t/uint32_t
        values: views of our i32 and i16/i32 tiles."""
        dst, a, idx = self._unsigned_view(d), self._unsigned_view(vec(ops["a"])), vec(ops["idx"])
        return [_Step(f"THISTOGRAM<HistByte::BYTE_{int(s.attr('byte'))}>({dst}, {a}, {idx});",
                      "V", (a, idx), (dst,))]

    def _lower_mask(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """Compares, selects and generators: the library calls (docs/isa/TCMP.md, TCMPS.md,
        TSEL.md, TSELS.md, TCI.md, TTRI.md) on masks of one bit per element, bit c % 8 of
        byte c // 8 of each row. What a target's implementation cannot do is refused, naming
        op and target: compares of the types it tests for equality only, TCMPS of a source
        with padded rows (the library packs whole storage rows), TSEL of a column count that
        is no multiple of 8 (the library reads the mask as one bit stream across rows)."""
        op = s.opdef
        data = fn.type_of(ops[op.data_operand])
        ct = self.ctype(data.dtype)
        scalar = lambda v, t=ct: f"static_cast<{t}>({self.scalar_value(fn, v)})"  # noqa: E731
        if op.layout == "ci":
            desc = int(s.attr("descending") == "true")
            return [_Step(f"TCI<decltype({d}), {ct}, {desc}>({d}, {scalar(ops['s'])});", "V",
                          (), (d,))]
        if op.layout == "tri":
            up = int(s.attr("upper") == "true")
            return [_Step(f"TTRI<decltype({d}), {up}>({d}, {scalar(ops['diag'], 'int')});",
                          "V", (), (d,))]
        if op.layout == "random":
            return self._lower_random(fn, s, ops, d, vec)
        if op.is_compare and s.attr("cmp") != "eq" and data.dtype in self.arch.compare_eq_only:
            raise self._err(fn, s, f"{s.op} of {data.dtype.value} tiles tests equality only "
                                   f"(cmp=eq), not cmp={s.attr('cmp')},")
        if op.name == "TCMPS":
            self._need_unpadded(fn, s, (ops["a"],), vec, "packs whole storage rows")
        if op.name == "TSEL" and data.cols % 8:
            raise self._err(fn, s, f"{s.op} reads its mask as one bit stream across rows: "
                                   f"{data.cols} columns are no multiple of 8")
        args, reads = [d], []
        for spec in op.inputs:
            if spec.role == "scalar":
                args.append(scalar(ops[spec.name]))
                continue
            args.append(vec(ops[spec.name]))
            reads.append(args[-1])
        if op.is_compare:
            args.append(f"CmpMode::{s.attr('cmp').upper()}")
        shape = op.scratch_shape(data.rows, data.cols) if op.scratch_shape else (None, None)
        like = TileType(data.rows, data.cols, op.scratch_dtype or data.dtype)
        tmps = [self._scratch(like, i, *shape) for i in range(op.scratch)]
        at = len(args) if op.scratch_at is None else op.scratch_at
        args[at:at] = tmps
        return [_Step(f"{op.isa}({', '.join(args)});", "V", tuple(reads), (d, *tmps))]

    def _lower_random(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """TRANDOM<rounds>(dst, key, counter) takes its key and counter as arrays of
        uint32_t (docs/isa/TRANDOM.md): the scalar unit reads them from their tiles into
        arrays of a block that the vector step closes. dst must be row-major ("Tile layout
        must be row-major"); its storage row (32-byte rows) is the counter's row stride,
        which the rule of ops.random_stride follows."""
        if "BLayout::ColMajor" in self._tiles[d].cpp:
            raise self._err(fn, s, f"{s.op} takes row-major tiles: tile '{ops['dst']}' "
                                   f"({fn.type_of(ops['dst']).rows}x1) is column-major")
        arrays, tiles = [], []
        for name, cpp in (("key", "TRandomKey"), ("counter", "TRandomCounter")):
            t = vec(ops[name])
            tiles.append(t)
            words = ", ".join(f"static_cast<uint32_t>({self.index_element(fn, ops[name], str(i))})"
                              for i in range(RANDOM_WORDS[name]))
            arrays.append(f"{cpp} _pto_{name} = {{{words}}};")
        return [_Step("{ " + " ".join(arrays), "S", tuple(tiles), ()),
                _Step(f"TRANDOM<{int(s.attr('rounds'))}>({d}, _pto_key, _pto_counter); }}", "V",
                      (), (d,))]

    def _lower_quant(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """TQUANT<QuantType::INT8_SYM>(dst, src, scale) (docs/isa/TQUANT.md, "Integer INT8");
        TQUANT_ASYM: TQUANT<QuantType::INT8_ASYM>(dst, src, scale, &offset). A2/A3's form
        takes a tmp of src's size and scales src in place: src is copied into a scratch tile
        first (TMOV), so a keeps its value, and a padded R x 1 scale (and offset) becomes a
        block per row, as its row-expanding multiply (and add) takes it (``_row_block``)."""
        a, ta = vec(ops["a"]), fn.type_of(ops["a"])
        mode = "INT8_ASYM" if "offset" in ops else "INT8_SYM"
        if not self.arch.quant_tmp:
            params = [vec(ops[n]) for n in ("scale", "offset") if n in ops]
            args = ", ".join([d, a, params[0], *(f"&{p}" for p in params[1:])])
            return [_Step(f"TQUANT<QuantType::{mode}>({args});", "V", (a, *params), (d,))]
        scale, steps = self._row_block(fn, ops["scale"])
        params = [scale]
        if "offset" in ops:
            offset, more = self._row_block(fn, ops["offset"], 61)
            steps, params = steps + more, [scale, offset]
        src, tmp = self._scratch(ta, 63, storage=a), self._scratch(ta, 64, storage=a)
        args = ", ".join([d, src, scale, tmp, *(f"&{p}" for p in params[1:])])
        return steps + [_Step(f"TMOV({src}, {a});", "V", (a,), (src,)),
                        _Step(f"TQUANT<QuantType::{mode}>({args});", "V", (src, *params),
                              (d, src, tmp))]

    def _need_unpadded(self, fn: Function, s: Instr, names, vec, why: str) -> None:
        """Refuse ``s`` when a tile of ``names`` has padded rows (its storage is not its
        elements in row-major order), naming the op, the tile and the target."""
        for v in names:
            t = self._tiles[vec(v)]
            if (t.rows, t.cols) != (t.valid_rows, t.valid_cols):
                raise self._err(fn, s, f"{s.op} {why}: tile '{v}' ({t.valid_rows}x"
                                       f"{t.valid_cols} {t.dtype.value}) has padded rows")

    def _lower_scatter(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """TSCATTER writes dst's storage at each index with no bounds check (docs/isa/
        TSCATTER.md: "No bounds checks are enforced on `indexes` values"), and the device
        zeroes dst first where the official CPU simulator does not: the scalar unit checks
        every index (the kernel stops before any write, ``index_check``), TEXPANDS zeroes
        dst, then the library scatters. dst must be unpadded: indices count its storage."""
        self._need_unpadded(fn, s, (ops["dst"],), vec, "indexes the tile's storage")
        a, ix = vec(ops["a"]), vec(ops["idx"])
        ct = self.ctype(fn.type_of(ops["dst"]).dtype)
        return [_Step(self.index_check(fn, s), "S", (ix,), ()),
                _Step(f"TEXPANDS({d}, static_cast<{ct}>(0));", "V", (), (d,)),
                _Step(f"TSCATTER({d}, {a}, {ix});", "V", (a, ix), (d,))]

    def _lower_gatherb(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """TGATHERB reads 32 bytes of a's storage at each offset, "Offset bounds are not
        validated" (docs/isa/TGATHERB.md): the scalar unit checks every offset first
        (``index_check``: the kernel stops before any read or write). a must be unpadded:
        offsets count its storage."""
        self._need_unpadded(fn, s, (ops["a"],), vec, "reads the tile's storage by byte offsets")
        a, ix = vec(ops["a"]), vec(ops["idx"])
        return [_Step(self.index_check(fn, s), "S", (ix,), ()),
                _Step(f"TGATHERB({d}, {a}, {ix});", "V", (a, ix), (d,))]

    def _lower_indexed(self, fn: Function, s: Instr, ops: dict) -> list[_Step]:
        """MGATHER/MSCATTER (docs/isa/MGATHER.md, MSCATTER.md) with GatherOOB/ScatterOOB::
        Undefined, which leaves a bad index to the caller: the scalar unit checks every index
        first (``indexed_check``: the kernel stops before any access), then the library call
        moves rows or elements of the table, a GlobalTensor of the memref's declared shape
        over its row stride. The library reads elements (coalesce=elem) as if the table were
        packed, so a table window with a wider row stride stops the kernel too. Full barriers
        order the table's global memory against the kernel's other loads and stores (the
        pipes track on-chip buffers only)."""
        mem, tile = indexed_tables(s.opdef)
        table, tt = ops[mem], fn.type_of(ops[tile])
        x = self._phys(ops[tile], "Vec", tt).name
        ix = self._phys(ops["idx"], "Vec", fn.type_of(ops["idx"])).name
        rows, cols = fn.type_of(table).shape
        shape, stride = f"Shape<1, 1, 1, {rows}, {cols}>", "Stride<1, 1, 1, DYNAMIC, 1>"
        view = (f"GlobalTensor<{self.ctype(tt.dtype)}, {shape}, {stride}> _pto_gm({table}, "
                f"{shape}(), {stride}(_pto_ld_{table}));")
        mode = "Coalesce::" + s.attr("coalesce").capitalize()
        check = _Step(self.indexed_check(fn, s), "S", (ix,), ())
        if mode == "Coalesce::Elem":   # the library counts elements from the table's start,
            # as if packed (docs/isa/MGATHER.md: "packed ND with row stride = validCols")
            err = self.scalar_error(fn, s, "a strided table", self.WINDOW_STATUS, "")
            check.text = f"if (_pto_ld_{table} != {cols}) {err}\n{check.text}"
        if mem == "src":
            return [check, _Step(f"pipe_barrier(PIPE_ALL);\n{{ {view} MGATHER<{mode}>({x}, "
                                 f"_pto_gm, {ix}); }}", "MTE2", (ix,), (x,), barrier=True)]
        return [check, _Step(f"pipe_barrier(PIPE_ALL);\n{{ {view} MSCATTER<{mode}>(_pto_gm, "
                             f"{x}, {ix}); }}\npipe_barrier(PIPE_ALL);", "MTE3", (x, ix), (),
                             barrier=True)]

    def index_element(self, fn: Function, tile: str, k: str) -> str:
        """Element ``k`` of an index tile, read by the scalar unit from its storage."""
        t = self._phys(tile, "Vec", fn.type_of(tile))
        return f"{t.name}.GetValue(({k}) / {t.valid_cols} * {t.cols} + ({k}) % {t.valid_cols})"

    def _lower_pad(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """TFILLPAD*: the library takes the pad value from dst's tile type (its PadVal), so
        the instruction writes through a view of dst's bytes whose type names it."""
        t = self._tiles[d]
        pad = {"zero": "Zero", "max": "Max", "min": "Min"}[s.attr("pad")]
        view = (t.cpp[:-1] + f", SLayout::NoneBox, TileConfig::fractalABSize, PadValue::{pad}>")
        a = vec(ops["a"])
        col = [v for v in (ops["dst"], ops["a"]) if "BLayout::ColMajor" in self._tiles[vec(v)].cpp]
        if len(col) == 1:
            # the library's fill compares the two storage shapes (an R x 1 column-major dst
            # is narrower than a padded row)
            raise self._err(fn, s, f"{s.op} takes tiles of one storage layout: tile "
                                   f"'{col[0]}' ({fn.type_of(col[0]).rows}x1) is column-major, "
                                   f"the other row-major")
        return [_Step(f"{{ {view} _pto_pad; TASSIGN(_pto_pad, 0x{t.offset:x}); "
                      f"{s.op}(_pto_pad, {a}); }}", "V", (a,), (d,))]

    def _lower_reshape(self, fn: Function, s: Instr, ops: dict, d: str, vec) -> list[_Step]:
        """TRESHAPE reinterprets a tile's bytes (docs/isa/TRESHAPE.md; on A2/A3 and in the
        CPU simulator dst becomes an alias of src): a view of a's bytes is made in a block
        and copied into dst (TMOV), so dst owns its storage whatever later reuses a's. Tiles
        with padded rows are refused: their bytes are not the elements in row-major order."""
        a = ops["a"]
        self._need_unpadded(fn, s, (ops["dst"], a), vec, "reinterprets bytes")
        view = self._tiles[d].cpp
        return [_Step(f"{{ {view} _pto_view; TRESHAPE(_pto_view, {vec(a)}); "
                      f"TMOV({d}, _pto_view); }}", "V", (vec(a),), (d,))]

    def _lower_expr(self, fn: Function, s: Instr, ops: dict, tt: TileType,
                    vec) -> list[_Step]:
        """Lower an element-wise op the library lacks from its table expression, one library
        instruction per node, with scratch tiles for intermediate values. f16/bf16 operands
        are widened to f32 scratch tiles first and the result rounded once (TCVT), so the
        intermediate values keep f32 range and precision as in the reference (exp(11.1) is
        inf in f16, not in f32)."""
        dst = vec(ops["dst"])
        widen = tt.dtype in (E.F16, E.BF16)
        if dst != self._phys(ops["dst"], "Vec", tt).name:
            tt = TileType(1, tt.rows, tt.dtype)         # scratch shaped like the row view
        if widen:
            tt = TileType(tt.rows, tt.cols, E.F32)
        ct = self.ctype(tt.dtype)
        steps: list[_Step] = []
        env: dict[str, tuple[str, str]] = {}
        for i, spec in enumerate(s.opdef.inputs):
            v = ops[spec.name]
            if spec.role == "scalar":
                env[spec.name] = ("s", f"static_cast<{ct}>({self.scalar_value(fn, v)})")
                continue
            x = vec(v)
            if widen:
                w = self._scratch(tt, 50 + i)
                steps.append(_Step(f"TCVT({w}, {x}, RoundMode::CAST_NONE);", "V", (x,), (w,)))
                x = w
            env[spec.name] = ("t", x)
        inputs = {v for k, v in env.values() if k == "t"}

        def emit(text: str, reads: Sequence[str], writes: Sequence[str]) -> None:
            steps.append(_Step(text, "V", tuple(reads), tuple(writes)))

        def isa(table: dict[str, str], kind: str) -> str:
            if kind not in table:
                on = "tiles" if table is ISA_TILE else "a tile and a scalar"
                raise self._err(fn, s, f"the PTO-ISA library has no '{kind}' of {on}")
            return table[kind]

        def lit(x: float) -> str:
            return f"static_cast<{ct}>({self.literal(x, 'float')})"

        def gen(e: Expr, target: str, depth: int) -> tuple[str, str]:
            if e.kind == "var":
                return env[str(e.value)]
            if e.kind == "const":
                return ("s", lit(float(e.value)))
            if len(e.args) == 1:
                k, x = gen(e.args[0], target, depth)
                if k == "s":
                    raise self._err(fn, s, "constant sub-expression")
                if e.kind == "tanh":        # tanh(x) = 2 / (1 + exp(-2x)) - 1
                    t = self._scratch(tt, depth)
                    emit(f"TMULS({t}, {x}, {lit(-2.0)});", [x], [t])
                    emit(f"TEXP({t}, {t});", [t], [t])
                    emit(f"TADDS({t}, {t}, {lit(1.0)});", [t], [t])
                    emit(f"TDIVS({t}, {lit(2.0)}, {t});", [t], [t])
                    emit(f"TADDS({target}, {t}, {lit(-1.0)});", [t], [target])
                else:
                    emit(f"{isa(ISA_TILE, e.kind)}({target}, {x});", [x], [target])
                return ("t", target)
            kx, x = gen(e.args[0], target, depth)
            ky, y = gen(e.args[1], self._scratch(tt, depth), depth + 1)
            if kx == "t" and ky == "t":
                emit(f"{isa(ISA_TILE, e.kind)}({target}, {x}, {y});", [x, y], [target])
            elif kx == "t":
                emit(f"{isa(ISA_TILE_SCALAR, e.kind)}({target}, {x}, {y});", [x], [target])
            elif ky == "t":
                if e.kind in ("add", "mul", "max", "min"):
                    emit(f"{isa(ISA_TILE_SCALAR, e.kind)}({target}, {y}, {x});", [y], [target])
                elif e.kind == "sub":
                    emit(f"TMULS({target}, {y}, {lit(-1.0)});", [y], [target])
                    emit(f"TADDS({target}, {target}, {x});", [target], [target])
                else:
                    emit(f"TDIVS({target}, {x}, {y});", [y], [target])
            else:
                raise self._err(fn, s, "constant sub-expression")
            return ("t", target)

        # never compute into dst while an input that aliases it is still needed
        target = (dst if dst not in inputs and not widen else
                  self._scratch(tt, 99, storage=None if widen else dst))
        k, res = gen(s.opdef.expr, target, 0)
        if widen:
            emit(f"TCVT({dst}, {res}, RoundMode::CAST_RINT);", [res], [dst])
        elif res != dst:
            emit(f"TMOV({dst}, {res});", [res], [dst])
        return steps

    def _lower_matmul(self, fn: Function, s: Instr, ops: dict) -> list[_Step]:
        ta, tb, td = fn.type_of(ops["a"]), fn.type_of(ops["b"]), fn.type_of(ops["dst"])
        allowed = self.arch.matmul_inputs.get(ta.dtype, ())
        if td.dtype not in allowed:
            have = ", ".join(f"{k.value}->{'/'.join(x.value for x in v)}"
                             for k, v in self.arch.matmul_inputs.items())
            raise self._err(fn, s, f"TMATMUL of {ta.dtype.value} into {td.dtype.value} is not "
                                    f"available (the cube unit offers {have})")
        a_mat, b_mat = self._phys(ops["a"], "Mat", ta), self._phys(ops["b"], "Mat", tb)
        left, right = self._phys(ops["a"], "Left", ta), self._phys(ops["b"], "Right", tb)
        out = self._phys(ops["dst"], "Acc", td)
        steps: list[_Step] = []
        movs = [(ops["a"], a_mat, ta), (ops["b"], b_mat, tb)]
        bias = ops.get("bias")
        if bias is not None:
            tbias = fn.type_of(bias)
            movs.append((bias, self._phys(bias, "BiasMat", tbias), tbias))
        for name, mat, t in movs:
            if name in self._vec_written:
                # a vector-computed operand (e.g. a transposed tile) moves UB -> L1 first
                v = self._phys(name, "Vec", t)
                # (a bias row always goes through GM: its UB and L1 tiles are padded apart)
                if self.arch.acc_to_vec and name != bias:
                    steps.append(_Step(f"TMOV({mat.name}, {v.name});", "MTE3", (v.name,), (mat.name,)))
                else:
                    steps += self._via_workspace(name, v, mat, "MTE3")
        steps += [_Step(f"TMOV({left.name}, {a_mat.name});", "MTE1", (a_mat.name,), (left.name,)),
                 _Step(f"TMOV({right.name}, {b_mat.name});", "MTE1", (b_mat.name,), (right.name,))]
        if bias is not None:
            # L1 -> bias table, then the cube adds the row to every row of the product
            bt, row = self._phys(bias, "Bias", tbias), movs[-1][1]
            self._pending_acc.pop(ops["dst"], None)
            return steps + [
                _Step(f"TMOV({bt.name}, {row.name});", "MTE1", (row.name,), (bt.name,)),
                _Step(f"TMATMUL_BIAS({out.name}, {left.name}, {right.name}, {bt.name});", "M",
                      (left.name, right.name, bt.name), (out.name,))] + self._acc_out(fn, s, ops)
        acc = ops.get("acc")
        if acc is not None and "Vec" in self._roles.get(acc, ()):
            # the accumulator lives on the vector side (loaded or computed there): the cube
            # computes a @ b, the product moves to UB and the vector unit adds it
            steps.append(_Step(f"TMATMUL({out.name}, {left.name}, {right.name});", "M",
                               (left.name, right.name), (out.name,)))
            prod = self._tiles.get(f"_pto_prod_{ops['dst']}")
            if prod is None:
                T = self.ctype(td.dtype)
                prod = self._tiles[f"_pto_prod_{ops['dst']}"] = PhysTile(
                    f"_pto_prod_{ops['dst']}", "Vec", td.dtype, out.rows, out.cols,
                    out.valid_rows, out.valid_cols,
                    f"Tile<TileType::Vec, {T}, {out.rows}, {out.cols}, BLayout::RowMajor, "
                    f"{out.valid_rows}, {out.valid_cols}>")
            if self.arch.acc_to_vec:
                steps.append(_Step(f"TMOV({prod.name}, {out.name});", "FIX", (out.name,),
                                   (prod.name,)))
            else:
                steps += self._via_workspace(ops["dst"], out, prod, "FIX")
            cin = self._phys(acc, "Vec", fn.type_of(acc))
            d = self._phys(ops["dst"], "Vec", td)
            steps.append(_Step(f"TADD({d.name}, {cin.name}, {prod.name});", "V",
                               (cin.name, prod.name), (d.name,)))
            return steps
        if acc is not None and acc not in self._pending_acc:
            cin = self._phys(acc, "Acc", fn.type_of(acc))
            steps.append(_Step(f"TMATMUL_ACC({out.name}, {cin.name}, {left.name}, {right.name});",
                               "M", (cin.name, left.name, right.name), (out.name,)))
        else:
            if acc is not None and acc != ops["dst"]:
                self._pending_acc[ops["dst"]] = self._pending_acc.pop(acc)
            elif acc is None:
                self._pending_acc.pop(ops["dst"], None)
            steps.append(_Step(f"TMATMUL({out.name}, {left.name}, {right.name});", "M",
                               (left.name, right.name), (out.name,)))
        return steps + self._acc_out(fn, s, ops)

    def _acc_out(self, fn: Function, s: Instr, ops: dict) -> list[_Step]:
        """The moves that bring a product to the vector side, where vector instructions
        read it."""
        td, steps = fn.type_of(ops["dst"]), []
        out = self._phys(ops["dst"], "Acc", td)
        if "Vec" in self._roles.get(ops["dst"], set()):
            if ops["dst"] in self._pending_acc:
                raise self._err(fn, s, "an accumulator loaded from global memory cannot also "
                                        "feed vector instructions")
            v = self._phys(ops["dst"], "Vec", td)
            if self.arch.acc_to_vec:
                steps.append(_Step(f"TMOV({v.name}, {out.name});", "FIX", (out.name,), (v.name,)))
            else:
                # A2/A3: L0C -> GM workspace (fixpipe) -> UB (MTE2), ordered by a full barrier
                steps += self._via_workspace(ops["dst"], out, v, "FIX")
        return steps

    def _via_workspace(self, tile: str, src: PhysTile, dst: PhysTile, src_pipe: str) -> list[_Step]:
        """Move ``src`` to ``dst`` through the kernel's GM workspace (A2/A3, where cube and
        vector buffers have no direct path): a store, a full barrier, a load."""
        off = self._ws.get(tile)
        if off is None:
            off = self._ws[tile] = self._ws_size
            self._ws_size += -(-src.valid_rows * src.valid_cols * src.dtype.itemsize // 512) * 512
        T = self.ctype(src.dtype)
        R, C = src.valid_rows, src.valid_cols
        view = (f"GlobalTensor<{T}, Shape<1, 1, 1, {R}, {C}>, Stride<1, 1, 1, {C}, 1>> "
                f"_pto_gm((__gm__ {T}*)(_pto_ws + {off}));")
        return [_Step("{ " + view + f" TSTORE(_pto_gm, {src.name}); }}", src_pipe, (src.name,)),
                _Step("pipe_barrier(PIPE_ALL);\n{ " + view + f" TLOAD({dst.name}, _pto_gm); }}",
                      "MTE2", (), (dst.name,), barrier=True)]
