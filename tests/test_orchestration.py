"""The orchestration emitter: platform-independent C that only calls the runtime API.

The strongest check compiles the generated C with a recording binding (each kernel logs the
argument slots it receives), runs it on the real runtime, and compares every task with what the
reference interpreter's ``trace_calls`` says the program does: callee, tensor window pointers
(footprint rule), row strides and scalars, in submission order."""

from __future__ import annotations

import ctypes
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_core import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule
from pto_core.abi import PTOTensor
from pto_core.driver import build_c_sources
from pto_core.codegen.orchestration import c_module_name, emit_orchestration, kernel_order
from pto_core.reference import trace_calls
from pto_core.shapes import derive_shapes

ROOT = Path(__file__).resolve().parents[1]  # the checkout

F32, I32, GM = ElementType.F32, ElementType.I32, MemorySpace.GLOBAL
sys.path.insert(0, str(ROOT / "examples"))


def control_module() -> PTOModule:
    """FOR with a dynamic bound, IF on a computed scalar, a 2-D window offset, int and float
    scalars passed to a kernel, and an orchestration function calling another."""
    m = PTOModule("ctl-demo")
    (PTOFunctionBuilder("scale", module=m).in_core()
     .memref("src", GM, F32).memref("dst", GM, F32)
     .scalar("k", I32).scalar("alpha", F32)
     .tile("x", 4, 8, F32).tile("y", 4, 8, F32)
     .load("x", "src").muls("y", "x", "alpha").store("dst", "y").build())
    (PTOFunctionBuilder("copy2", module=m).in_core()
     .memref("a", GM, F32).memref("b", GM, F32)
     .tile("x", 4, 8, F32).load("x", "a", 0, 1).store("b", "x", 0, 1).build())
    (PTOFunctionBuilder("tail", module=m).not_in_core()
     .memref("t", GM, F32).memref("u", GM, F32)
     .call("copy2", {"a": "t", "b": "u"}).build())
    (PTOFunctionBuilder("main_orch", module=m).not_in_core()
     .memref("inp", GM, F32).memref("out", GM, F32)
     .scalar("n", I32).scalar("odd", I32, param=False).scalar("two", I32, param=False)
     .scalar_li("two", 2)
     .for_loop("i", 0, "n", 1)
        .scalar_mod("odd", "i", "two")
        .if_then("odd")
           .call("scale", {"src": ("inp", "i", 1), "dst": ("out", "i", 1), "k": "i",
                           "alpha": 0.5})
        .else_()
           .call("scale", {"src": ("inp", "i", 0), "dst": ("out", "i", 0), "k": 7,
                           "alpha": 2.0})
        .end_if()
     .end_for()
     .call("tail", {"t": "inp", "u": "out"})
     .build())
    m.set_entry("main_orch")
    return m


def test_softmax_orchestration_uses_only_the_runtime_api():
    import fused_softmax
    c = emit_orchestration(fused_softmax.build_module())
    calls = set(re.findall(r"\b(pto_\w+)\s*\(", c))
    runtime_api = set(re.findall(r"\b(pto_\w+)\s*\(",
                                 (ROOT / "runtime/include/pto_runtime.h").read_text()))
    # what the file defines itself, and the binding's setup hook
    own = set(re.findall(r"\b(pto_\w+)\([^;{]*\)\s*\{", c)) | {"pto_binding_setup_softmax_module"}
    assert {"pto_module_run_softmax_module", "pto_orch_dynamic_softmax"} <= own
    assert calls - own <= runtime_api, calls - own - runtime_api
    # one submission per CALL - a range over every tile, as the loop's iterations are
    # independent: parameters in order, footprint-scaled offsets, declared modes
    assert len(re.findall(r"pto_task_submit_range\(", c)) == 5
    assert "pto_task_submit_v(" not in c
    assert ('pto_task_submit_range(rt, "rowexpandsub", pto_kernels_softmax_module[1], ' in c)
    seq = re.findall(r"\{(PTO_ARG_\w+), pto_v_(\w+), \(pto_v_tile_idx\) \* 8, \(0\) \* (\d+)", c)
    assert seq[:5] == [("PTO_ARG_INPUT", "input", "128"),
                       ("PTO_ARG_OUTPUT", "temp_max", "1"),
                       ("PTO_ARG_INPUT", "input", "128"),
                       ("PTO_ARG_INPUT", "temp_max", "1"),
                       ("PTO_ARG_OUTPUT", "temp_shifted", "128")]
    # the argument count, then the tiles: the loop's trip count
    assert "_pto_a, _pto_s, 2, (int64_t)_pto_n1);" in c
    assert "static int pto_orch_dynamic_softmax(PTORuntime* rt, PTOTensor* pto_v_input" in c
    assert "int64_t pto_v_num_tiles)" in c


