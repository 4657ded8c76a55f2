"""Fidelity: the kernels the Ascend backends generate compile unchanged against the official
PTO-ISA library (hw-native-sys/pto-isa, ``-D__CPU_SIM``, C++20, zig's clang), run on its CPU
simulator through the CPU check's harness, and agree with the reference interpreter and with
the plugin's own CPU-check header (:mod:`pto_ascend_common.official_sim`)."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from pto_ascend_common import A2A3, A5, cpu_check, official_sim
from pto_ascend_common.testing import assert_agrees, check_program, example_programs
from pto_core.checking import program_inputs
from pto_core.driver import compile_module
from pto_core.program import load_program

MISSING = official_sim.missing()
# slow: zig compiles the official headers (5-15 s a kernel, its libc++ once ~60 s)
pytestmark = [pytest.mark.skipif(MISSING is not None, reason=f"needs {MISSING}"), pytest.mark.slow]

ARCHS = [A2A3, A5]

#: the examples; the large ones (tens of kernels: ~25 s of zig per target) are slow
EXAMPLES = [pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if p.stem == "llama7b_layer" else [])
            for p in example_programs()]

#: a host program that runs the unchanged rowmax kernel on two threads (two simulated cores)
#: and prints, per thread, the architecture and UB size its memory model was initialised with
THREADS_MAIN = textwrap.dedent("""
    #include <cstdio>
    #include <thread>
    extern "C" void pto_aicore_rowmax(float*, int64_t, float*, int64_t);
    static void core(int id, float* in, float* out) {
        pto_sim::reset_error();
        pto_aicore_rowmax(in + id * 8 * 128, 128, out + id * 8, 1);
        auto& m = pto::NPUMemoryModel::Instance();
        std::printf("core %d arch %d ub %zu\\n", id, int(m.GetArch()), m.GetSizes()[1]);
    }
    int main() {
        static float in[2 * 8 * 128], out[16];
        for (int i = 0; i < 2 * 8 * 128; i++) in[i] = float((i * 37) % 101) - 50.0f + i / 128;
        std::thread a(core, 0, in, out), b(core, 1, in, out);
        a.join(); b.join();
        for (int r = 0; r < 16; r++) std::printf("%g ", out[r]);
        std::printf("\\n");
    }
""")


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: a.name)
def test_generated_kernel_compiles_unchanged_and_each_thread_is_a_core_of_the_target(tmp_path, arch):
    rowmax = next(p for p in example_programs() if p.stem == "rowmax")
    sources = compile_module(arch.name, load_program(rowmax).module, tmp_path)
    kernel = next(p for p in sources if p.name == "rowmax.cpp")
    zig = list(official_sim.compiler())
    include = f"-I{official_sim.isa_root() / 'include'}"
    # the kernel file alone, as the library's README compiles a kernel: an object file (-O1:
    # zig builds -O0 code with the undefined-behaviour sanitizer, which a plain link lacks)
    r = subprocess.run([*zig, "-std=c++20", "-D__CPU_SIM", "-O1", "-include", "cstdint", include,
                        "-c", str(kernel), "-o", str(tmp_path / "rowmax.o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    main = tmp_path / "main.cpp"
    main.write_text(THREADS_MAIN)
    flags = [f for f in official_sim.official_flags(arch) if f != "-fPIC"]
    exe = tmp_path / "rowmax_threads"
    r = subprocess.run([*zig, *flags, str(main), str(tmp_path / "rowmax.o"), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout
    arch_id = {"A2A3": 0, "A5": 1}[official_sim.NPU_ARCH[arch.name]]
    ub = max(arch.capacities["UB"], 512 * 1024)       # the simulator's default UB scratch
    for core in (0, 1):
        assert f"core {core} arch {arch_id} ub {ub}" in out, out
    maxima = [float(x) for x in out.strip().split("\n")[-1].split()]
    assert maxima == [50.0 + r // 8 * 8 + r % 8 for r in range(16)]


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: a.name)
@pytest.mark.parametrize("path", EXAMPLES)
def test_example_on_the_official_simulator_matches_the_reference_and_our_header(
        tmp_path, arch, path):
    official = check_program(arch, path, tmp_path / "official", run=official_sim.run)
    assert official, "the program wrote no tensor"
    p = load_program(path)
    ins, _ = program_inputs(p)
    ours = cpu_check.run(arch, p.module, tmp_path / "own", ins, p.defaults)
    theirs = official_sim.run(arch, p.module, tmp_path / "official", ins, p.defaults)
    assert_agrees(theirs, ours, p.module.uses_matmul,
                  f"{path.name} on {arch.name}: our CPU-check header against the official one")


def test_an_int32_column_sum_is_rejected_by_the_official_cpu_code(tmp_path):
    """A divergence kept on our side (docs/ascend-fidelity.md): the ISA page lists int32 for
    TCOLSUM, the official CPU implementation does not compile it. The build fails with the
    library's message, naming the target."""
    from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
    from pto_core.errors import PTOBackendError
    m = PTOModule("m")
    f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.I32)
         .memref("o", M.GLOBAL, T.I32).tile("x", 8, 8, T.I32).tile("s", 1, 8, T.I32)
         .load("x", "a").colsum("s", "x").store("o", "s").build())
    assert f is not None
    with pytest.raises(PTOBackendError) as e:
        official_sim.build(A5, m, tmp_path)
    assert "ascend_a5" in str(e.value) and "Not supported data type" in str(e.value)



