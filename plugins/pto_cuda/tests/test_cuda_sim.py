"""Does the CPU simulator (``pto_cuda/sim``) model CUDA faithfully?

Tests of PTO's generated kernels on the simulator only mean something if the simulator behaves
like a GPU where those kernels rely on it. ``sim_selftest.cu`` is one hand-written CUDA program
with a sub-test per behaviour; it is built once per session against the simulator (g++,
``-DPTO_CUDA_SIM``) and each test runs one sub-test and checks what it prints against numpy /
ml_dtypes / the CUDA semantics. The same file must also compile with nvcc
(``test_selftest_is_valid_cuda``), so the simulator cannot be accepting things CUDA rejects.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pto_cuda import scons_tool

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

HERE = Path(__file__).resolve().parent
RUN_TIMEOUT = 20          # seconds; every sub-test takes well under one


def scons_selftest(out: Path, *args: str) -> subprocess.CompletedProcess:
    """``sim_selftest.scons``: sim_selftest.cu built by the backend's SCons tool into ``out``
    (SCons' ``-s``: what remains in the output is the compilers')."""
    return subprocess.run([sys.executable, "-c", "import SCons.Script; SCons.Script.main()",
                           "-Q", "-s", "-j2", "-C", str(HERE), "-f", "sim_selftest.scons",
                           f"out={out}", *args], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def selftest(build_once) -> Path:
    """sim_selftest built against the simulator (compiled once per test run, whichever
    pytest-xdist worker asks first)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")

    def build(d: Path) -> None:
        r = scons_selftest(d)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr

    return build_once("sim_selftest", build) / "sim_selftest"


