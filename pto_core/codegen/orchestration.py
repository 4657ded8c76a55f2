"""The orchestration emitter: platform-independent C that builds the task graph at run time.

One source per module serves every backend. It calls only the runtime API of
``runtime/include/pto_runtime.h``:

* each orchestration function becomes ``static int pto_orch_<name>(PTORuntime* rt, PTOTensor*
  <memrefs>..., int64_t <int scalars>..., double <float scalars>...)`` (every value under its C
  name, :mod:`pto_core.codegen.cnames`) with FOR, IF and scalar ops as plain C that behaves as
  the reference interpreter: loop bounds and step are read once, a dynamic step that is not
  positive, a loop running more than its ``max_range``, an integer division by zero or a
  negative shift stops the function with ``PTO_EINVAL`` and a message naming the function and
  instruction (``const char* pto_module_error_<module>(void)``). It returns ``PTO_OK``, or the
  first error of a submission, a check, or an orchestration function it calls;
* a CALL of an InCore function becomes one ``pto_task_submit_v`` whose argument array (on the
  stack, filled with the call's dynamic offsets) holds one ``PTOTaskArg`` per parameter IN
  PARAMETER ORDER: ``PTO_ARG_INPUT/OUTPUT/INOUT`` with the element region of the footprint rule
  (``row_off = row * R``, ``col_off = col * C``, ``rows = R``, ``cols = C``), ``PTO_ARG_SCALAR``
  per scalar parameter; a memref parameter the kernel never touches (mode ``none``) still takes
  its two slots as ``PTO_ARG_UNTRACKED`` (pointer at the call's offsets counted in elements, and
  ld), which creates no dependency. One call instead of alloc + add per argument + submit saves
  the per-call checks and overhead;
* such a region is a whole tile (row, col) of the parameter's R x C tiling, so the function
  registers each (tensor, R x C) its CALLs pass once, at its start (``pto_tensor_tiles``, its
  handle ``_pto_tiles_<tensor>_<R>x<C>``; an allocation failure is returned; each call of the
  function registers again, and the runtime gives the same tensor and tiling the handle it gave
  before: a function called from a loop any number of times uses one handle per tiling), and
  the CALL passes ``_pto_tile_arg(kind, handle, tensor, row, col, R, C)``: the ``PTO_ARG_TILE_*`` argument of
  that tile, which the runtime takes without checking or looking up the region again, or, where
  the tiles do not divide the tensor at run time (handle -1), the rectangle above. The graph is
  the rectangles' either way. Range tasks (steps in elements) and intermediates keep their
  rectangles; ``tile_args=False`` (the ``tile_args`` option) passes rectangles everywhere;
* a CALL of another orchestration function is a C call;
* an intermediate (a tensor the function names in CALLs but does not take as a parameter) is
  runtime-owned: the function opens a scope, makes a ``pto_temp_tensor`` per intermediate and
  runs its body (``_pto_orchbody_<name>``, which takes them after the parameters), then closes
  the scopes it opened; its CALLs pass regions of it as ``PTO_ARG_TEMP_INPUT/OUTPUT/INOUT``.
  A FOR whose iterations each write and then read their own region of an intermediate
  (:func:`pto_core.analysis.iteration_local`) gives each iteration a scope, so the buffers of an
  iteration are released as soon as its tasks are done.

Kernel pointers stay out of this file so it stays platform-independent: the backend's runtime
binding defines the table ``const PTOKernelFunc pto_kernels_<module>[]`` in the order of
:func:`kernel_order` (an entry may be NULL when the binding's executor resolves the kernel by
its name, e.g. a GPU launch stub) and ``void pto_binding_setup_<module>(PTORuntime*)``, called
once per run before the graph is built (to install an executor; may do nothing).

The host entry point (for executables and ctypes)::

    int pto_module_run_<module>(PTOTensor* tensors, int num_tensors, const int64_t* scalars,
                                int num_scalars, int num_workers, int threshold);

takes the entry function's tensors and scalars in parameter order (float scalars as the bits of
a double), builds and runs the graph and returns 0 or a negative runtime error code
(``pto_module_run_cfg_<module>(tensors, n, scalars, n, const PTORuntimeConfig*,
PTORuntimeStats*)`` does the same with a whole configuration, and fills the run's statistics
when the pointer is not NULL); after a
failure ``pto_last_error()`` (same thread) says what failed, e.g. which task and kernel. The run's
deadline is ``PTO_TIMEOUT`` (seconds) in the environment, read when the runtime is created.
``pto_module_build_<module>(PTORuntime* rt, tensors, n, scalars, n)`` only builds the graph, into
a runtime the caller created (with this library's ``pto_runtime_create``) and then runs and
destroys itself: the build timed alone, or a window sized by the caller. Once per runtime: it sets
the runtime up first (``pto_binding_setup_<module>``, as ``pto_module_run_cfg_<module>`` does),
and a binding's setup is made for a runtime without tasks (a GPU backend's binding that attaches
its stream executor forgets the runtime's stream lanes, launch counters and stream log, where
tasks of an earlier build still wait), so a runtime that holds tasks already is refused:
``PTO_ESTATE``, nothing done, ``pto_module_error_<module>()`` says why.

>>> import sys; sys.path.insert(0, "examples")
>>> import fused_softmax
>>> c = emit_orchestration(fused_softmax.build_module())
>>> "{PTO_ARG_OUTPUT, pto_v_temp_max, (pto_v_tile_idx) * 8, (0) * 1, 8, 1, 0}" in c
True
"""