def test_kernel_table_follows_module_order_and_names_are_c_identifiers():
    m = control_module()
    assert kernel_order(m) == ["scale", "copy2"]
    assert c_module_name(m) == "ctl_demo"
    c = emit_orchestration(m)
    assert "extern const PTOKernelFunc pto_kernels_ctl_demo[];" in c
    assert "static int pto_orch_tail(PTORuntime* rt, PTOTensor* pto_v_t, PTOTensor* pto_v_u)" in c
    assert ("int _pto_rc = pto_orch_tail(rt, pto_v_inp, pto_v_out); "
            "if (_pto_rc < 0) return _pto_rc;") in c
    assert "{PTO_ARG_SCALAR, 0, 0, 0, 0, 0, pto_f64_arg((double)(0.5))}" in c


def _recording_binding(module: PTOModule) -> str:
    m = c_module_name(module)
    lines = ['#include "pto_runtime.h"', "int64_t pto_test_log[4096][34];",
             "int32_t pto_test_count = 0;",
             "static void rec(int k, const int64_t* a, int n) {",
             # workers run kernels at once: each takes its row with an atomic increment
             "  int64_t* row = pto_test_log[__atomic_fetch_add(&pto_test_count, 1, __ATOMIC_RELAXED)];",
             "  row[0] = k; row[1] = n; for (int i = 0; i < n; i++) row[2 + i] = a[i]; }"]
    names = kernel_order(module)
    for k, n in enumerate(names):
        f = module.functions[n]
        slots = sum(2 if hasattr(p.type, "space") else 1 for p in f.params)
        lines.append(f"static int32_t k{k}(const int64_t* a) {{ rec({k}, a, {slots}); return 0; }}")
    lines.append(f"const PTOKernelFunc pto_kernels_{m}[] = {{ "
                 + ", ".join(f"k{k}" for k in range(len(names))) + " };")
    lines.append(f"void pto_binding_setup_{m}(PTORuntime* rt) {{ (void)rt; }}")
    return "\n".join(lines) + "\n"


def _build_with_recording_binding(tmp_path, m: PTOModule, orch_c: str):
    """A shared library of the generated orchestration, the runtime and a binding whose
    kernels only record their arguments (built as every module is, warnings as errors)."""
    build_c_sources("orch", {"orch.c": orch_c, "bind.c": _recording_binding(m)}, tmp_path,
                    werror=True)
    return tmp_path / "liborch.so"