@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: a.name)
def test_a_transpose_in_place_transposes(tmp_path, arch):
    """``%x = ttrans %x`` (found by the fuzzer, program 20): the library's TTRANS reads
    elements it has already written when dst is src, which the official simulator shows
    (our header did not); the kernel transposes a copy. f16 3 x 3 and f32 16 x 16 tiles."""
    import numpy as np
    from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
    m = PTOModule("m")
    ins = {}
    for dt, n in ((T.F16, 3), (T.F32, 16)):
        (PTOFunctionBuilder(f"k_{dt.value}", module=m).in_core()
         .memref("a", M.GLOBAL, dt).memref("o", M.GLOBAL, dt).tile("x", n, n, dt)
         .load("x", "a").trans("x", "x").store("o", "x").build())
        ins[f"a_{dt.value}"] = np.arange(n * n).reshape(n, n).astype(dt.numpy_name)
        ins[f"o_{dt.value}"] = np.zeros((n, n), dt.numpy_name)
    entry = PTOFunctionBuilder("run", module=m).not_in_core()
    for dt in (T.F16, T.F32):
        entry.memref(f"a_{dt.value}", M.GLOBAL, dt).memref(f"o_{dt.value}", M.GLOBAL, dt)
        entry.call(f"k_{dt.value}", {"a": f"a_{dt.value}", "o": f"o_{dt.value}"})
    entry.build()
    m.set_entry("run")
    got = official_sim.run(arch, m, tmp_path, ins)
    for dt in (T.F16, T.F32):
        np.testing.assert_array_equal(got[f"o_{dt.value}"], ins[f"a_{dt.value}"].T,
                                      err_msg=dt.value)


def test_missing_headers_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv(official_sim.ENV, str(tmp_path / "nowhere"))
    why = official_sim.missing()
    assert why is not None and "nowhere" in why and "PTO_ISA_ROOT" in why
    with pytest.raises(Exception) as e:
        official_sim.toolchain(A2A3)
    assert "official CPU simulator: missing" in str(e.value)


def test_an_abort_of_the_official_simulator_is_an_error_with_its_message(tmp_path):
    """The official simulator asserts on a float reciprocal of zero (docs/ascend-fidelity.md)
    and aborts; the kernels run in a child process, so the run fails with a PTOError that
    carries the library's message, and the caller (here pytest) lives on."""
    import numpy as np
    from pto_core import ElementType as T, MemorySpace as M, PTOFunctionBuilder, PTOModule
    from pto_core.errors import PTOError
    m = PTOModule("m")
    (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.F32)
     .memref("b", M.GLOBAL, T.F32).memref("o", M.GLOBAL, T.F32).tile("x", 8, 8, T.F32)
     .tile("y", 8, 8, T.F32).load("x", "a").load("y", "b").recip("y", "y").mul("x", "x", "y")
     .store("o", "x").build())
    (PTOFunctionBuilder("run", module=m).not_in_core().memref("a", M.GLOBAL, T.F32)
     .memref("b", M.GLOBAL, T.F32).memref("o", M.GLOBAL, T.F32)
     .call("k", {"a": ("a", 0, 0), "b": ("b", 0, 0), "o": ("o", 0, 0)}).build())
    m.set_entry("run")
    a, b = np.ones((8, 8), np.float32), np.ones((8, 8), np.float32)
    ok = official_sim.run(A5, m, tmp_path, {"a": a, "b": b})
    assert (ok["o"] == 1.0).all()
    b[3, 4] = 0.0
    with pytest.raises(PTOError) as e:
        official_sim.run(A5, m, tmp_path, {"a": a, "b": b})
    assert "ascend_a5 official CPU simulator" in str(e.value)
    assert "Divider cannot be equal to zero" in str(e.value)
    # our header follows IEEE there, as the reference does
    assert cpu_check.run(A5, m, tmp_path / "own", {"a": a, "b": b})["o"][3, 4] == np.inf