def run(exe: Path, name: str) -> subprocess.CompletedProcess:
    """Run one sub-test; a hang is a failure (TimeoutExpired), not a stuck test run."""
    r = subprocess.run([str(exe), name], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert r.returncode == 0, f"sub-test {name} exited {r.returncode}\n{r.stdout[-2000:]}{r.stderr}"
    return r


def parse(out: str) -> dict[str, list[str]]:
    """``key v1 v2 ...`` lines -> {key: [v1, v2, ...]}."""
    d: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.strip():
            key, *vals = line.split()
            d[key] = vals
    return d


def floats(vals: list[str]) -> np.ndarray:
    """Values printed with %a (exact) or %d."""
    return np.array([float.fromhex(v) if "x" in v else float(v) for v in vals])


# ------------------------------------------------------------------ the program itself

def test_selftest_is_valid_cuda(tmp_path):
    """The same source compiles with nvcc for sm_90, warnings as errors, silently."""
    if scons_tool.find_nvcc() is None:
        pytest.skip("nvcc not found")
    r = scons_selftest(tmp_path, "nvcc=1")
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    assert (tmp_path / "sim_selftest.o").is_file()


def test_unknown_subtest_is_an_error(selftest):
    r = subprocess.run([str(selftest), "no_such_test"], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT)
    assert r.returncode != 0 and "unknown sub-test" in r.stderr


# ------------------------------------------------------------------ 1. __syncthreads

def test_syncthreads_orders_shared_memory(selftest):
    """256 threads per block (3 blocks), 8 phases of: write s[t], barrier, read the value a
    neighbour wrote, barrier; then a shared-memory tree reduction (8 more barriers)."""
    d = parse(run(selftest, "sync").stdout)
    assert d["errors"] == ["0"]
    n = 256
    assert [int(v) for v in d["sums"]] == [sum(t + 1 + b for t in range(n)) for b in range(3)]


def test_missing_syncthreads_is_visible(selftest):
    """The same kernel without the barriers reads stale neighbour values: a fiber runs until
    it synchronises, so a race in a kernel shows up on the simulator instead of passing."""
    d = parse(run(selftest, "race").stdout)
    assert int(d["stale"][0]) > 0


# ------------------------------------------------------------------ 2. warp shuffles

def _check_shuffles(d: dict[str, list[str]], key: str, exact_sums: bool):
    v = floats(d[f"{key}.in"])
    n = v.size
    lanes = np.arange(n) % 32
    warps = np.arange(n) // 32
    w = v.reshape(-1, 32)
    totals = w.sum(axis=1)
    if exact_sums:
        np.testing.assert_array_equal(floats(d[f"{key}.xor"]), np.repeat(totals, 32))
        np.testing.assert_array_equal(floats(d[f"{key}.down"]), totals)
        np.testing.assert_array_equal(floats(d[f"{key}.half"]),
                                      np.repeat(v.reshape(-1, 16).sum(axis=1), 16))
    else:
        xor = floats(d[f"{key}.xor"]).reshape(-1, 32)
        # a butterfly gives every lane the same bits
        assert (xor == xor[:, :1]).all(), xor
        np.testing.assert_allclose(xor[:, 0], totals, rtol=1e-12)
        np.testing.assert_allclose(floats(d[f"{key}.down"]), totals, rtol=1e-12)
        np.testing.assert_allclose(floats(d[f"{key}.half"]),
                                   np.repeat(v.reshape(-1, 16).sum(axis=1), 16), rtol=1e-12)
    # broadcast, shift up and out-of-range shift down move values bit for bit
    src = (3 + 5 * warps) % 32
    np.testing.assert_array_equal(floats(d[f"{key}.bcast"]), v[warps * 32 + src])
    up = np.where(lanes == 0, v, np.roll(v, 1))
    np.testing.assert_array_equal(floats(d[f"{key}.up"]), up)
    oob = np.where(lanes + 20 < 32, v[np.minimum(np.arange(n) + 20, n - 1)], v)
    np.testing.assert_array_equal(floats(d[f"{key}.oob"]), oob)


def test_warp_shuffles(selftest):
    """__shfl_xor_sync butterfly (all lanes get the warp total, also with width 16),
    __shfl_down_sync tree (lane 0 gets the total), __shfl_sync broadcast from lane k,
    __shfl_up_sync, and a __shfl_down_sync past the warp's end (own value), on float, double,
    int; 4 warps."""
    d = parse(run(selftest, "shfl").stdout)
    _check_shuffles(d, "f32", exact_sums=True)     # dyadic values: sums exact in any order
    _check_shuffles(d, "i32", exact_sums=True)
    _check_shuffles(d, "f64", exact_sums=False)    # t/3: only the broadcasts are exact
    assert (floats(d["i32.in"]) < 0).any()


def test_warp_reduction_with_uneven_warp_loops(selftest):
    """10 rows reduced one warp per row (`for (r = warp; r < R; r += nwarps)`), with 4, 3, 2,
    1 and 32 warps: warps loop different numbers of times (or not at all) before a barrier.
    By hand and with pto::row_reduce (sum and max) from pto_cuda_tile.cuh."""
    d = parse(run(selftest, "row_reduce").stdout)
    src = floats(d["src"]).reshape(10, 96)
    want = np.concatenate([src.sum(axis=1), src.sum(axis=1), src.max(axis=1)])
    for threads in (128, 96, 64, 32, 1024):
        np.testing.assert_array_equal(floats(d[f"out{threads}"]), want, err_msg=f"{threads}")


# ------------------------------------------------------------------ 3. odd sizes, early exits

def test_odd_block_sizes_and_early_exit(selftest):
    """Blocks of 48, 33, 1, 100 and 1000 threads (not multiples of 32) run barrier phases;
    then threads >= exit_from return while the rest pass two more __syncthreads; no deadlock
    and every neighbour read is right. Also threads < 128 of 256 reach a second barrier the
    others (which returned) never reach."""
    r = run(selftest, "odd")
    assert "deadlock" not in r.stderr
    lines = [line.split() for line in r.stdout.splitlines() if line.startswith("odd ")]
    assert len(lines) == 6
    for f in lines:
        threads, exit_from, grid = int(f[1]), int(f[2]), int(f[4])
        errors, ones, twos = int(f[6]), int(f[8]), int(f[10])
        assert errors == 0, f
        stay = min(exit_from, threads)
        assert (ones, twos) == (grid * (threads - stay), grid * stay), f
    assert parse(r.stdout)["twice"] == ["errors", "0"]


# ------------------------------------------------------------------ 4. divergent barriers

@pytest.mark.parametrize("kind", ["deadlock_warp", "deadlock_shfl"])
def test_divergent_barrier_fails_the_launch(selftest, kind):
    """Half of each warp waits at __syncthreads, the other half at __syncwarp / a shuffle that
    needs the first half: the simulator must not hang (subprocess timeout) but fail the launch
    (cudaErrorLaunchFailure from cudaStreamSynchronize and cudaGetLastError, a message naming
    the deadlock); the error is sticky: later launches (on the stream and on stream 0), host
    functions and copies return it and do nothing. Simulator only: on a GPU this is undefined
    behaviour."""
    r = run(selftest, kind)
    d = parse(r.stdout)
    assert d["launch"] == ["0"]                                # the launch itself is queued
    assert d["sync"] == ["719", "cudaErrorLaunchFailure"]
    assert d["last"] == ["719"]
    assert d["again"] == ["719", "again0", "719", "hostfn", "719", "sync2", "719", "copy", "719"]
    assert d["copied"] == ["0"] and d["flag"] == ["0"] and d["host_ran"] == ["0"]
    assert "deadlocked" in r.stderr and "__syncthreads" in r.stderr, r.stderr


# ------------------------------------------------------------------ 5. WMMA

def _mat(d, key, shape):
    return floats(d[key]).reshape(shape)


def _check_mma(got: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray, what: str):
    """f16/bf16 products are exact in f32; the only error is the f32 rounding of <= 16
    (+ c) partial sums, bounded by a few ulp of sum(|a||b|) + |c|."""
    want = a @ b + c
    bound = 4 * 2.0 ** -24 * (a.shape[1] + 1) * (np.abs(a) @ np.abs(b) + np.abs(c))
    err = np.abs(got - want)
    assert (err <= bound).all(), f"{what}: max error {err.max()} (bound {bound[err > bound]})"
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5, err_msg=what)
    assert np.isfinite(got).all()


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_wmma(selftest, dt):
    """16x16x16 mma_sync with f32 accumulation: row_major a and b, accumulator loaded with
    mem_row_major and stored mem_row_major; b loaded col_major, accumulator loaded and stored
    mem_col_major; and (32x48) @ (48x32) by four warps, three k steps each, with b row major
    and col major. Compared with numpy on the same rounded inputs."""
    d = parse(run(selftest, "wmma").stdout)
    a, b = _mat(d, f"{dt}.tile.a", (16, 16)), _mat(d, f"{dt}.tile.b", (16, 16))
    c = _mat(d, f"{dt}.tile.c", (16, 16))
    # inputs really are rounded to the type (not f32 values passed through)
    import ml_dtypes
    ty = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    assert (a.astype(ty).astype(np.float64) == a).all()
    assert len(np.unique(a)) > 100
    _check_mma(_mat(d, f"{dt}.tile.d_row", (16, 16)), a, b, c, "row major")
    _check_mma(_mat(d, f"{dt}.tile.d_col", (16, 16)).T, a, b, c, "col major b / accumulator")
    a, b = _mat(d, f"{dt}.multi.a", (32, 48)), _mat(d, f"{dt}.multi.b", (48, 32))
    zero = np.zeros((32, 32))
    _check_mma(_mat(d, f"{dt}.multi.d", (32, 32)), a, b, zero, "multi-fragment")
    _check_mma(_mat(d, f"{dt}.multi.d2", (32, 32)), a, b, zero, "multi-fragment, col major b")