def _check_recorded_tasks(tmp_path, m: PTOModule, entry: str, scalars: dict[str, int],
                          tensors: tuple[str, ...], workers: int) -> int:
    """Build ``m``'s orchestration with the recording binding, run it and compare every kernel
    call - callee, window pointers, row strides, scalars - with the reference's ``trace_calls``
    (as a multiset: workers may finish out of order). Returns the number of calls."""
    lib = _build_with_recording_binding(tmp_path, m, emit_orchestration(m))
    shapes = derive_shapes(m, scalars, {}, entry=entry)
    arrays = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    so = ctypes.CDLL(str(lib))
    tens = (PTOTensor * len(tensors))(*[PTOTensor(arrays[k].ctypes.data, *arrays[k].shape,
                                                  arrays[k].shape[1], 4, k.encode())
                                        for k in tensors])
    scal = (ctypes.c_int64 * len(scalars))(*scalars.values())
    run = getattr(so, f"pto_module_run_{c_module_name(m)}")
    assert run(tens, len(tensors), scal, len(scalars), workers, 0) == 0

    count = ctypes.c_int32.in_dll(so, "pto_test_count").value
    log = np.ctypeslib.as_array((ctypes.c_int64 * (4096 * 34)).in_dll(so, "pto_test_log"))
    log = log.reshape(4096, 34)[:count]
    expected = list(trace_calls(m, scalars, entry))
    assert count == len(expected)
    order = kernel_order(m)
    got = sorted((tuple(r[:2 + r[1]]) for r in log))
    want = []
    for tc in expected:
        fn = m.functions[tc.callee]
        slots = []
        regions = {r.param: r for r in tc.regions}
        values = dict(tc.scalars)
        for p in fn.params:
            if p.name in regions:
                r = regions[p.name]
                a = arrays[r.tensor]
                slots += [a.ctypes.data + (r.row_off * a.shape[1] + r.col_off) * 4, a.shape[1]]
            else:
                v = values[p.name]
                slots.append(int(np.array(float(v)).view(np.int64)) if p.type.dtype.is_float
                             else int(v))
        want.append((order.index(tc.callee), len(slots), *slots))
    assert got == sorted(want)
    return count


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("workers", [0, 2])
def test_generated_orchestration_submits_what_the_reference_traces(tmp_path, workers):
    n = 5
    assert _check_recorded_tasks(tmp_path, control_module(), "main_orch", {"n": n},
                                 ("inp", "out"), workers) == n + 1


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_build_entry_builds_the_graph_into_the_callers_runtime_without_running_it(tmp_path):
    """``pto_module_build_<m>`` submits the run's tasks into a runtime the caller created; none
    runs until the caller runs the runtime. Wrong argument counts or no runtime: PTO_EINVAL; a
    second build into the same runtime: PTO_ESTATE, nothing added (the binding's setup is made
    for a runtime without tasks), ``pto_module_error_<m>()`` saying why."""
    from pto_core.abi import PTO_EINVAL, PTO_ESTATE, PTORuntimeConfig, PTORuntimeStats
    m, n = control_module(), 5
    lib = _build_with_recording_binding(tmp_path, m, emit_orchestration(m))
    shapes = derive_shapes(m, {"n": n}, {}, entry="main_orch")
    arrays = {k: np.zeros(shapes[k], np.float32) for k in ("inp", "out")}
    so = ctypes.CDLL(str(lib))
    so.pto_runtime_create.restype = ctypes.c_void_p
    so.pto_runtime_create.argtypes = [ctypes.c_void_p]
    for f in ("pto_runtime_run", "pto_runtime_get_stats", "pto_runtime_destroy"):
        getattr(so, f).argtypes = [ctypes.c_void_p] + ([ctypes.c_void_p] if "stats" in f else [])
    build = getattr(so, f"pto_module_build_{c_module_name(m)}")
    build.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    tens = (PTOTensor * 2)(*[PTOTensor(a.ctypes.data, *a.shape, a.shape[1], 4, k.encode())
                             for k, a in arrays.items()])
    scal = (ctypes.c_int64 * 1)(n)
    cfg = PTORuntimeConfig()
    so.pto_runtime_config_default(ctypes.byref(cfg))
    cfg.num_workers, cfg.execution_task_threshold = 0, 0
    rt = so.pto_runtime_create(ctypes.byref(cfg))
    assert rt
    assert build(None, tens, 2, scal, 1) == PTO_EINVAL
    assert build(rt, tens, 1, scal, 1) == PTO_EINVAL
    assert build(rt, tens, 2, scal, 0) == PTO_EINVAL
    assert build(rt, tens, 2, scal, 1) == 0
    st = PTORuntimeStats()
    so.pto_runtime_get_stats(rt, ctypes.byref(st))
    assert st.tasks_submitted == n + 1
    assert ctypes.c_int32.in_dll(so, "pto_test_count").value == 0      # built, not run
    assert build(rt, tens, 2, scal, 1) == PTO_ESTATE
    error = getattr(so, f"pto_module_error_{c_module_name(m)}")
    error.restype = ctypes.c_char_p
    assert f"holds {n + 1} task(s) already" in error().decode()
    so.pto_runtime_get_stats(rt, ctypes.byref(st))
    assert st.tasks_submitted == n + 1
    assert so.pto_runtime_run(rt) == 0
    assert ctypes.c_int32.in_dll(so, "pto_test_count").value == n + 1
    so.pto_runtime_destroy(rt)


def untouched_param_module() -> PTOModule:
    """``use`` has a memref parameter ``aux`` it never touches; the orchestration passes it the
    buffer ``fill`` just wrote."""
    m = PTOModule("untouched")
    (PTOFunctionBuilder("fill", module=m).in_core()
     .memref("dst", GM, F32).tile("x", 4, 8, F32)
     .load("x", "dst").store("dst", "x").build())
    (PTOFunctionBuilder("use", module=m).in_core()
     .memref("src", GM, F32).memref("aux", GM, F32).memref("dst", GM, F32)
     .tile("x", 4, 8, F32).load("x", "src").store("dst", "x").build())
    (PTOFunctionBuilder("orch", module=m).not_in_core()
     .memref("buf", GM, F32).memref("inp", GM, F32).memref("out", GM, F32)
     .call("fill", {"dst": "buf"})
     .call("use", {"src": "inp", "aux": ("buf", 1, 2), "dst": "out"})
     .build())
    m.set_entry("orch")
    return m