from __future__ import annotations

import re
from typing import Callable

from ..analysis import buffer_bytes as _declared_bytes
from ..analysis import footprint, intermediates, iteration_local, param_modes
from .cnames import c_comment, c_names, c_string, kernel_symbol, orchestration_symbol, user_text
from .cstyle import CStyleRenderer, _Out
from ..errors import PTOError
from ..ir import (Call, Category, For, Function, If, Instr, MemRefType, Module, Return,
                 ScalarType)
from ..ir.module import worker_type

_KIND = {"in": "PTO_ARG_INPUT", "out": "PTO_ARG_OUTPUT", "inout": "PTO_ARG_INOUT"}
_TEMP_KIND = {"in": "PTO_ARG_TEMP_INPUT", "out": "PTO_ARG_TEMP_OUTPUT",
              "inout": "PTO_ARG_TEMP_INOUT"}


def c_module_name(module: Module) -> str:
    """The module name as a C identifier suffix (``softmax-v2`` -> ``softmax_v2``)."""
    name = re.sub(r"\W", "_", module.name) or "module"
    return name if not name[0].isdigit() else "_" + name


def kernel_order(module: Module) -> list[str]:
    """InCore functions in module order: the index of each in the binding's kernel table."""
    return [f.name for f in module.functions.values() if f.is_incore]


def binding_table(module: Module, setup: str = "(void)rt;", linkage: str = "") -> list[str]:
    """Lines of C every runtime binding defines for the orchestration: the prototype of each
    kernel's ABI symbol, the table ``pto_kernels_<module>[]`` in :func:`kernel_order` and
    ``pto_binding_setup_<module>(rt)``, whose body is ``setup``. ``linkage`` prefixes each
    (``extern "C" `` in C++).

    >>> from pto_core.ir import Module
    >>> binding_table(Module("m"))[1]
    'const PTOKernelFunc pto_kernels_m[] = { NULL };'
    """
    m = c_module_name(module)
    names = kernel_order(module)
    table = ", ".join(kernel_symbol(n) for n in names) or "NULL"
    return [*(f"{linkage}int32_t {kernel_symbol(n)}(const int64_t* args);" for n in names), "",
            f"{linkage}const PTOKernelFunc pto_kernels_{m}[] = {{ {table} }};", "",
            f"{linkage}void pto_binding_setup_{m}(PTORuntime* rt) {{ {setup} }}", ""]


class _OrchestrationC(CStyleRenderer):
    """Scalar ops of orchestration functions: a failed check records a message (function,
    instruction, what went wrong) that ``pto_module_error_<module>()`` returns, and the
    function returns ``PTO_EINVAL``."""

    def __init__(self, mod: str) -> None:
        self.mod = mod

    def fail(self, fn: Function, stmt: object, message: str, value: str = "0") -> str:
        where = c_string(user_text(f"in function '{fn.name}', instruction '{stmt}': "))
        return (f"return pto_orch_fail_{self.mod}({where}, {c_string(message)}, "
                f"(long long)({value}));")

    def scalar_error(self, fn: Function, s: Instr, message: str, status: int,
                     value: str) -> str:
        return self.fail(fn, s, message + " (%lld)", value)