# ------------------------------------------------------------------ 5b. sm_80 tensor-core primitives

@pytest.fixture(scope="module")
def mma_out(selftest):
    return parse(run(selftest, "mma").stdout)


def _ptx_ldmatrix(value, lane: int, trans: bool) -> list[int]:
    """The four registers lane ``lane`` receives from ldmatrix .x4 (PTX ISA, "Warp-level
    matrix load instruction: ldmatrix"): matrix i's rows come from lanes 8i..8i+7, each lane
    holds two consecutive elements of row lane/4 (.trans: of column lane/4)."""
    out = []
    for i in range(4):
        r0, c0 = (i % 2) * 8, (i // 2) * 8        # lanes 16+ point at column 8
        if trans:
            lo, hi = value(r0 + 2 * (lane % 4), c0 + lane // 4), value(r0 + 2 * (lane % 4) + 1, c0 + lane // 4)
        else:
            lo, hi = value(r0 + lane // 4, c0 + 2 * (lane % 4)), value(r0 + lane // 4, c0 + 2 * (lane % 4) + 1)
        out.append(lo | hi << 16)
    return out


def test_ldmatrix_gives_each_lane_its_documented_elements(mma_out):
    """x4 and x4.trans of a 16x16 matrix of 16-bit indices (rows 48 bytes apart), every lane's
    four registers against the PTX ISA's layout."""
    got = np.array([int(v) for v in mma_out["ldmatrix"]]).reshape(32, 8)
    value = lambda r, c: r * 24 + c  # noqa: E731
    for lane in range(32):
        assert list(got[lane, :4]) == _ptx_ldmatrix(value, lane, False), lane
        assert list(got[lane, 4:]) == _ptx_ldmatrix(value, lane, True), lane


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_mma_m16n8k16_follows_the_documented_fragments(mma_out, dt):
    """Fragments placed by hand as the PTX ISA's m16n8k16 figures say; the result is
    a @ b + c in f32."""
    d = mma_out
    a, b = _mat(d, f"mma.{dt}.a", (16, 16)), _mat(d, f"mma.{dt}.b", (16, 8))
    c = _mat(d, f"mma.{dt}.c", (16, 8))
    assert len(np.unique(a)) > 100
    _check_mma(_mat(d, f"mma.{dt}.d", (16, 8)), a, b, c, "m16n8k16")


def test_cp_async_lands_when_its_group_is_waited_for(mma_out):
    """Two commit groups: after wait_group 1 the first has landed and the second not yet (the
    simulator holds a copy back until it must have completed, so a kernel that forgets to wait
    reads stale shared memory); after wait_group 0 both have."""
    src = np.arange(64) + 0.5
    first, second = floats(mma_out["cp_async.after_wait1"]), floats(mma_out["cp_async.after_wait0"])
    assert (first[:32] == src[:32]).all() and (first[32:] == -1).all()
    assert (second == src).all()


def test_pipelined_mainloop_multiplies(mma_out):
    """gemm_mainloop: (64 x 160) @ (160 x 64) in five K tiles through three stages, with
    cp.async (aligned operands) and with plain copies (A one element off 16 bytes)."""
    a_all = floats(mma_out["gemm_loop.a"])
    b = floats(mma_out["gemm_loop.b"]).reshape(160, 64)
    zero = np.zeros((64, 64))
    for key, off in (("gemm_loop.d", 0), ("gemm_loop.d_unaligned", 1)):
        a = a_all[off:off + 64 * 168].reshape(64, 168)[:, :160]
        _check_mma(_mat(mma_out, key, (64, 64)), a, b, zero, key)


# ------------------------------------------------------------------ 6. f16 / bf16 conversions

@pytest.fixture(scope="module")
def conversions(selftest):
    out = run(selftest, "convert").stdout
    rows: dict[str, list[list[str]]] = {"f": [], "d": [], "r": []}
    for line in out.splitlines():
        k, *v = line.split()
        rows[k].append(v)
    return {k: np.array([[int(x, 16) for x in r] for r in v], dtype=np.uint64)
            for k, v in rows.items()}


def _is_nan16(bits: np.ndarray, exp_mask: int, man_mask: int) -> np.ndarray:
    return ((bits & exp_mask) == exp_mask) & ((bits & man_mask) != 0)


def _assert_bits_equal(got: np.ndarray, want: np.ndarray, nan: np.ndarray, inputs: np.ndarray,
                       what: str):
    """Bit-exact, except that a NaN only has to be a NaN (payloads differ between CUDA's
    canonical NaN, numpy and ml_dtypes)."""
    bad = (got != want) & ~nan
    assert not bad.any(), (f"{what}: {int(bad.sum())} mismatches, e.g. " +
                           ", ".join(f"in={int(i):#x} got={int(g):#06x} want={int(w):#06x}"
                                     for i, g, w in zip(inputs[bad][:8], got[bad][:8],
                                                        want[bad][:8])))


def test_float_to_half_and_bfloat16(conversions):
    """__float2half_rn / __half(float) and __float2bfloat16_rn / __nv_bfloat16(float) of ~90k
    float bit patterns (every exponent with mantissas at and around each rounding position:
    ties to even, subnormals, overflow to inf, NaN, -0) equal numpy's float16 and
    ml_dtypes.bfloat16 bit for bit."""
    import ml_dtypes
    f = conversions["f"]
    x = f[:, 0].astype(np.uint32)
    xf = x.view(np.float32)
    with np.errstate(all="ignore"):
        want_h = xf.astype(np.float16).view(np.uint16)
        want_b = xf.astype(ml_dtypes.bfloat16).view(np.uint16)
    nan_in = np.isnan(xf)
    for col, want, what, em, mm in ((1, want_h, "__float2half_rn", 0x7c00, 0x3ff),
                                    (3, want_h, "__half(float)", 0x7c00, 0x3ff),
                                    (2, want_b, "__float2bfloat16_rn", 0x7f80, 0x7f),
                                    (4, want_b, "__nv_bfloat16(float)", 0x7f80, 0x7f)):
        got = f[:, col].astype(np.uint16)
        assert (_is_nan16(got, em, mm) == nan_in).all(), what     # NaN in <=> NaN out
        _assert_bits_equal(got, want, nan_in, x, what)
    # the pattern set does exercise what it claims to
    assert nan_in.any() and np.isinf(xf).any() and (x == 0x80000000).any()
    with np.errstate(all="ignore"):
        h = xf.astype(np.float16)
    assert (np.isinf(h) & np.isfinite(xf)).sum() > 100                      # overflow
    assert ((want_h & 0x7c00) == 0).sum() > 1000                            # f16 subnormals


def _round_exact(d: np.ndarray, mant_bits: int, bias: int, inf_bits: int) -> np.ndarray:
    """Round float64 values to a 16-bit binary format, nearest even, in one step."""
    pats = np.arange(inf_bits + 1)
    e, m = pats >> mant_bits, pats & ((1 << mant_bits) - 1)
    vals = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mant_bits),
                    np.ldexp(((1 << mant_bits) | m).astype(np.float64),
                             (e - bias - mant_bits).astype(np.int64)))
    # vals[inf_bits] is 2^(emax+1): the value the largest finite one would round up to
    a = np.abs(d)
    lo = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, inf_bits)
    hi = np.minimum(lo + 1, inf_bits)
    twice = 2 * a
    mid = vals[lo] + vals[hi]           # exact: neighbours differ in the last bits only
    up = (twice > mid) | ((twice == mid) & (lo % 2 == 1))
    out = np.where(up & (lo < inf_bits), hi, lo)
    out = np.where(a >= vals[inf_bits], inf_bits, out)
    sign = np.signbit(d).astype(np.int64) << 15
    return (out | sign).astype(np.uint16)