def test_untouched_parameter_is_passed_without_a_dependency(tmp_path, monkeypatch):
    m = untouched_param_module()
    c = emit_orchestration(m)
    assert "{PTO_ARG_UNTRACKED, pto_v_buf, 1, 2, 0, 0, 0}" in c
    use_block = c[c.index("/* CALL @use */"):]
    use_block = use_block[:use_block.index("pto_task_submit_v")]
    assert re.findall(r"PTO_ARG_(\w+), (?:_pto_tiles_\w+, )?pto_v_(\w+)", use_block) == [
        ("INPUT", "inp"), ("UNTRACKED", "buf"), ("OUTPUT", "out")]
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the generated C is not run")
    lib = _build_with_recording_binding(tmp_path, m, c)
    arrays = {k: np.zeros((4, 8), np.float32) for k in ("buf", "inp", "out")}
    tens = (PTOTensor * 3)(*[PTOTensor(arrays[k].ctypes.data, 4, 8, 8, 4, k.encode())
                              for k in ("buf", "inp", "out")])
    monkeypatch.setenv("PTO_STATS", str(tmp_path / "stats.json"))   # read by the runtime
    so = ctypes.CDLL(str(lib))
    assert so.pto_module_run_untouched(tens, 3, None, 0, 0, 0) == 0
    import json
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["tasks"] == 2 and stats["edges"] == 0
    # the kernel still got aux's two slots: pointer to buf[1, 2] and buf's row stride
    log = np.ctypeslib.as_array((ctypes.c_int64 * (4096 * 34)).in_dll(so, "pto_test_log"))
    use = log.reshape(4096, 34)[1]
    assert use[0] == kernel_order(m).index("use") and use[1] == 6
    assert use[4] == arrays["buf"].ctypes.data + (1 * 8 + 2) * 4 and use[5] == 8


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("workers", [0, 2])
def test_an_orchestration_error_stops_the_function_and_is_what_the_caller_gets(tmp_path, workers):
    """Tensors too small for the loop: the submission that leaves `inp` fails with
    PTO_EBOUNDS, the orchestration stops there, what was submitted still runs, and the entry
    point returns the error instead of reporting success with tasks missing."""
    m = control_module()
    c = emit_orchestration(m)
    assert "if (_pto_rc < 0) return _pto_rc;" in c and "int pto_orch_main_orch(" in c
    lib = _build_with_recording_binding(tmp_path, m, c)
    n = 5
    rows, cols = derive_shapes(m, {"n": n}, {}, entry="main_orch")["inp"]
    short = {k: np.zeros((rows - 4, cols), np.float32) for k in ("inp", "out")}  # one tile short
    tens = (PTOTensor * 2)(*[PTOTensor(short[k].ctypes.data, *short[k].shape,
                                         short[k].shape[1], 4, k.encode())
                              for k in ("inp", "out")])
    so = ctypes.CDLL(str(lib))
    PTO_EBOUNDS = -6
    assert so.pto_module_run_ctl_demo(tens, 2, (ctypes.c_int64 * 1)(n), 1, workers, 0) == PTO_EBOUNDS
    # tiles 0..3 were submitted and ran; tile 4 and the call of `tail` after the loop did not
    assert ctypes.c_int32.in_dll(so, "pto_test_count").value == n - 1


