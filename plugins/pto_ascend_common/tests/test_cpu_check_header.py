"""The CPU-check tile library header: the documented API subset, per-architecture capacities
and instruction availability, and the pipe-synchronisation check."""

import subprocess
import textwrap

import pytest

from pto_ascend_common import A2A3, A5
from pto_ascend_common.cpu_check import cpu_check_flags, cxx

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

ROWMAX = textwrap.dedent("""
    #include <pto/pto-inst.hpp>
    #include <cstdio>
    using namespace pto;
    extern "C" __global__ AICORE void rowmax(__gm__ float* in, int64_t ld, __gm__ float* out) {
      using GIn = GlobalTensor<float, Shape<1,1,1,8,128>, Stride<1,1,1,DYNAMIC,1>>;
      using GOut = GlobalTensor<float, Shape<1,1,1,8,1>, Stride<1,1,1,DYNAMIC,1>, Layout::DN>;
      Tile<TileType::Vec, float, 8, 128> x; TASSIGN(x, 0x0);
      Tile<TileType::Vec, float, 8, 1, BLayout::ColMajor> m; TASSIGN(m, 0x1000);
      Tile<TileType::Vec, float, 8, 128> tmp; TASSIGN(tmp, 0x1100);
      GIn gi(in, Shape<1,1,1,8,128>(), Stride<1,1,1,DYNAMIC,1>(ld));
      GOut go(out, Shape<1,1,1,8,1>(), Stride<1,1,1,DYNAMIC,1>(1));
      TLOAD(x, gi);
      SYNC_IN
      TROWMAX(m, x, tmp);
      set_flag(PIPE_V, PIPE_MTE3, EVENT_ID0); wait_flag(PIPE_V, PIPE_MTE3, EVENT_ID0);
      TSTORE(go, m);
      pipe_barrier(PIPE_ALL);
    }
    int main() {
      float in[8 * 128], out[8];
      for (int i = 0; i < 8 * 128; i++) in[i] = float((i * 37) % 101) - 50.0f;
      rowmax(in, 128, out);
      for (int r = 0; r < 8; r++) std::printf("%g ", out[r]);
      std::printf("|%s\\n", pto_sim::error().c_str());
      return 0;
    }
""")


def _compile_run(tmp_path, arch, source, run=True):
    src = tmp_path / "k.cpp"
    src.write_text(source)
    exe = tmp_path / "k"
    c = subprocess.run([cxx(), *cpu_check_flags(arch), "-o", str(exe), str(src)],
                       capture_output=True, text=True)
    if not run or c.returncode != 0:
        return c
    return subprocess.run([str(exe)], capture_output=True, text=True)


def _expected_rowmax():
    vals = [float((i * 37) % 101) - 50.0 for i in range(8 * 128)]
    return [max(vals[r * 128:(r + 1) * 128]) for r in range(8)]


@pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
def test_documented_kernel_runs_and_reduces_rows(tmp_path, arch):
    sync = "set_flag(PIPE_MTE2, PIPE_V, EVENT_ID0); wait_flag(PIPE_MTE2, PIPE_V, EVENT_ID0);"
    r = _compile_run(tmp_path, arch, ROWMAX.replace("SYNC_IN", sync))
    assert r.returncode == 0, r.stderr
    values, err = r.stdout.split("|")
    assert [float(v) for v in values.split()] == _expected_rowmax()
    assert err.strip() == ""


def test_read_without_wait_flag_is_reported_as_missing_sync(tmp_path):
    r = _compile_run(tmp_path, A5, ROWMAX.replace("SYNC_IN", ""))
    assert r.returncode == 0, r.stderr
    assert "missing sync" in r.stdout and "PIPE_MTE2, PIPE_V" in r.stdout


PLACE = textwrap.dedent("""
    #include <pto/pto-inst.hpp>
    using namespace pto;
    int main() {
      Tile<TileType::Vec, float, 56, 1024> big;   // 224 KiB
      TASSIGN<0>(big);
      return 0;
    }
""")