class _Emitter:
    def __init__(self, module: Module, buffer_bytes: Callable[[Function], int]) -> None:
        self.module = module
        self.mod = c_module_name(module)
        self.kernels = {n: i for i, n in enumerate(kernel_order(module))}
        self.buffer_bytes = buffer_bytes
        self.c = _OrchestrationC(self.mod)      # scalar expression printing and checks
        self.lines: list[str] = []
        self.depth = 0
        self.ntask = 0
        self.ranges = True                      # range tasks for independent loops
        self.tile_args = True                   # whole tiles of tiled tensors (pto_tensor_tiles)
        self.tilings: dict[tuple[str, int, int], str] = {}   # (tensor, rows, cols) -> handle
        self.scoped_loops: dict[int, list[str]] = {}   # FOR id -> its iteration-local temps
        self.temps: set[str] = set()                   # intermediates of the function emitted

    def out(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    # ------------------------------------------------------------------ declarations
    def params(self, fn: Function, temps: bool = False) -> str:
        ps = ["PTORuntime* rt"]
        for p in fn.params:
            if isinstance(p.type, MemRefType):
                ps.append(f"PTOTensor* {p.name}")
            else:
                ps.append(f"{self.c.scalar_ctype(p.type.dtype)} {p.name}")
        if temps:
            ps += [f"const PTOTensor* {t}" for t in intermediates(fn)]
        return ", ".join(ps)

    def prototypes(self, fn: Function) -> None:
        self.out(f"static int {orchestration_symbol(fn.name)}({self.params(fn)});")
        if intermediates(fn):
            self.out(f"static int _pto_orchbody_{fn.name}({self.params(fn, True)});")

    def function(self, fn: Function) -> None:
        temps = intermediates(fn)
        if temps:
            self.owner(fn, temps)
        self.temps = set(temps)
        self.scoped_loops = iteration_local(fn, self.module) if temps else {}
        name = f"_pto_orchbody_{fn.name}" if temps else orchestration_symbol(fn.name)
        self.out(f"static int {name}({self.params(fn, bool(temps))}) {{")
        self.depth += 1
        for loc in fn.locals:
            if isinstance(loc.type, ScalarType):
                ct = self.c.scalar_ctype(loc.type.dtype)
                self.out(f"{ct} {loc.name} = {self.c.literal(0, ct)};")
        for p in fn.params:
            self.out(f"(void){p.name};")
        for t in temps:
            self.out(f"(void){t};")
        start, self.tilings = len(self.lines), {}
        self.body(fn, fn.body)
        self.out("return PTO_OK;")
        self.lines[start:start] = self.tiling_lines()
        self.depth -= 1
        self.out("}")

    def tiling(self, tensor: str, rows: int, cols: int) -> str:
        """The C name of the handle of ``tensor``'s whole ``rows`` x ``cols`` tiles, registered
        at the start of the function being emitted (:meth:`tiling_lines`)."""
        return self.tilings.setdefault((tensor, rows, cols), f"_pto_tiles_{tensor}_{rows}x{cols}")

    def tiling_lines(self) -> list[str]:
        """One ``pto_tensor_tiles`` per (tensor, tile shape) the function's CALLs pass whole
        tiles of, in the order of first use: -1 where the tiles do not divide the tensor (its
        CALLs then pass the rectangles), an allocation failure returned."""
        if not self.tilings:
            return []
        pad = "    " * self.depth
        lines = [pad + "/* the whole tiles its CALLs pass (pto_tensor_tiles; -1: rectangles) */"]
        for (tensor, rows, cols), h in self.tilings.items():
            lines += [pad + f"int32_t {h};",
                      pad + f"{{ const int _pto_rc = _pto_tiles(rt, {tensor}, {rows}, {cols}, &{h}); "
                            f"if (_pto_rc < 0) return _pto_rc; }}"]
        return lines

    def owner(self, fn: Function, temps: list[str]) -> None:
        """The function as called: a scope of its own around the body, which gets the
        function's intermediates."""
        self.out(f"static int {orchestration_symbol(fn.name)}({self.params(fn)}) {{")
        self.depth += 1
        self.out("const int _pto_scope = pto_scope_begin(rt);")
        self.out("if (_pto_scope < 0) return _pto_scope;")
        for loc in fn.locals:
            if loc.name in temps:
                self.out(f"const PTOTensor* {loc.name} = pto_temp_tensor(rt, "
                         f"{c_string(user_text(loc.name))}, {loc.type.dtype.itemsize});")
        ok = " && ".join(temps)
        args = ", ".join(["rt", *(p.name for p in fn.params), *temps])
        self.out(f"int _pto_rc = {ok} ? _pto_orchbody_{fn.name}({args}) : PTO_ENOMEM;")
        self.out("/* close this scope and any an early return left open */")
        self.out("while (pto_scope_end(rt) >= _pto_scope) {}")
        self.out("return _pto_rc;")
        self.depth -= 1
        self.out("}")
        self.out("")

    # ------------------------------------------------------------------ statements
    def body(self, fn: Function, body) -> None:
        for s in body:
            if isinstance(s, For):
                self.loop(fn, s)
            elif isinstance(s, If):
                self.out(f"if ({s.cond} != 0) {{")
                self.depth += 1
                self.body(fn, s.then_body)
                self.depth -= 1
                if s.else_body:
                    self.out("} else {")
                    self.depth += 1
                    self.body(fn, s.else_body)
                    self.depth -= 1
                self.out("}")
            elif isinstance(s, Return):
                self.out("return PTO_OK;")
            elif isinstance(s, Call):
                self.call(fn, s)
            elif isinstance(s, Instr) and s.opdef.category is Category.SCALAR:
                o = _Out(depth=self.depth)
                self.c.render_scalar(o, fn, s)
                self.lines += o.lines
            else:
                raise PTOError("only control flow, scalar ops and CALLs belong in an "
                               "orchestration function", function=fn.name, instruction=str(s))

    def loop(self, fn: Function, s: For) -> None:
        """A FOR as the reference runs it: bounds and step read once, a dynamic step that is
        not positive or more trips than ``max_range`` is an error, the body cannot change the
        iteration, and no value of the bounds makes the counting overflow."""
        d = self.depth
        i = self.c.index
        self.out("{")
        self.depth += 1
        self.out(f"const int64_t _pto_lo{d} = {i(s.start)}, _pto_hi{d} = {i(s.end)}, "
                 f"_pto_step{d} = {i(s.step)};")
        if isinstance(s.step, str):
            self.out(f"if (_pto_step{d} <= 0) "
                     + self.c.fail(fn, s.header(), "step must be positive, got %lld",
                                   f"_pto_step{d}"))
        # trip count in unsigned arithmetic: hi - lo cannot overflow there
        self.out(f"const uint64_t _pto_n{d} = _pto_hi{d} > _pto_lo{d} ? "
                 f"((uint64_t)_pto_hi{d} - (uint64_t)_pto_lo{d} - 1) / (uint64_t)_pto_step{d} + 1 "
                 f": 0;")
        if s.max_range is not None:
            self.out(f"if (_pto_n{d} > {int(s.max_range)}u) "
                     + self.c.fail(fn, s.header(), f"the loop runs %lld times, more than its "
                                   f"max_range {int(s.max_range)}", f"_pto_n{d}"))
        calls = self.range_calls(s) if self.ranges else None
        if calls is not None:
            # every iteration calls its kernels on regions of its own: one range per CALL
            self.out(f"if (_pto_n{d} > 0) {{")
            self.depth += 1
            self.out(f"const int64_t {s.var} = _pto_lo{d};")
            self.out(f"(void){s.var};")
            for c in calls:
                self.task(self.module.functions[c.callee], c.arg, fn,
                          tiles=(f"(int64_t)_pto_n{d}", s.var))
            self.depth -= 1
            self.out("}")
            self.depth -= 1
            self.out("}")
            return
        self.out(f"for (uint64_t _pto_k{d} = 0; _pto_k{d} < _pto_n{d}; _pto_k{d}++) {{")
        self.depth += 1
        self.out(f"int64_t {s.var} = (int64_t)((uint64_t)_pto_lo{d} + _pto_k{d} * "
                 f"(uint64_t)_pto_step{d});")
        self.out(f"(void){s.var};")
        scoped = id(s) in self.scoped_loops
        if scoped:
            self.out(f"/* a scope per iteration: {user_text(', '.join(self.scoped_loops[id(s)]))} "
                     f"*/")
            self.out("{ const int _pto_sc = pto_scope_begin(rt); if (_pto_sc < 0) return _pto_sc; }")
        self.body(fn, s.body)
        if scoped:
            self.out("{ const int _pto_sc = pto_scope_end(rt); if (_pto_sc < 0) return _pto_sc; }")
        self.depth -= 1
        self.out("}")
        self.depth -= 1
        self.out("}")

    def range_calls(self, s: For) -> list[Call] | None:
        """The CALLs of FOR ``s`` when its iterations are independent, so that each CALL can go
        out as one range task of all iterations (``pto_task_submit_range``), else None.

        Independent means: the step is 1, the body holds only CALLs of InCore functions on
        tensors the caller passed in (no intermediates, no scalar ops, IFs or loops), the loop
        variable is at most one offset of each region and only an integer scalar besides, and
        every tensor a CALL writes is touched by the whole body at ONE region whose offset along
        one axis is the loop variable. Then iteration i touches tile i of every written tensor
        and tile i only, so no iteration depends on another: splitting the loop into one loop
        per CALL (in order) keeps every result, and the tiles of one CALL are disjoint and
        adjacent. Tensors of different names are taken to be different memory, as everywhere
        in the orchestration."""
        if s.step != 1 or not s.body:
            return None
        regions: dict[str, set[tuple]] = {}
        written: set[str] = set()
        for c in s.body:
            callee = self.module.functions.get(c.callee) if isinstance(c, Call) else None
            if callee is None or not callee.is_incore:
                return None
            modes = param_modes(callee, self.module)
            for p in callee.params:
                a = c.arg(p.name)
                if a is None:
                    return None
                if not isinstance(p.type, MemRefType):
                    if a.value == s.var and p.type.dtype.is_float:
                        return None        # a float of the index is not affine in its bits
                    continue
                if a.value in self.temps or (a.row == s.var and a.col == s.var):
                    return None
                if modes[p.name] == "none":
                    continue
                regions.setdefault(a.value, set()).add(
                    (a.row or 0, a.col or 0, footprint(callee, p.name, self.module)))
                if modes[p.name] != "in":
                    written.add(a.value)
        for t in written:
            if len(regions[t]) != 1:
                return None
            (row, col, _), = regions[t]
            if (row == s.var) == (col == s.var):
                return None                 # every iteration writes the same place
        return list(s.body)

    def scalar(self, fn: Function, v) -> str:
        return self.c.scalar_value(fn, v)

    def call(self, fn: Function, s: Call) -> None:
        callee = self.module.functions.get(s.callee)
        if callee is None:
            raise PTOError(f"calls '{s.callee}', which is not in module '{self.module.name}'",
                           function=fn.name, instruction=str(s))
        if not callee.is_incore:
            args = ["rt"]
            for p in callee.params:
                a = s.arg(p.name)
                args.append(a.value if isinstance(p.type, MemRefType) else self.scalar(fn, a.value))
            self.out(f"{{ int _pto_rc = {orchestration_symbol(callee.name)}({', '.join(args)}); "
                     f"if (_pto_rc < 0) return _pto_rc; }}")
            return
        self.task(callee, lambda p: s.arg(p), fn)

    def task(self, callee: Function, arg_of, fn: Function | None,
             tiles: tuple[str, str] | None = None) -> None:
        """One InCore call: its arguments in parameter order on the stack, one submission.
        With ``tiles`` = (C count, loop variable): one range of that many tiles, the arguments
        of the first tile and, beside them, what each argument gains per tile (the loop
        variable counts one up: an offset that is it moves by one footprint)."""
        modes = param_modes(callee, self.module)
        args, steps = [], []
        var = tiles[1] if tiles else None

        def step(rows: str = "0", cols: str = "0", value: str = "0") -> None:
            steps.append(f"{{0, 0, {rows}, {cols}, 0, 0, {value}}}")

        for p in callee.params:
            a = arg_of(p.name)
            if isinstance(p.type, MemRefType):
                mode = modes[p.name]
                i = self.c.index
                r = i(a.row) if a is not None and a.row is not None else "0"
                c = i(a.col) if a is not None and a.col is not None else "0"
                tensor = a.value if a is not None else p.name
                temp = fn is not None and tensor in self.temps
                if mode == "none" and temp:
                    # never accessed: two empty slots (no buffer to point at)
                    args += ["{PTO_ARG_SCALAR, 0, 0, 0, 0, 0, 0}"] * 2
                    step(), step()
                    continue
                rows, cols = (1, 1) if mode == "none" else footprint(callee, p.name, self.module)
                step(str(rows) if a is not None and a.row == var else "0",
                     str(cols) if a is not None and a.col == var else "0")
                if mode == "none":
                    # never accessed: still two argument slots, but no region to depend on
                    # (no footprint either, so the offsets count single elements)
                    args.append(f"{{PTO_ARG_UNTRACKED, {tensor}, {r}, {c}, 0, 0, 0}}")
                    continue
                kind = (_TEMP_KIND if temp else _KIND)[mode]
                if self.tile_args and fn is not None and not temp and not tiles:
                    # tile (r, c) of the footprint's tiling (a range's steps are in elements)
                    h = self.tiling(tensor, rows, cols)
                    args.append(f"_pto_tile_arg({kind}, {h}, {tensor}, {r}, {c}, {rows}, {cols})")
                    continue
                args.append(f"{{{kind}, {tensor}, ({r}) * {rows}, ({c}) * {cols}, "
                            f"{rows}, {cols}, 0}}")
            else:
                v = self.scalar(fn, a.value) if (a is not None and fn is not None) else p.name
                if p.type.dtype.is_float:
                    v = f"pto_f64_arg((double)({v}))"
                else:
                    v = f"(int64_t)({v})"
                args.append(f"{{PTO_ARG_SCALAR, 0, 0, 0, 0, 0, {v}}}")
                step(value="1" if a is not None and a.value == var else "0")
        self.out(f"/* CALL @{c_comment(callee.name)}" + (" on every tile of the loop: one range */"
                                                          if tiles else " */"))
        self.out("{")
        self.depth += 1
        for name, rows in (("_pto_a", args), ("_pto_s", steps if tiles else [])):
            if rows:
                self.out(f"const PTOTaskArg {name}[{len(rows)}] = {{")
                for k, text in enumerate(rows):
                    self.out("    " + text + ("," if k + 1 < len(rows) else ""))
                self.out("};")
        head = (f"rt, {c_string(callee.name)}, pto_kernels_{self.mod}[{self.kernels[callee.name]}], "
                f"{int(self.buffer_bytes(callee))}, {worker_type(callee, self.module)}, "
                f"{'_pto_a' if args else '0'}")
        if tiles:
            self.out(f"int32_t _pto_rc = pto_task_submit_range({head}, "
                     f"{'_pto_s' if args else '0'}, {len(args)}, {tiles[0]});")
        else:
            self.out(f"int32_t _pto_rc = pto_task_submit_v({head}, {len(args)});")
        self.out("if (_pto_rc < 0) return _pto_rc;")
        self.depth -= 1
        self.out("}")

    # ------------------------------------------------------------------ task window
    def task_bound(self, fn: Function, body, params: dict[str, str]) -> str | None:
        """C text of an upper bound on the tasks ``body`` submits (saturating uint64 maths),
        or None when only the run can tell: a loop bound computed in the function or set by
        an enclosing loop, a call to another orchestration function. ``params``: the integer
        scalars the bound may use (never assigned in ``fn``), with their C text."""
        count, terms = 0, []               # tasks known now, and C terms of the rest
        for s in body:
            if isinstance(s, Call):
                callee = self.module.functions.get(s.callee)
                if callee is None or not callee.is_incore:
                    return None
                count += 1
            elif isinstance(s, (If, For)):
                inner = [self.task_bound(fn, b, params)
                         for b in ((s.then_body, s.else_body) if isinstance(s, If) else (s.body,))]
                if None in inner:
                    return None
                if isinstance(s, For):
                    bounds = [params.get(v) if isinstance(v, str) else f"INT64_C({int(v)})"
                              for v in (s.start, s.end, s.step)]
                    if None in bounds:
                        return None
                    inner = [f"_pto_sat_mul(_pto_trips({', '.join(bounds)}), {inner[0]})"
                             if inner[0] != "0" else "0"]
                for t in inner:
                    if t.isdigit():
                        count += int(t)
                    else:
                        terms.append(t)
        bound = str(count)
        for t in terms:
            bound = t if bound == "0" else f"_pto_sat_add({bound}, {t})"
        return bound

    def size_window(self, fn: Function, scalar_slots: dict[str, str]) -> None:
        """Emit the window sizing of ``pto_module_run_*``: the smallest power of two that holds
        every task of the run, when the orchestration bounds them (see :meth:`task_bound`), up
        to the default. Setting up the default window (16,384 descriptors, 2 MiB, touched so
        the build does not fault) costs more than a run of a hundred tasks; a window of the
        graph's size costs next to nothing. Fewer slots than tasks would only make the build
        wait for slots, never change a result."""
        assigned = {s.operands[0] for s in fn.walk()
                    if isinstance(s, Instr) and s.opdef.category is Category.SCALAR}
        params = {k: v for k, v in scalar_slots.items() if k not in assigned}
        bound = "1" if fn.is_incore else self.task_bound(fn, fn.body, params)
        if bound is None:
            return
        self.out("/* the run submits at most this many tasks: a window of that size (a power "
                 "of two) */")
        self.out(f"const uint64_t _pto_tasks = {bound};")
        self.out("while (cfg.task_window > 2 && (uint64_t)cfg.task_window / 2 >= _pto_tasks) "
                 "cfg.task_window /= 2;")

    # ------------------------------------------------------------------ host entry
    def entry(self) -> None:
        name = self.module.entry
        if name is None:
            raise PTOError(f"module '{self.module.name}' has no functions")
        if name not in self.module.functions:       # a device program (pto_core.device)
            raise PTOError(f"the entry of module '{self.module.name}', '{name}', is a device "
                           f"program: it runs with pto run (or pto_core.device.execute."
                           f"run_device_program), which builds its kernels for the target")
        fn = self.module.functions[name]
        tensors = [p for p in fn.params if isinstance(p.type, MemRefType)]
        scalars = [p for p in fn.params if isinstance(p.type, ScalarType)]
        target = orchestration_symbol(name)
        if fn.is_incore:
            # an InCore entry runs as one task over its footprint at (0, 0)
            target = f"_pto_entry_{name}"
            self.out(f"static int {target}({self.params(fn)}) {{")
            self.depth += 1
            self.task(fn, lambda p: None, None)
            self.out("return PTO_OK;")
            self.depth -= 1
            self.out("}")
            self.out("")
        m = self.mod
        self.out(f"typedef struct {{ PTOTensor* tensors; const int64_t* scalars; int rc; }} "
                 f"_pto_args_{m};")
        self.out(f"static void _pto_orch_{m}(PTORuntime* rt, void* user) {{")
        self.depth += 1
        self.out(f"_pto_args_{m}* a = (_pto_args_{m}*)user;")
        args = ["rt"]
        ti = si = 0
        int_slots: dict[str, str] = {}     # integer scalar -> its slot in pto_module_run_*
        for p in fn.params:
            if isinstance(p.type, MemRefType):
                args.append(f"&a->tensors[{ti}]")
                ti += 1
            else:
                args.append(f"pto_arg_f64(a->scalars[{si}])" if p.type.dtype.is_float
                            else f"a->scalars[{si}]")
                if not p.type.dtype.is_float:
                    int_slots[p.name] = f"scalars[{si}]"
                si += 1
        if not scalars:
            self.out("(void)a->scalars;")
        self.out(f"a->rc = {target}({', '.join(args)});")
        self.depth -= 1
        self.out("}")
        self.out("")
        self.out(f"/* tensors: {user_text(', '.join(p.name for p in tensors)) or '-'}; "
                 f"scalars: {user_text(', '.join(p.name for p in scalars)) or '-'} */")
        self.out(f"int pto_module_run_cfg_{m}(PTOTensor* tensors, int num_tensors, "
                 f"const int64_t* scalars, int num_scalars, const PTORuntimeConfig* config, "
                 f"PTORuntimeStats* stats) {{")
        self.depth += 1
        self.out(f"if (num_tensors != {len(tensors)} || num_scalars != {len(scalars)}) "
                 f"return PTO_EINVAL;")
        self.out("PTORuntimeConfig cfg = *config;")
        self.size_window(fn, int_slots)
        self.out("PTORuntime* rt = NULL;")
        self.out("int rc = pto_runtime_init(&rt, &cfg);   /* PTO_EWORKERS, PTO_EIO, ...: "
                 "pto_last_error() says why */")
        self.out(f"pto_orch_msg_{m}[0] = 0;")
        self.out("if (rc < 0) return rc;")
        self.out(f"pto_binding_setup_{m}(rt);")
        self.out("/* safe mode: the calling thread only waits during the run, so it is one of the "
                 "workers (one pool thread")
        self.out("   fewer to hand the run to; see pto_runtime_set_caller_runs) */")
        self.out("if (cfg.execution_task_threshold == 0) pto_runtime_set_caller_runs(rt, 1);")
        self.out(f"_pto_args_{m} a = {{ tensors, scalars, PTO_OK }};")
        self.out(f"_pto_orch_{m}(rt, &a);")
        self.out("/* run what was submitted even after an orchestration error: nothing is left")
        self.out("   half-built, and the error is what the caller gets */")
        self.out("rc = pto_runtime_run(rt);")
        self.out("if (rc == PTO_OK && a.rc < 0) rc = a.rc;")
        self.out("if (stats) pto_runtime_get_stats(rt, stats);")
        self.out("pto_runtime_destroy(rt);")
        self.out("return rc;")
        self.depth -= 1
        self.out("}")
        self.out("")
        self.out(f"int pto_module_build_{m}(PTORuntime* rt, PTOTensor* tensors, int num_tensors, "
                 f"const int64_t* scalars, int num_scalars) {{")
        self.depth += 1
        self.out(f"if (!rt || num_tensors != {len(tensors)} || num_scalars != {len(scalars)}) "
                 f"return PTO_EINVAL;")
        self.out(f"pto_orch_msg_{m}[0] = 0;")
        self.out("/* the binding's setup is made for a runtime without tasks: a GPU binding's would")
        self.out("   forget the stream lanes where an earlier build's tasks wait */")
        self.out("PTORuntimeStats held;")
        self.out("if (pto_runtime_get_stats(rt, &held) == PTO_OK && held.tasks_submitted > 0) {")
        self.depth += 1
        held = ("the runtime holds %lld task(s) already, of an earlier build: one build per "
                "runtime (create another)")
        self.out(f"pto_orch_fail_{m}({c_string(f'pto_module_build_{m}: ')}, {c_string(held)}, "
                 "(long long)held.tasks_submitted);")
        self.out("return PTO_ESTATE;")
        self.depth -= 1
        self.out("}")
        self.out(f"pto_binding_setup_{m}(rt);")
        self.out(f"_pto_args_{m} a = {{ tensors, scalars, PTO_OK }};")
        self.out(f"_pto_orch_{m}(rt, &a);")
        self.out("return a.rc;")
        self.depth -= 1
        self.out("}")
        self.out("")
        self.out(f"int pto_module_run_{m}(PTOTensor* tensors, int num_tensors, "
                 f"const int64_t* scalars, int num_scalars, int num_workers, int threshold) {{")
        self.depth += 1
        self.out("PTORuntimeConfig cfg;")
        self.out("pto_runtime_config_default(&cfg);")
        self.out("cfg.num_workers = num_workers;")
        self.out("cfg.execution_task_threshold = threshold;")
        self.out(f"return pto_module_run_cfg_{m}(tensors, num_tensors, scalars, num_scalars, "
                 f"&cfg, NULL);")
        self.depth -= 1
        self.out("}")


def range_loops(module: Module) -> list[tuple[Call, ...]]:
    """The CALLs of every orchestration loop of ``module`` that goes out as range tasks (one
    ``pto_task_submit_range`` per CALL, see ``_Emitter.range_calls``), one tuple per loop, in
    the order of the functions and their statements. The CALL objects are the module's own, so
    they can be matched against :func:`pto_core.reference.trace_calls` (its ``call``).

    >>> from pathlib import Path
    >>> from pto_core.program import load_program
    >>> m = load_program(Path(__file__).parents[2] / "examples" / "rowmax.py").module
    >>> [[c.callee for c in loop] for loop in range_loops(m)]
    [['rowmax']]
    """
    e = _Emitter(module, _declared_bytes)
    out: list[tuple[Call, ...]] = []

    def walk(body) -> None:
        for s in body:
            if isinstance(s, For):
                calls = e.range_calls(s)
                if calls is not None:
                    out.append(tuple(calls))
                else:
                    walk(s.body)
            elif isinstance(s, If):
                walk(s.then_body)
                walk(s.else_body or ())

    for fn in module.functions.values():
        if not fn.is_incore:
            e.temps = set(intermediates(fn))
            walk(fn.body)
    return out


def emit_orchestration(module: Module,
                       buffer_bytes: Callable[[Function], int] | None = None,
                       ranges: bool = True, tile_args: bool = True) -> str:
    """The orchestration C of ``module`` (all its orchestration functions + the host entry).

    ``buffer_bytes(fn)`` gives each kernel's on-chip bytes (after buffer planning); by default
    the sum of its declared tiles. ``ranges=False`` submits every loop's tasks one per tile
    (no range tasks; the ``range_tasks`` option of CompileOptions.extra). ``tile_args=False``
    passes every region as its rectangle (no ``pto_tensor_tiles``; the ``tile_args`` option):
    the same graph, built with more work per task.
    """
    module = c_names(module)
    e = _Emitter(module, buffer_bytes or _declared_bytes)
    e.ranges = ranges
    e.tile_args = tile_args
    m = e.mod
    e.out(f"/* Generated by PTO: orchestration of module '{c_comment(module.name)}'. Do not edit.")
    e.out(" * Platform-independent: calls only the runtime API (pto_runtime.h). */")
    e.out("#include <math.h>   /* NAN and INFINITY of float literals */")
    e.out("#include <stdint.h>")
    e.out("#include <stdio.h>")
    e.out('#include "pto_runtime.h"')
    e.out("")
    e.out("/* The message of the last orchestration error of this thread's run (a failed check")
    e.out(" * of a run-time value: loop step, division, shift); empty after a run without one. */")
    e.out(f"static _Thread_local char pto_orch_msg_{m}[512];")
    e.out(f"const char* pto_module_error_{m}(void) {{ return pto_orch_msg_{m}; }}")
    e.out(f"__attribute__((unused)) static int pto_orch_fail_{m}(const char* where, "
          "const char* what, long long v) {")
    e.out(f"    int n = snprintf(pto_orch_msg_{m}, sizeof pto_orch_msg_{m}, \"%s\", where);")
    e.out(f"    if (n >= 0 && (size_t)n < sizeof pto_orch_msg_{m})")
    e.out(f"        snprintf(pto_orch_msg_{m} + n, sizeof pto_orch_msg_{m} - (size_t)n, what, v);")
    e.out("    return PTO_EINVAL;")
    e.out("}")
    e.out("/* Task counts for the window: trips of a loop as it runs them, saturating maths. */")
    e.out("__attribute__((unused)) static uint64_t _pto_trips(int64_t lo, int64_t hi, "
          "int64_t step) {")
    e.out("    return hi > lo && step > 0 ? ((uint64_t)hi - (uint64_t)lo - 1) / (uint64_t)step "
          "+ 1 : 0;")
    e.out("}")
    e.out("__attribute__((unused)) static uint64_t _pto_sat_mul(uint64_t a, uint64_t b) {")
    e.out("    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;")
    e.out("}")
    e.out("__attribute__((unused)) static uint64_t _pto_sat_add(uint64_t a, uint64_t b) {")
    e.out("    return a > UINT64_MAX - b ? UINT64_MAX : a + b;")
    e.out("}")
    e.out("/* Whole tiles: *h, the handle of x in r x c tiles, or -1 where they do not divide x")
    e.out(" * (or x is not a valid tensor: its submissions say so) and its CALLs pass rectangles;")
    e.out(" * an allocation failure is returned. */")
    e.out("__attribute__((unused)) static int _pto_tiles(PTORuntime* rt, const PTOTensor* x, "
          "int64_t r, int64_t c, int32_t* h) {")
    e.out("    *h = x->rows % r == 0 && x->cols % c == 0 ? pto_tensor_tiles(rt, x, r, c) : -1;")
    e.out("    if (*h == PTO_ENOMEM) return PTO_ENOMEM;")
    e.out("    if (*h < 0) *h = -1;")
    e.out("    return PTO_OK;")
    e.out("}")
    e.out("/* Tile (i, j) of x in r x c tiles as argument `kind` (INPUT/OUTPUT/INOUT): a TILE argument")
    e.out(" * of handle h, or the rectangle it stands for where h is -1. */")
    e.out("__attribute__((unused)) static inline PTOTaskArg _pto_tile_arg(int32_t kind, int32_t h, "
          "const PTOTensor* x, int64_t i, int64_t j, int64_t r, int64_t c) {")
    e.out("    if (h >= 0) return (PTOTaskArg){kind - PTO_ARG_INPUT + PTO_ARG_TILE_INPUT, NULL, i, j, "
          "0, 0, h};")
    e.out("    return (PTOTaskArg){kind, x, i * r, j * c, r, c, 0};")
    e.out("}")
    e.out("")
    e.out("/* Provided by the backend's runtime binding. Kernel table order: "
          + (", ".join(kernel_order(module)) or "(none)") + ". */")
    e.out(f"extern const PTOKernelFunc pto_kernels_{m}[];")
    e.out(f"void pto_binding_setup_{m}(PTORuntime* rt);")
    e.out("")
    orch = [f for f in module.functions.values() if not f.is_incore]
    for f in orch:                                   # prototypes: calls may go either way
        e.prototypes(f)
    if orch:
        e.out("")
    for f in orch:
        e.function(f)
        e.out("")
    e.entry()
    return "\n".join(e.lines) + "\n"