def loop_module(bound: str = "n") -> PTOModule:
    """``n`` tiles in steps of 2, two tasks per step (an IF), one more after the loop; with
    ``bound="lim"`` the loop runs to a scalar the function computes."""
    m = PTOModule("win")
    (PTOFunctionBuilder("copy", module=m).in_core()
     .memref("a", GM, F32).memref("b", GM, F32)
     .tile("x", 4, 8, F32).load("x", "a").store("b", "x").build())
    b = (PTOFunctionBuilder("orch", module=m).not_in_core()
         .memref("inp", GM, F32).memref("out", GM, F32).scalar("n", I32))
    if bound != "n":
        b = b.scalar(bound, I32, param=False).scalar_li(bound, 6)
    (b.for_loop("i", 0, bound, 2)
        .if_then("i")
           .call("copy", {"a": ("inp", "i", 0), "b": ("out", "i", 0)})
        .else_()
           .call("copy", {"a": ("inp", "i", 0), "b": ("out", "i", 0)})
        .end_if()
        .call("copy", {"a": ("inp", "i", 0), "b": ("out", "i", 0)})
     .end_for()
     .call("copy", {"a": "inp", "b": "out"})
     .build())
    m.set_entry("orch")
    return m


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("module, n, window", [
    (loop_module(), 0, 2),             # one task: the smallest window
    (loop_module(), 6, 16),            # 3 steps x 2 + 1 = 7 tasks; bound (both branches of
    (loop_module(), 64, 128),          # the IF): 3 x 3 + 1 = 10, and 32 x 3 + 1 = 97
    (loop_module("lim"), 6, 16384),    # a bound the function computes: the default window
    (control_module(), 5, 16384),      # calls another orchestration function: the default
], ids=["none", "small", "larger", "computed-bound", "nested-orchestration"])
def test_a_run_sizes_the_task_window_to_the_tasks_its_orchestration_bounds(
        tmp_path, monkeypatch, module, n, window):
    """Setting up the default window costs more than a small run; a window that holds every
    task is as good as a larger one."""
    c = emit_orchestration(module)
    assert ("_pto_tasks" in c) == (window != 16384)
    lib = _build_with_recording_binding(tmp_path, module, c)
    shapes = derive_shapes(module, {"n": max(n, 1)}, {}, entry=module.entry)
    arrays = {k: np.zeros((s[0] * 2, s[1] * 2), np.float32) for k, s in shapes.items()}
    names = [p.name for p in module.functions[module.entry].params if p.name in arrays]
    tens = (PTOTensor * 2)(*[PTOTensor(arrays[k].ctypes.data, *arrays[k].shape,
                                         arrays[k].shape[1], 4, k.encode()) for k in names])
    monkeypatch.setenv("PTO_STATS", str(tmp_path / "stats.json"))   # read by the runtime
    so = ctypes.CDLL(str(lib))
    run = getattr(so, f"pto_module_run_{c_module_name(module)}")
    assert run(tens, 2, (ctypes.c_int64 * 1)(n), 1, 0, 0) == 0
    import json
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["task_window"] == window
    assert stats["tasks"] <= window or window == 16384


# ---------------------------------------------------------------- range tasks

def range_module(overlap: str | None = None) -> PTOModule:
    """A loop of independent iterations: ``scale`` reads tile i of ``inp`` (and the whole tile
    (0, 0) of ``w``), takes the index as an int scalar, writes tile i of ``mid``; ``copy``
    reads tile i of ``mid`` and writes tile (0, i) of ``out`` (across the columns).
    ``overlap`` makes iterations depend on each other: "accumulate" (every iteration updates
    tile (0, 0) of ``out``), "other-tile" (``copy`` reads ``mid`` at another region than
    ``scale`` writes), "diagonal" (``scale`` writes tile (i, i))."""
    m = PTOModule("ranges")
    (PTOFunctionBuilder("scale", module=m).in_core()
     .memref("src", GM, F32).memref("w", GM, F32).memref("dst", GM, F32)
     .scalar("k", I32).scalar("alpha", F32)
     .tile("x", 4, 8, F32).tile("v", 4, 8, F32).tile("y", 4, 8, F32)
     .load("x", "src").load("v", "w").add("y", "x", "v").muls("y", "y", "alpha")
     .store("dst", "y").build())
    (PTOFunctionBuilder("copy", module=m).in_core()
     .memref("src", GM, F32).memref("dst", GM, F32)
     .tile("x", 4, 8, F32).load("x", "src").store("dst", "x").build())
    (PTOFunctionBuilder("accum", module=m).in_core()
     .memref("src", GM, F32).memref("acc", GM, F32)
     .tile("x", 4, 8, F32).tile("a", 4, 8, F32)
     .load("x", "src").load("a", "acc").add("a", "a", "x").store("acc", "a").build())
    mid = ("mid", "i", "i") if overlap == "diagonal" else ("mid", "i", 0)
    b = (PTOFunctionBuilder("orch", module=m).not_in_core()
         .memref("inp", GM, F32).memref("w", GM, F32).memref("mid", GM, F32)
         .memref("out", GM, F32).scalar("n", I32)
         .for_loop("i", 0, "n", 1)
            .call("scale", {"src": ("inp", "i", 0), "w": ("w", 0, 0), "dst": mid, "k": "i",
                            "alpha": 2.0}))
    if overlap == "accumulate":
        b = b.call("accum", {"src": ("mid", "i", 0), "acc": ("out", 0, 0)})
    elif overlap == "other-tile":
        b = b.call("copy", {"src": ("mid", 0, 0), "dst": ("out", 0, "i")})
    elif overlap != "diagonal":
        b = b.call("copy", {"src": ("mid", "i", 0), "dst": ("out", 0, "i")})
    b.end_for().build()
    m.set_entry("orch")
    return m