def test_compile_time_tassign_checks_the_architectures_ub(tmp_path):
    # 224 KiB fits the 256 KiB UB of A5 but not the 192 KiB UB of A2/A3
    assert _compile_run(tmp_path, A5, PLACE, run=False).returncode == 0
    r = _compile_run(tmp_path, A2A3, PLACE, run=False)
    assert r.returncode != 0 and "does not fit its on-chip buffer" in r.stderr


def test_runtime_tassign_past_l0c_is_an_error(tmp_path):
    src = textwrap.dedent("""
        #include <pto/pto-inst.hpp>
        #include <cstdio>
        using namespace pto;
        int main() {
          Tile<TileType::Acc, float, 128, 128, BLayout::ColMajor, 128, 128, SLayout::RowMajor, 1024> c;
          TASSIGN(c, 0x18000);     // 64 KiB tile at 96 KiB: fits 256 KiB (A5), not 128 KiB (A2/A3)
          std::printf("%s\\n", pto_sim::error().c_str());
        }
    """)
    assert _compile_run(tmp_path, A5, src).stdout.strip() == ""
    assert "does not fit L0C" in _compile_run(tmp_path, A2A3, src).stdout


ACC_TO_VEC = textwrap.dedent("""
    #include <pto/pto-inst.hpp>
    using namespace pto;
    int main() {
      Tile<TileType::Acc, float, 16, 16, BLayout::ColMajor, 16, 16, SLayout::RowMajor, 1024> c;
      Tile<TileType::Vec, float, 16, 16> v;
      TASSIGN(c, 0); TASSIGN(v, 0);
      TMOV(v, c);
    }
""")


def test_tmov_from_l0c_to_ub_exists_on_a5_only(tmp_path):
    assert _compile_run(tmp_path, A5, ACC_TO_VEC, run=False).returncode == 0
    r = _compile_run(tmp_path, A2A3, ACC_TO_VEC, run=False)
    assert r.returncode != 0 and "through GM" in r.stderr


# ------------------------------------------------------------------------------------------
# Where the header follows the official PTO-ISA CPU implementation (docs/ascend-fidelity.md)
# ------------------------------------------------------------------------------------------

SCALE_COLUMN = textwrap.dedent("""
    #include <pto/pto-inst.hpp>
    using namespace pto;
    int main() {
      Tile<TileType::Vec, float, 16, 1, BLayout::ColMajor> col; TASSIGN(col, 0x0);
      TMULS(col, col, 2.0f);
    }
""")


def test_tile_scalar_ops_on_a_column_major_tile_do_not_compile(tmp_path):
    r = _compile_run(tmp_path, A5, SCALE_COLUMN, run=False)
    assert r.returncode != 0
    assert "TMULS: tiles must be row-major (docs/isa/TMULS.md)" in r.stderr


ROW_OPERANDS = textwrap.dedent("""
    #include <pto/pto-inst.hpp>
    #include <cstdio>
    using namespace pto;
    int main() {
      Tile<TileType::Vec, float, 4, 16> x; TASSIGN(x, 0x0);
      Tile<TileType::Vec, float, 8, 1, BLayout::ColMajor, 4, 1> col; TASSIGN(col, 0x200);
      Tile<TileType::Vec, float, 4, 8> block; TASSIGN(block, 0x400);
      Tile<TileType::Vec, float, 4, 8, BLayout::RowMajor, 4, 1> padded; TASSIGN(padded, 0x600);
      for (int r = 0; r < 4; r++) {
        col.at(r, 0) = float(r);
        for (int c = 0; c < 8; c++) block.at(r, c) = float(10 * r + c);
        for (int c = 0; c < 16; c++) x.at(r, c) = 0.0f;
      }
      TROWEXPANDADD(x, x, col);        // Mode 1: one value per row
      std::printf("%g %g |", x.at(3, 0), x.at(3, 15));
      TROWEXPANDADD(x, x, block);      // Mode 2: the 32-byte block repeats along the row
      std::printf("%g %g %g |", x.at(2, 1), x.at(2, 9), x.at(2, 15));
      TROWEXPANDADD(x, x, padded);     // neither: an error, as in the library
      std::printf("%s\\n", pto_sim::error().c_str());
    }
""")