def test_double_to_half_and_bfloat16_round_once(conversions):
    """__half(double) and __nv_bfloat16(double) round to nearest even in ONE step, like the
    device's cvt.rn.f16.f64 / cvt.rn.bf16.f64 (a conversion through float rounds the values
    just beside a midpoint the wrong way)."""
    dd = conversions["d"]
    x = dd[:, 0]
    xd = x.view(np.float64)
    assert not np.isnan(xd).any()
    want_h = _round_exact(xd, 10, 15, 0x7c00)
    want_b = _round_exact(xd, 7, 127, 0x7f80)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(want_h, xd.astype(np.float16).view(np.uint16))  # oracle
    none = np.zeros(len(x), dtype=bool)
    _assert_bits_equal(dd[:, 1].astype(np.uint16), want_h, none, x, "__half(double)")
    _assert_bits_equal(dd[:, 2].astype(np.uint16), want_b, none, x, "__nv_bfloat16(double)")


def test_half_and_bfloat16_to_float(conversions):
    """__half2float, float(__half) and __bfloat162float of all 65536 patterns are exact."""
    import ml_dtypes
    r = conversions["r"]
    pats = r[:, 0].astype(np.uint16)
    assert (pats == np.arange(65536)).all()
    want_h = pats.view(np.float16).astype(np.float32).view(np.uint32)
    want_b = pats.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32)
    np.testing.assert_array_equal(want_b, pats.astype(np.uint32) << 16)
    nan_h = _is_nan16(pats, 0x7c00, 0x3ff)
    nan_b = _is_nan16(pats, 0x7f80, 0x7f)
    assert nan_h.sum() == 2 * 1023 and nan_b.sum() == 2 * 127
    for col, want, nan_in, what in ((1, want_h, nan_h, "__half2float"),
                                    (3, want_h, nan_h, "float(__half)"),
                                    (2, want_b, nan_b, "__bfloat162float")):
        got = r[:, col].astype(np.uint32)
        assert np.isnan(got.view(np.float32))[nan_in].all(), what
        bad = (got != want) & ~nan_in
        assert not bad.any(), f"{what}: {pats[bad][:8]} -> {got[bad][:8]} want {want[bad][:8]}"