def test_a_loop_of_independent_iterations_submits_one_range_per_call():
    c = emit_orchestration(range_module())
    assert "pto_task_submit_v(" not in c
    assert len(re.findall(r"pto_task_submit_range\(", c)) == 2
    # per tile: inp moves one footprint down, w stays, mid moves down, k counts up, alpha stays;
    # out moves one footprint across
    assert ("{0, 0, 4, 0, 0, 0, 0},\n                    {0, 0, 0, 0, 0, 0, 0},\n"
            "                    {0, 0, 4, 0, 0, 0, 0},\n                    {0, 0, 0, 0, 0, 0, 1},\n"
            "                    {0, 0, 0, 0, 0, 0, 0}\n") in c
    assert "{0, 0, 0, 8, 0, 0, 0}\n" in c


@pytest.mark.parametrize("overlap", ["accumulate", "other-tile", "diagonal"])
def test_a_loop_whose_iterations_overlap_is_not_a_range(overlap):
    c = emit_orchestration(range_module(overlap))
    assert "pto_task_submit_range(" not in c
    assert "for (uint64_t _pto_k1 = 0; _pto_k1 < _pto_n1; _pto_k1++)" in c
    assert "pto_task_submit_v(" in c


def test_the_rowmax_example_is_one_range():
    import rowmax
    c = emit_orchestration(rowmax.build_module())
    assert c.count("pto_task_submit_range(rt, \"rowmax\"") == 1
    assert "pto_task_submit_v(" not in c


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("workers", [0, 3])
@pytest.mark.parametrize("n", [1, 7])
def test_every_tile_of_a_range_gets_what_the_reference_traces(tmp_path, workers, n):
    assert _check_recorded_tasks(tmp_path, range_module(), "orch", {"n": n},
                                 ("inp", "w", "mid", "out"), workers) == 2 * n


def test_the_range_tasks_option_keeps_every_tile_its_own_task(tmp_path):
    """``CompileOptions(extra=(("range_tasks", False),))`` (what tests of per-task launch
    shaping build with) submits the softmax loop one task per tile and CALL; the default makes
    each CALL one range."""
    import fused_softmax
    from pto_core.driver import compile_module
    from pto_core.options import CompileOptions
    m = fused_softmax.build_module()
    assert "pto_task_submit_range(" not in emit_orchestration(m, ranges=False)

    def orchestration(options: CompileOptions, out: Path) -> str:
        texts = [p.read_text() for p in compile_module("arm64", m, out, options)
                 if p.suffix == ".c"]
        return next(t for t in texts if "pto_module_run_" in t and "pto_task_" in t)

    per_tile = orchestration(CompileOptions(extra=(("range_tasks", False),)), tmp_path / "a")
    assert "pto_task_submit_range(" not in per_tile and "pto_task_submit_v(" in per_tile
    ranged = orchestration(CompileOptions(), tmp_path / "b")
    assert len(re.findall(r"pto_task_submit_range\(", ranged)) == 5


# ---------------------------------------------------------------- the calling thread's part