def test_per_row_operands_follow_the_two_documented_modes(tmp_path):
    r = _compile_run(tmp_path, A5, ROW_OPERANDS)
    assert r.returncode == 0, r.stderr
    mode1, mode2, err = r.stdout.split("|")
    assert mode1.split() == ["3", "3"]
    assert mode2.split() == ["23", "23", "29"]     # 2 + 21, 2 + 21, 2 + 27
    assert "TROWEXPANDADD: invalid src1 shape" in err


MATMUL_FMA = textwrap.dedent("""
    #include <pto/pto-inst.hpp>
    #include <cmath>
    #include <cstdio>
    using namespace pto;
    int main() {
      using L = Tile<TileType::Left, float, 16, 16, BLayout::LAYOUT_L, 16, 16, SLayout::RowMajor, 512>;
      using R = Tile<TileType::Right, float, 16, 16, BLayout::RowMajor, 16, 16, SLayout::ColMajor, 512>;
      using C = Tile<TileType::Acc, float, 16, 16, BLayout::ColMajor, 16, 16, SLayout::RowMajor, 1024>;
      L a; R b; C c, d; TASSIGN(a, 0x0); TASSIGN(b, 0x0); TASSIGN(c, 0x0); TASSIGN(d, 0x400);
      float want = 0.0f;
      for (int k = 0; k < 16; k++) {
        float x = 1.0f + 1e-3f * k, y = 1.0f / 3.0f + 1e-4f * k;
        for (int i = 0; i < 16; i++) a.at(i, k) = x;
        for (int j = 0; j < 16; j++) b.at(k, j) = y;
        want = std::fma(x, y, want);
      }
      for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) d.at(i, j) = 1e-3f;
      set_flag(PIPE_MTE1, PIPE_M, EVENT_ID0); wait_flag(PIPE_MTE1, PIPE_M, EVENT_ID0);
      TMATMUL_ACC(c, d, a, b);
      std::printf("%d\\n", c.at(5, 7) == 1e-3f + want);
    }
""")


@pytest.mark.parametrize("arch", [A2A3, A5], ids=lambda a: a.name)
def test_matmul_fuses_multiply_adds_and_adds_the_accumulator_last(tmp_path, arch):
    layout = "RowMajor" if arch is A2A3 else "ColMajor"
    r = _compile_run(tmp_path, arch, MATMUL_FMA.replace("LAYOUT_L", layout))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


SUMS = textwrap.dedent("""
    #include <pto/pto-inst.hpp>
    #include <cstdio>
    using namespace pto;
    int main() {
      Tile<TileType::Vec, half, 4, 16> x; TASSIGN(x, 0x0);
      Tile<TileType::Vec, half, 1, 16> cs; TASSIGN(cs, 0x200);
      Tile<TileType::Vec, float, 2, 8> y; TASSIGN(y, 0x400);
      Tile<TileType::Vec, float, 8, 1, BLayout::ColMajor, 2, 1> rs; TASSIGN(rs, 0x600);
      Tile<TileType::Vec, float, 2, 8> tmp; TASSIGN(tmp, 0x800);
      const float col[4] = {2048.0f, 1.0f, 1.0f, -2048.0f};
      for (int r = 0; r < 4; r++) for (int c = 0; c < 16; c++) x.at(r, c) = col[r];
      const float row[3] = {1e8f, 3.0f, -1e8f};
      for (int r = 0; r < 2; r++) for (int c = 0; c < 8; c++) y.at(r, c) = c < 3 ? row[c] : 0.0f;
      TCOLSUM(cs, x);
      TROWSUM(rs, y, tmp);
      std::printf("%g %g\\n", float(cs.at(0, 0)), rs.at(1, 0));
    }
""")


def test_column_sums_round_to_the_element_type_and_row_sums_to_float(tmp_path):
    """half: 2048 + 1 rounds back to 2048 at every step, so the column sums to 0 (f32
    would give 2); float: 1e8 + 3 rounds to 1e8, so the row sums to 0 (double would give 3)."""
    r = _compile_run(tmp_path, A5, SUMS)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0"]