# ------------------------------------------------------------------ 7. streams, events, graphs

def test_streams_events_and_graphs(selftest):
    """Two created streams: kernels, host functions and async copies run in stream order
    (callbacks logged in order; the callback after a copy sees the kernels' results); a
    cross-stream dependency through cudaStreamWaitEvent; event timing (elapsed >= 0, and at
    least the 30 ms a host function slept); work on the legacy stream (a launch on stream 0,
    cudaMemcpy) waits for a blocking stream's queued work; stream capture of 3 launches into a graph that runs
    nothing while capturing, keeps the captured parameters, and launched twice equals the
    launches run twice directly."""
    d = parse(run(selftest, "streams").stdout)
    assert d["order1"] == ["1", "2", "3"]
    assert d["order2"] == ["10", "11", "12"]
    assert d["seen"] == ["15", "14"]             # (0 + 5) * 3 and (0 + 2) * 7
    assert d["values"] == ["15", "14"]
    assert d["query"] == ["0", "0"]
    elapsed = float(d["elapsed"][0])
    assert elapsed >= 0 and elapsed >= 25.0, elapsed
    assert d["event_query"] == ["0"]
    assert d["waited"] == ["1015"]               # s2 waited for s1's add of 1000
    assert d["legacy_waits"] == [str((77 * 2) + 77)]
    assert d["capture_ran_nothing"] == ["1"]
    assert d["graph_equals_direct"] == ["1"]
    x = np.array([int(v) for v in d["init"]])
    for _ in range(2):
        x = (x + 3) * -2 + 11
    np.testing.assert_array_equal(np.array([int(v) for v in d["graph"]]), x)