def _thread_recording_binding(module: PTOModule) -> str:
    """Kernels that note which threads run them; one on any other thread than the calling one
    waits (at most ``pto_test_wait_ms``, once per run) until a kernel ran on the calling
    thread."""
    m = c_module_name(module)
    lines = ['#include "pto_runtime.h"', "#include <stdatomic.h>", "#include <sys/syscall.h>",
             "#include <time.h>", "#include <unistd.h>",
             "long pto_test_caller;                 /* the calling thread's id, set by the test */",
             "int pto_test_wait_ms;", "atomic_int pto_test_on_caller, pto_test_gave_up;",
             "atomic_long pto_test_others[8];       /* the other threads' ids, as they come */",
             "static int32_t k(const int64_t* a) {",
             "  (void)a; const long me = syscall(SYS_gettid);",
             "  if (me == pto_test_caller) { atomic_store(&pto_test_on_caller, 1); return 0; }",
             "  for (int i = 0; i < 8; i++) {",
             "    long none = 0;",
             "    if (atomic_compare_exchange_strong(&pto_test_others[i], &none, me) || none == me) break;",
             "  }",
             "  const struct timespec ms = {0, 1000000};",
             "  for (int i = 0; !atomic_load(&pto_test_on_caller) && !atomic_load(&pto_test_gave_up); i++) {",
             "    if (i >= pto_test_wait_ms) atomic_store(&pto_test_gave_up, 1);",
             "    else nanosleep(&ms, NULL);",
             "  }",
             "  return 0; }"]
    lines.append(f"const PTOKernelFunc pto_kernels_{m}[] = {{ "
                 + ", ".join("k" for _ in kernel_order(module)) + " };")
    lines.append(f"void pto_binding_setup_{m}(PTORuntime* rt) {{ (void)rt; }}")
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("threshold", [0, 1])
def test_a_safe_mode_run_has_the_calling_thread_as_one_of_its_workers(tmp_path, threshold):
    """In safe mode (threshold 0) the calling thread would only wait while the run goes on, so
    it runs tasks: with 2 workers, one pool thread and the calling thread share the tiles (one
    thread fewer to hand the run to). A pipelined run (threshold > 0) builds on the calling
    thread while the workers run, so both workers are pool threads."""
    import threading
    m = range_module()
    build_c_sources("orch", {"orch.c": emit_orchestration(m), "bind.c": _thread_recording_binding(m)},
                    tmp_path, werror=True)
    so = ctypes.CDLL(str(tmp_path / "liborch.so"))
    ctypes.c_long.in_dll(so, "pto_test_caller").value = threading.get_native_id()
    ctypes.c_int.in_dll(so, "pto_test_wait_ms").value = 20000 if threshold == 0 else 0
    n = 16
    shapes = derive_shapes(m, {"n": n}, {}, entry="orch")
    arrays = {k: np.zeros(s, np.float32) for k, s in shapes.items()}
    names = ("inp", "w", "mid", "out")
    tens = (PTOTensor * 4)(*[PTOTensor(arrays[k].ctypes.data, *arrays[k].shape,
                                       arrays[k].shape[1], 4, k.encode()) for k in names])
    run = getattr(so, f"pto_module_run_{c_module_name(m)}")
    assert run(tens, 4, (ctypes.c_int64 * 1)(n), 1, 2, threshold) == 0
    on_caller = ctypes.c_int.in_dll(so, "pto_test_on_caller").value
    others = {t for t in (ctypes.c_long * 8).in_dll(so, "pto_test_others") if t}
    if threshold == 0:
        assert on_caller == 1 and len(others) <= 1
    else:
        assert on_caller == 0 and len(others) >= 1


# ---------------------------------------------------------------- tile arguments

#: prepended to the orchestration C: counts the tilings pto_tensor_tiles registered (the
#: orchestration's own include of pto_runtime.h is then skipped by its guard), and links the dump
_COUNT_TILINGS = """#include "pto_runtime.h"
int pto_test_tilings;
int64_t pto_test_dump(PTORuntime* rt, char* buf, int64_t cap) { return pto_runtime_dump_buffer(rt, buf, cap); }
static int32_t pto_test_tensor_tiles(PTORuntime* rt, const PTOTensor* x, int64_t r, int64_t c) {
    const int32_t h = pto_tensor_tiles(rt, x, r, c);
    pto_test_tilings += h >= 0;
    return h;
}
#define pto_tensor_tiles pto_test_tensor_tiles
"""


def _graph(tmp_path, m: PTOModule, arrays: dict[str, np.ndarray], scalars: dict[str, int],
           **emit) -> tuple[str, int, list[tuple]]:
    """The graph ``m``'s generated orchestration (``emit_orchestration(m, **emit)``) builds
    over ``arrays`` - its dump (tasks, fan-ins, every edge) after the run - with the tilings it
    registered and each kernel call's slots (sorted), run one thread with the recording
    binding."""
    from pto_core.abi import PTORuntimeConfig
    lib = _build_with_recording_binding(tmp_path, m, _COUNT_TILINGS + emit_orchestration(m, **emit))
    so = ctypes.CDLL(str(lib))
    so.pto_runtime_create.restype = ctypes.c_void_p
    so.pto_runtime_create.argtypes = [ctypes.c_void_p]
    for f in ("pto_runtime_run", "pto_runtime_destroy"):
        getattr(so, f).argtypes = [ctypes.c_void_p]
    so.pto_test_dump.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
    so.pto_test_dump.restype = ctypes.c_int64
    entry = m.functions[m.entry]
    names = [p.name for p in entry.params if p.name in arrays]
    tens = (PTOTensor * len(names))(*[PTOTensor(arrays[k].ctypes.data, *arrays[k].shape,
                                                arrays[k].shape[1], 4, k.encode()) for k in names])
    scal = (ctypes.c_int64 * max(1, len(scalars)))(*scalars.values())
    cfg = PTORuntimeConfig()
    so.pto_runtime_config_default(ctypes.byref(cfg))
    cfg.num_workers, cfg.record_graph = 0, 1
    rt = so.pto_runtime_create(ctypes.byref(cfg))
    assert rt
    build = getattr(so, f"pto_module_build_{c_module_name(m)}")
    build.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    assert build(rt, tens, len(names), scal, len(scalars)) == 0
    assert so.pto_runtime_run(rt) == 0
    buf = ctypes.create_string_buffer(1 << 22)
    assert so.pto_test_dump(rt, buf, len(buf)) < len(buf)
    so.pto_runtime_destroy(rt)
    count = ctypes.c_int32.in_dll(so, "pto_test_count").value
    log = np.ctypeslib.as_array((ctypes.c_int64 * (4096 * 34)).in_dll(so, "pto_test_log"))
    calls = sorted(tuple(r[:2 + r[1]]) for r in log.reshape(4096, 34)[:count])
    return buf.value.decode(), ctypes.c_int.in_dll(so, "pto_test_tilings").value, calls