def test_a_wait_or_synchronise_concerns_the_record_most_recent_when_called(selftest):
    """cudaStreamWaitEvent waits for the record of the event made before it: s2 waits for s1's
    slow add although the event is recorded again at once on an idle s3 (s2 copies the sum,
    not the input); a wait on an event followed by its record on the same stream does not wait
    for itself (no hang); an event destroyed with its record still queued is released once the
    stream reaches it (the stream then runs on); the time to an event never recorded is
    cudaErrorInvalidResourceHandle."""
    d = parse(run(selftest, "event_order").stdout)
    assert d["waited_for_earlier_record"] == ["1000"]
    assert d["wait_then_record"] == ["0"]
    assert d["destroyed_while_queued"] == ["0"]
    assert d["elapsed_unrecorded"] == ["1"]


# ------------------------------------------------------------------ 8. dynamic shared memory

def test_dynamic_shared_memory_starts_as_0xff(selftest):
    """As pto_cuda_sim.h promises: every block of every launch finds its dynamic shared memory
    filled with 0xFF bytes (a float read before any write is NaN), whatever an earlier block
    wrote there."""
    r = run(selftest, "smem_init")
    lines = [line.split() for line in r.stdout.splitlines()]
    assert len(lines) == 2
    for f in lines:
        count = f[3]
        assert f[5] == count and f[7] == count, f


# ------------------------------------------------------------------ 9. launch configuration

def test_invalid_launch_configurations_are_refused(selftest):
    """pto_sim_launch with 0 or 1025 threads, a grid of 0 or dynamic shared memory over
    227 KiB returns CUDA's error (not sticky: the next cudaGetLastError reports it once and
    cudaDeviceSynchronize is fine) and runs nothing; 1024 threads and exactly 227 KiB run."""
    d = parse(run(selftest, "launch_config").stdout)
    refused = {"threads0": "cudaErrorInvalidConfiguration",
               "threads1025": "cudaErrorInvalidConfiguration",
               "grid0": "cudaErrorInvalidConfiguration",
               "smem_over": "cudaErrorInvalidValue"}
    for name, err in refused.items():
        f = d[name]                        # code N NAME sync N last N ran N
        assert f[2] == err and f[1] != "0", (name, f)
        assert f[4] == "0" and f[6] == f[1] and f[8] == "0", (name, f)
    assert d["threads1024"] == ["code", "0", "cudaSuccess", "sync", "0", "last", "0", "ran", "2"]
    assert d["smem_max"] == ["code", "0", "cudaSuccess", "sync", "0", "last", "0", "ran", "1"]


# ------------------------------------------------------------------ 10. what a thread leaves

def test_stacks_go_with_the_thread_that_ran_the_blocks(selftest):
    """A block's simulated threads run on stacks of the host thread that runs it (two mappings
    each). A host thread that ends, and a created stream once idle, give them back: before, each
    kept them until the process ended, and a test process that loaded a few hundred kernel
    libraries reached the kernel's limit of 65,530 mappings (a library then failed to load)."""
    d = parse(run(selftest, "thread_exit").stdout)
    threads, before = int(d["threads"][0]), int(d["before"][0])
    assert int(d["stream_busy"][0]) >= before + threads       # the stream's stacks, while used
    assert int(d["after_thread"][0]) < before + threads // 2, d
    assert int(d["after_stream"][0]) < before + threads // 2, d