def _example_case(name: str):
    import bgemm
    import fused_softmax
    import llama7b_layer
    if name == "llama":
        return llama7b_layer.build_module(), {"num_tiles": 6}, {}
    if name == "bgemm":
        return bgemm.build_module(), {"batch": 2, "m_tiles": 2, "n_tiles": 3, "k_tiles": 2}, {}
    if name.startswith("softmax"):
        return fused_softmax.build_module(), {"num_tiles": 5}, {"ranges": name == "softmax"}
    # partial tiles: the same loop over tensors whose rows are no multiple of the footprint (4)
    # but for `out`: `inp` keeps rectangles, `out` goes in whole tiles
    return loop_module(), {"n": 6}, {}


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.parametrize("case, tilings", [
    ("llama", 9), ("bgemm", 3), ("softmax-per-tile", 6), ("softmax", 0), ("partial", 1)])
def test_tile_arguments_build_the_graph_of_the_rectangles(tmp_path, case, tilings):
    """Whole tiles (``pto_tensor_tiles`` + TILE arguments) where a CALL passes a tensor
    parameter's footprint, rectangles where it cannot (range tasks, intermediates, a tiling that
    does not divide the tensor): the dump (every task and edge) and every kernel's slots are
    those of the rectangles alone."""
    m, scalars, emit = _example_case(case)
    shapes = derive_shapes(m, scalars, {}, entry=m.entry)
    rng = np.random.default_rng(1)
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    if case == "partial":
        arrays["inp"] = np.zeros((shapes["inp"][0] + 2, shapes["inp"][1]), np.float32)
    c = emit_orchestration(m, **emit)
    assert ("_pto_tile_arg(PTO_ARG" in c) == (tilings > 0)
    # one registration per (tensor, tile shape); the partial case's `inp` falls back at run time
    assert c.count("_pto_tiles(rt, ") == tilings + (case == "partial")
    assert "_pto_tile_arg(PTO_ARG" not in emit_orchestration(m, **emit, tile_args=False)
    dump, registered, calls = _graph(tmp_path / "tiles", m, arrays, scalars, **emit)
    plain, none, plain_calls = _graph(tmp_path / "rects", m, arrays, scalars, **emit,
                                      tile_args=False)
    assert (registered, none) == (tilings, 0)
    assert re.search(r"edges\D*[1-9]", dump, re.I), dump[:400]
    assert dump == plain
    assert calls == plain_calls and len(calls) > 0


def test_the_tile_args_option_passes_every_region_as_its_rectangle(tmp_path):
    """``CompileOptions(extra=(("tile_args", False),))`` emits no tiling; the default passes the
    bgemm CALLs' regions as whole tiles."""
    import bgemm
    from pto_core.driver import compile_module
    from pto_core.options import CompileOptions

    def orchestration(options: CompileOptions, out: Path) -> str:
        texts = [p.read_text() for p in compile_module("arm64", bgemm.build_module(), out, options)
                 if p.suffix == ".c"]
        return next(t for t in texts if "pto_module_run_" in t and "pto_task_" in t)

    plain = orchestration(CompileOptions(extra=(("tile_args", False),)), tmp_path / "a")
    assert "_pto_tiles(rt, " not in plain and "_pto_tile_arg(PTO_ARG" not in plain
    tiled = orchestration(CompileOptions(), tmp_path / "b")
    assert tiled.count("_pto_tiles(rt, ") == 3 and "_pto_tile_arg(PTO_ARG_OUTPUT" in tiled
