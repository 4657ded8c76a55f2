// pto/pto-inst.hpp -- the PTO-ISA tile API subset PTO's Ascend kernels use, for the host CPU.
//
// This is the "CPU check" header of PTO's Ascend backends: the generated kernel that would be
// compiled by CANN's ccec against the official PTO-ISA library is compiled here by g++ (C++17)
// against this file instead. Names, template parameters and semantics follow the library's
// documentation (hw-native-sys/pto-isa: docs/isa/*.md, include/pto/common/pto_tile.hpp):
//
//   Tile<TileType::Vec, T, Rows, Cols, BLayout::RowMajor, ValidRows, ValidCols, SLayout, ...>
//   GlobalTensor<T, Shape<...5 dims>, Stride<...5 dims>, Layout>
//   TASSIGN(tile, byte_offset)   TLOAD(tile, gt)   TSTORE(gt, tile)   TADD(dst, a, b) ...
//   set_flag / wait_flag / pipe_barrier
//
// What is simulated: one set of on-chip buffers per host thread (= per AI core), sized for the
// architecture chosen with -DPTO_NPU_ARCH_A2A3 (UB 192 KB, L0C 128 KB) or -DPTO_NPU_ARCH_A5
// (UB 256 KB, L0C 256 KB); L1 512 KB and L0A/L0B 64 KB on both. Tiles live at the byte offset
// TASSIGN gives them, so two tiles assigned to overlapping ranges really alias; a TASSIGN past
// the end of its buffer, or an instruction the architecture lacks, is a checked error. Element
// storage follows the tile's layout (row/column major, fractal boxes), so a TMOV from a Mat
// tile to a Left tile really re-lays the data out. Pipe synchronisation calls type-check and
// are recorded: an instruction that reads a tile another pipe wrote without an intervening
// set_flag/wait_flag pair between those pipes is reported (a missing-sync error).
//
// Errors do not abort: they are recorded per thread (pto_sim::error()) so the ABI wrapper can
// turn them into a failing task, and printed to stderr once.
#ifndef PTO_ASCEND_CPU_CHECK_PTO_INST_HPP
#define PTO_ASCEND_CPU_CHECK_PTO_INST_HPP

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdio.h>    // flockfile (POSIX)
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#if !defined(PTO_NPU_ARCH_A2A3) && !defined(PTO_NPU_ARCH_A5)
#error "define PTO_NPU_ARCH_A2A3 (dav-c220) or PTO_NPU_ARCH_A5 (dav-c310)"
#endif

// Kernel qualifiers are meaningless on the host.
#ifndef __global__
#define __global__
#endif
#ifndef AICORE
#define AICORE
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef __aicore__
#define __aicore__
#endif

// ------------------------------------------------------------------------------------------
// half and bfloat16_t: storage types; arithmetic happens in float, rounded to nearest even.
// ------------------------------------------------------------------------------------------
namespace pto_sim {
inline uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline uint16_t float_to_half_bits(float f) {
    uint32_t x = f2u(f), sign = (x >> 16) & 0x8000u;
    uint32_t mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0u));
    if (mag >= 0x477ff000u) return uint16_t(sign | 0x7c00u);            // overflow -> inf
    if (mag < 0x38800000u) {                                              // subnormal / zero
        float a = u2f(mag) * 16777216.0f;                                 // * 2^24
        uint32_t r = uint32_t(std::nearbyint(a));                         // ties to even
        return uint16_t(sign | r);
    }
    uint32_t e = (mag >> 23) - 112, m = mag & 0x7fffffu;
    uint32_t h = (e << 10) | (m >> 13), rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return uint16_t(sign | h);
}
inline float half_bits_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) return u2f(sign) + (sign ? -1.0f : 1.0f) * float(m) * 5.9604644775390625e-08f;
    if (e == 31) return u2f(sign | 0x7f800000u | (m << 13));
    return u2f(sign | ((e + 112) << 23) | (m << 13));
}
inline uint16_t float_to_bf16_bits(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return uint16_t(x >> 16);
}
}  // namespace pto_sim

struct half {
    uint16_t bits = 0;
    half() = default;
    half(float f) : bits(pto_sim::float_to_half_bits(f)) {}
    operator float() const { return pto_sim::half_bits_to_float(bits); }
};
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) : bits(pto_sim::float_to_bf16_bits(f)) {}
    operator float() const { return pto_sim::u2f(uint32_t(bits) << 16); }
};

// ------------------------------------------------------------------------------------------
// Pipes and events (CCE names, global namespace as in CCE).
// ------------------------------------------------------------------------------------------
enum pipe_t { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_FIX, PIPE_ALL,
              PIPE_NUM_ = PIPE_ALL };
enum event_t { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6,
               EVENT_ID7 };

namespace pto {

constexpr int DYNAMIC = -1;

enum class TileType { Vec, Mat, Left, Right, Acc, Bias, Scaling };
enum class BLayout { RowMajor, ColMajor };
enum class SLayout { NoneBox, RowMajor, ColMajor };
enum class PadValue { Null, Zero, Max, Min };
enum class CompactMode { Null, Normal };
enum class Layout { ND, DN, NZ };
enum class AtomicType { AtomicNone, AtomicAdd };
enum class PrintFormat : uint8_t { Width8_Precision4 = 0, Width8_Precision2 = 1,
                                  Width10_Precision6 = 2 };
enum class RoundMode { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC,
                       CAST_ODD };

namespace TileConfig {
static constexpr int alignedSize = 32;
static constexpr int fixedRowSize = 16;
static constexpr int fixedColSize = 16;
static constexpr int fractalABSize = 512;
static constexpr int fractalCSize = 1024;
}  // namespace TileConfig

struct RecordEvent {};

}  // namespace pto

// ------------------------------------------------------------------------------------------
// The simulated core: buffers, capacities, error state, pipe bookkeeping.
// ------------------------------------------------------------------------------------------
namespace pto_sim {

#if defined(PTO_NPU_ARCH_A2A3)
constexpr const char* kArch = "a2a3 (dav-c220)";
constexpr std::size_t kUB = 192 * 1024, kL0C = 128 * 1024, kBT = 1024;
#else
constexpr const char* kArch = "a5 (dav-c310)";
constexpr std::size_t kUB = 256 * 1024, kL0C = 256 * 1024, kBT = 4 * 1024;
#endif
constexpr std::size_t kL1 = 512 * 1024, kL0A = 64 * 1024, kL0B = 64 * 1024;

constexpr int buffer_index(pto::TileType t) {
    return t == pto::TileType::Vec ? 0 : t == pto::TileType::Mat ? 1 : t == pto::TileType::Left ? 2
         : t == pto::TileType::Right ? 3 : t == pto::TileType::Acc ? 4 : 5;
}
constexpr std::size_t capacity(pto::TileType t) {
    return t == pto::TileType::Vec ? kUB : t == pto::TileType::Mat ? kL1
         : t == pto::TileType::Left ? kL0A : t == pto::TileType::Right ? kL0B
         : t == pto::TileType::Acc ? kL0C : kBT;   // the bias table (PTO_BIAS_SIZE_BYTES)
}
constexpr const char* buffer_name(pto::TileType t) {
    return t == pto::TileType::Vec ? "UB" : t == pto::TileType::Mat ? "L1"
         : t == pto::TileType::Left ? "L0A" : t == pto::TileType::Right ? "L0B"
         : t == pto::TileType::Acc ? "L0C" : "BT";
}

struct Access { int buf; std::size_t lo, hi; int pipe; uint64_t seq; bool write; };

struct Core {
    std::vector<unsigned char> mem[6];
    std::string error;
    uint64_t seq = 1;
    uint64_t set_seq[8][8][8] = {};     // [src][dst][event]: seq at the last set_flag
    uint64_t synced[8][8] = {};         // [src][dst]: accesses of src before this are visible to dst
    std::vector<Access> log;            // last access per (buffer, range)
    Core() {
        for (int i = 0; i < 6; ++i)
            mem[i].assign(capacity(i == 0 ? pto::TileType::Vec : i == 1 ? pto::TileType::Mat
                                   : i == 2 ? pto::TileType::Left : i == 3 ? pto::TileType::Right
                                   : i == 4 ? pto::TileType::Acc : pto::TileType::Bias), 0);
    }
};
inline Core& core() { static thread_local Core c; return c; }

inline void fail(const std::string& msg) {
    Core& c = core();
    if (c.error.empty()) {
        c.error = msg;
        std::fprintf(stderr, "pto cpu-check [%s]: %s\n", kArch, msg.c_str());
    }
}
/// The first error of this thread's kernels since the last reset ("" when none).
inline const std::string& error() { return core().error; }
inline void reset_error() { core().error.clear(); core().log.clear(); }

/// Global-memory workspace of this thread's kernels (the host side of a kernel's workspace
/// argument), at least `bytes` long.
inline unsigned char* workspace(std::size_t bytes) {
    static thread_local std::vector<unsigned char> ws;
    if (ws.size() < bytes) ws.resize(bytes);
    return ws.data();
}

inline const char* pipe_name(int p) {
    static const char* n[] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX", "ALL"};
    return n[p];
}

// An instruction on `pipe` touches [lo, hi) of buffer `buf`. A read of data another pipe wrote
// (or a write over data another pipe read or wrote) must be ordered by a flag pair or barrier.
inline void touch(int buf, std::size_t lo, std::size_t hi, int pipe, bool write, const char* what) {
    Core& c = core();
    for (auto& a : c.log) {
        if (a.buf != buf || a.hi <= lo || hi <= a.lo || a.pipe == pipe) continue;
        if (!write && !a.write) continue;
        if (c.synced[a.pipe][pipe] <= a.seq && c.error.empty()) {
            char m[256];
            std::snprintf(m, sizeof m, "missing sync: %s on PIPE_%s %s a tile that PIPE_%s %s "
                          "without set_flag/wait_flag(PIPE_%s, PIPE_%s) in between",
                          what, pipe_name(pipe), write ? "writes" : "reads", pipe_name(a.pipe),
                          a.write ? "wrote" : "read", pipe_name(a.pipe), pipe_name(pipe));
            fail(m);
        }
    }
    uint64_t s = c.seq++;
    for (auto& a : c.log)
        if (a.buf == buf && a.lo == lo && a.hi == hi && a.pipe == pipe && a.write == write) {
            a.seq = s;
            return;
        }
    c.log.push_back(Access{buf, lo, hi, pipe, s, write});
}

template <class T> struct Calc { using type = T; };
template <> struct Calc<half> { using type = float; };
template <> struct Calc<bfloat16_t> { using type = float; };
template <class T> using calc_t = typename Calc<T>::type;

template <class To> To saturate_round(double v) {
    if constexpr (std::is_integral_v<To>) {
        if (std::isnan(v)) return To(0);
        double r = std::nearbyint(v);
        if (r < double(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
        if (r > double(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
        return To(r);
    } else {
        return To(float(v));
    }
}
template <class To, class From> To convert(From v) {
    if constexpr (std::is_same_v<To, From>) return v;
    else if constexpr (std::is_integral_v<To> && std::is_integral_v<From>) {
        return saturate_round<To>(double(v));
    } else {
        return saturate_round<To>(double(calc_t<From>(v)));
    }
}

}  // namespace pto_sim

// ------------------------------------------------------------------------------------------
// Shape, Stride, GlobalTensor
// ------------------------------------------------------------------------------------------
namespace pto {

namespace detail {
template <std::size_t N> inline void fill_dynamic(int64_t* out, const int64_t (&stat)[5],
                                                  const int64_t (&vals)[N]) {
    std::size_t k = 0;
    for (int i = 0; i < 5; ++i) out[i] = stat[i] == DYNAMIC ? (k < N ? vals[k++] : 1) : stat[i];
}
template <int64_t... N> constexpr int count_dynamic() { return ((N == DYNAMIC ? 1 : 0) + ...); }
}  // namespace detail

template <int64_t N1 = DYNAMIC, int64_t N2 = DYNAMIC, int64_t N3 = DYNAMIC, int64_t N4 = DYNAMIC,
          int64_t N5 = DYNAMIC>
struct Shape {
    static constexpr int64_t staticShape[5] = {N1, N2, N3, N4, N5};
    int64_t shape[5];
    Shape() { const int64_t v[1] = {1}; detail::fill_dynamic(shape, staticShape, v); }
    template <class... I, std::enable_if_t<(sizeof...(I) > 0), int> = 0>
    Shape(I... n) {
        static_assert(sizeof...(I) == detail::count_dynamic<N1, N2, N3, N4, N5>() || sizeof...(I) == 5,
                      "Shape: give one value per DYNAMIC dimension");
        const int64_t v[sizeof...(I)] = {int64_t(n)...};
        if constexpr (sizeof...(I) == 5) { for (int i = 0; i < 5; ++i) shape[i] = staticShape[i] == DYNAMIC ? v[i] : staticShape[i]; }
        else detail::fill_dynamic(shape, staticShape, v);
    }
};

template <int64_t S1 = DYNAMIC, int64_t S2 = DYNAMIC, int64_t S3 = DYNAMIC, int64_t S4 = DYNAMIC,
          int64_t S5 = DYNAMIC>
struct Stride {
    static constexpr int64_t staticStride[5] = {S1, S2, S3, S4, S5};
    int64_t stride[5];
    Stride() { const int64_t v[1] = {1}; detail::fill_dynamic(stride, staticStride, v); }
    template <class... I, std::enable_if_t<(sizeof...(I) > 0), int> = 0>
    Stride(I... n) {
        static_assert(sizeof...(I) == detail::count_dynamic<S1, S2, S3, S4, S5>() || sizeof...(I) == 5,
                      "Stride: give one value per DYNAMIC dimension");
        const int64_t v[sizeof...(I)] = {int64_t(n)...};
        if constexpr (sizeof...(I) == 5) { for (int i = 0; i < 5; ++i) stride[i] = staticStride[i] == DYNAMIC ? v[i] : staticStride[i]; }
        else detail::fill_dynamic(stride, staticStride, v);
    }
};

template <typename Element_, typename Shape_, typename Stride_, Layout Layout_ = Layout::ND>
struct GlobalTensor {
    using DType = Element_;
    using RawDType = std::remove_cv_t<Element_>;
    using ShapeType = Shape_;
    using StrideType = Stride_;
    static constexpr Layout layout = Layout_;
    GlobalTensor(DType* data, const Shape_& s = Shape_(), const Stride_& st = Stride_())
        : data_(data), shape_(s), stride_(st) {}
    DType* data() { return data_; }
    int64_t GetShape(int dim) const { return shape_.shape[dim]; }
    int64_t GetStride(int dim) const { return stride_.stride[dim]; }
    // Element (r, c) of the 2-D view formed by the last two dimensions.
    RawDType& at(int64_t r, int64_t c) { return data_[r * stride_.stride[3] + c * stride_.stride[4]]; }

private:
    DType* data_;
    Shape_ shape_;
    Stride_ stride_;
};

// ------------------------------------------------------------------------------------------
// Tile
// ------------------------------------------------------------------------------------------
template <TileType Loc_, typename Element_, int Rows_, int Cols_, BLayout BFractal_ = BLayout::RowMajor,
          int RowValid_ = Rows_, int ColValid_ = Cols_, SLayout SFractal_ = SLayout::NoneBox,
          int SFractalSize_ = TileConfig::fractalABSize, PadValue PadVal_ = PadValue::Null,
          CompactMode Compact_ = CompactMode::Null>
struct Tile {
    using DType = Element_;
    static constexpr TileType Loc = Loc_;
    static constexpr int Rows = Rows_;
    static constexpr int Cols = Cols_;
    static constexpr int ValidRow = RowValid_;
    static constexpr int ValidCol = ColValid_;
    static constexpr BLayout BFractal = BFractal_;
    static constexpr SLayout SFractal = SFractal_;
    static constexpr int SFractalSize = SFractalSize_;
    static constexpr PadValue PadVal = PadVal_;
    static constexpr int Numel = Rows * Cols;
    static constexpr bool isRowMajor = BFractal_ == BLayout::RowMajor;
    static constexpr bool isBoxedLayout = SFractal_ != SLayout::NoneBox;
    static constexpr bool isInnerRowMajor = SFractal_ == SLayout::RowMajor;
    static constexpr int InnerRows =
        SFractalSize_ == TileConfig::fractalCSize ? TileConfig::fixedRowSize
        : !isBoxedLayout ? 1 : isInnerRowMajor ? TileConfig::fixedRowSize : int(TileConfig::alignedSize / sizeof(DType));
    static constexpr int InnerCols =
        SFractalSize_ == TileConfig::fractalCSize ? TileConfig::fixedColSize
        : !isBoxedLayout ? 1 : isInnerRowMajor ? int(TileConfig::alignedSize / sizeof(DType)) : TileConfig::fixedColSize;

    static_assert(Rows > 0 && Cols > 0 && (ValidRow == DYNAMIC || (ValidRow >= 0 && ValidRow <= Rows)) &&
                  (ValidCol == DYNAMIC || (ValidCol >= 0 && ValidCol <= Cols)), "Invalid Tile Layout.");
    static_assert(Loc == TileType::Vec || Rows == 1 || Rows % InnerRows == 0,
                  "Layout rows must be divisible by inner box rows");
    static_assert(Cols % InnerCols == 0, "Layout cols must be divisible by inner box cols");
    static_assert((isRowMajor && !isBoxedLayout && (Cols * sizeof(DType)) % TileConfig::alignedSize == 0) ||
                  (!isRowMajor && !isBoxedLayout && (Rows * sizeof(DType)) % TileConfig::alignedSize == 0) ||
                  isBoxedLayout,
                  "RowMajor/NoneBox tiles need 32-byte rows; ColMajor/NoneBox tiles need 32-byte columns");
    static_assert(SFractalSize_ == TileConfig::fractalABSize || SFractalSize_ == TileConfig::fractalCSize,
                  "SFractalSize_ illegal");

    Tile() = default;
    template <int R = ValidRow, int C = ValidCol, std::enable_if_t<R == DYNAMIC && C == DYNAMIC, int> = 0>
    Tile(unsigned vr, unsigned vc) : rowValid_(vr), colValid_(vc) {}

    unsigned GetValidRow() const { return ValidRow == DYNAMIC ? rowValid_ : unsigned(ValidRow); }
    unsigned GetValidCol() const { return ValidCol == DYNAMIC ? colValid_ : unsigned(ValidCol); }

    // Element offset of logical (r, c) in the tile's storage layout.
    static constexpr int64_t offset(int64_t r, int64_t c) {
        if constexpr (!isBoxedLayout) {
            return isRowMajor ? r * Cols + c : c * Rows + r;
        } else {
            int64_t br = r / InnerRows, bc = c / InnerCols, ir = r % InnerRows, ic = c % InnerCols;
            int64_t box = isRowMajor ? br * (Cols / InnerCols) + bc : bc * (Rows / InnerRows) + br;
            int64_t in = isInnerRowMajor ? ir * InnerCols + ic : ic * InnerRows + ir;
            return box * InnerRows * InnerCols + in;
        }
    }
    DType& at(int64_t r, int64_t c) { return data_[offset(r, c)]; }
    // the scalar unit's access to element ``i`` of the storage (Vec tiles)
    DType GetValue(uint32_t i) { return data_[i]; }
    DType* data() { return data_; }
    bool assigned() const { return data_ != nullptr; }
    std::size_t addr() const { return addr_; }
    static constexpr std::size_t bytes() { return std::size_t(Numel) * sizeof(DType); }

    DType* data_ = nullptr;
    std::size_t addr_ = 0;
    unsigned rowValid_ = Rows_, colValid_ = Cols_;
};

template <class T> struct is_tile : std::false_type {};
template <TileType L, class E, int R, int C, BLayout B, int VR, int VC, SLayout S, int F, PadValue P, CompactMode M>
struct is_tile<Tile<L, E, R, C, B, VR, VC, S, F, P, M>> : std::true_type {};

// ------------------------------------------------------------------------------------------
// TASSIGN: place a tile at a byte offset of its buffer.
// ------------------------------------------------------------------------------------------
template <typename T, typename AddrType>
inline void TASSIGN(T& tile, AddrType addr) {
    static_assert(is_tile<T>::value, "TASSIGN: only tiles are simulated");
    std::size_t a = std::size_t(addr), cap = pto_sim::capacity(T::Loc);
    if (a % 32 != 0 || a + T::bytes() > cap) {
        char m[256];
        std::snprintf(m, sizeof m, "TASSIGN at 0x%zx of a %zu-byte tile does not fit %s (%zu bytes) "
                      "or is not 32-byte aligned", a, T::bytes(), pto_sim::buffer_name(T::Loc), cap);
        pto_sim::fail(m);
        a = 0;
        if (T::bytes() > cap) { tile.data_ = nullptr; return; }
    }
    tile.addr_ = a;
    tile.data_ = reinterpret_cast<typename T::DType*>(pto_sim::core().mem[pto_sim::buffer_index(T::Loc)].data() + a);
}

template <std::size_t Addr, typename T>
inline void TASSIGN(T& tile) {
    static_assert(Addr % 32 == 0 && Addr + T::bytes() <= pto_sim::capacity(T::Loc),
                  "TASSIGN: tile does not fit its on-chip buffer on this architecture");
    TASSIGN(tile, Addr);
}

}  // namespace pto

// ------------------------------------------------------------------------------------------
// Synchronisation: flags order accesses between pipes.
// ------------------------------------------------------------------------------------------
inline void set_flag(pipe_t src, pipe_t dst, event_t ev) {
    auto& c = pto_sim::core();
    c.set_seq[src][dst][ev] = c.seq++;
}
inline void wait_flag(pipe_t src, pipe_t dst, event_t ev) {
    auto& c = pto_sim::core();
    if (c.set_seq[src][dst][ev] == 0) {
        char m[160];
        std::snprintf(m, sizeof m, "wait_flag(PIPE_%s, PIPE_%s, EVENT_ID%d) with no set_flag before it",
                      pto_sim::pipe_name(src), pto_sim::pipe_name(dst), int(ev));
        pto_sim::fail(m);
    }
    if (c.set_seq[src][dst][ev] > c.synced[src][dst]) c.synced[src][dst] = c.set_seq[src][dst][ev];
    c.set_seq[src][dst][ev] = 0;
}
inline void pipe_barrier(pipe_t p) {
    auto& c = pto_sim::core();
    uint64_t now = c.seq++;
    for (int s = 0; s < PIPE_ALL; ++s)
        for (int d = 0; d < PIPE_ALL; ++d)
            if (p == PIPE_ALL || s == p || d == p) c.synced[s][d] = now;
}

namespace pto {
namespace detail {

template <class T> inline bool ready(T& t, const char* op) {
    if (!t.assigned()) {
        pto_sim::fail(std::string(op) + ": tile used before TASSIGN");
        return false;
    }
    return true;
}
template <class T> inline void rd(T& t, int pipe, const char* op) {
    pto_sim::touch(pto_sim::buffer_index(T::Loc), t.addr(), t.addr() + T::bytes(), pipe, false, op);
}
template <class T> inline void wr(T& t, int pipe, const char* op) {
    pto_sim::touch(pto_sim::buffer_index(T::Loc), t.addr(), t.addr() + T::bytes(), pipe, true, op);
}
template <class T> inline void need_vec(const char* /*op*/) {
    static_assert(T::Loc == TileType::Vec, "vector instructions take TileType::Vec tiles");
}

// dst(r, c) = f(src...) over dst's valid region, computed in calc_t (float for half/bf16).
template <class D, class F, class... S>
inline void map(const char* op, F f, D& dst, S&... src) {
    need_vec<D>(op);
    (need_vec<S>(op), ...);
    if (!(ready(dst, op) && (ready(src, op) && ...))) return;
    (rd(src, PIPE_V, op), ...);
    using C = pto_sim::calc_t<typename D::DType>;
    const unsigned R = dst.GetValidRow(), K = dst.GetValidCol();
    // Read every source element before writing, so dst may alias a source.
    std::vector<C> out(std::size_t(R) * K);
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < K; ++c) out[std::size_t(r) * K + c] = C(f(r, c, src...));
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < K; ++c) dst.at(r, c) = typename D::DType(out[std::size_t(r) * K + c]);
    wr(dst, PIPE_V, op);
}
template <class T> inline pto_sim::calc_t<typename T::DType> val(T& t, unsigned r, unsigned c) {
    return pto_sim::calc_t<typename T::DType>(t.at(r, c));
}
// max/min as PTO's reference defines them: a NaN operand gives NaN (a NaN compares false, so
// the NaN test keeps it whichever side it is on), and of two equal operands (+0 and -0) the
// second is returned.
template <class T> inline T fmaxv(T a, T b) { return (a > b || a != a) ? a : b; }
template <class T> inline T fminv(T a, T b) { return (a < b || a != a) ? a : b; }
// a / b without the host's integer traps: a zero divisor is an error of the task (as PTO's
// reference raises) and gives 0; a signed division by -1 negates through unsigned arithmetic,
// so INT_MIN / -1 wraps to INT_MIN like the reference
template <class T> inline T divv(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
        if (b == T(0)) { pto_sim::fail("integer division by zero"); return T(0); }
        if constexpr (std::is_signed_v<T>) {
            if (b == T(-1)) return T(0u - std::make_unsigned_t<T>(a));
        }
    }
    return a / b;
}
// |a| clears the sign of -0 for floats; integers wrap like the reference (abs(INT_MIN) == INT_MIN)
// Shifts as PTO defines them for every amount: outside [0, width of T) a left shift gives 0
// and a right shift the sign fill; in range the left shift runs unsigned (no overflow).
template <class T, class A, class B> inline T shlv(A a, B b) {
    if (b < 0 || b >= B(8 * sizeof(T))) return T(0);
    return T(std::make_unsigned_t<T>(std::make_unsigned_t<T>(a) << b));
}
template <class T, class A, class B> inline T shrv(A a, B b) {
    if (b < 0 || b >= B(8 * sizeof(T))) return T(a < 0 ? -1 : 0);
    return T(a >> b);
}
// The remainders: fmodv has the dividend's sign (C's fmod and %), remv the divisor's (TREM:
// fmodv, then the divisor added once where a nonzero result's sign differs from it). Integer
// divisors: 0 is an error of the task and gives 0; MIN by -1 gives 0 without the host's trap.
template <class T> inline T fmodv(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
        if (b == T(0)) { pto_sim::fail("integer division by zero"); return T(0); }
        if constexpr (std::is_signed_v<T>) {
            if (b == T(-1)) return T(0);
        }
        return T(a % b);
    } else {
        return std::fmod(a, b);
    }
}
template <class T> inline T remv(T a, T b) {
    const T r = fmodv(a, b);
    return (r != T(0) && (r < T(0)) != (b < T(0))) ? T(r + b) : r;
}
// a ** b (TPOW): floats in double precision rounded once, as the library's CPU code does;
// integers exact and wrapping, a negative exponent giving 1, -1 or 0 (PTO's definition)
template <class T> inline T powv(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        return T(std::pow(double(a), double(b)));
    } else {
        const auto e = std::int64_t(b);
        if (e < 0) return T(a == T(1) ? 1 : (a == T(-1) ? ((e & 1) ? -1 : 1) : 0));
        std::uint64_t r = 1, x = std::uint64_t(std::int64_t(a));
        for (auto k = e; k > 0; k >>= 1) { if (k & 1) r *= x; x *= x; }
        return T(std::int64_t(r));
    }
}
template <class T> inline T absv(T a) {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(a);
    else return a < T(0) ? T(-a) : a;
}

}  // namespace detail

// ------------------------------------------------------------------------------------------
// Data movement
// ------------------------------------------------------------------------------------------
template <typename TileData, typename GlobalData, typename... WaitEvents>
inline RecordEvent TLOAD(TileData& dst, GlobalData& src, WaitEvents&...) {
    static_assert(TileData::Loc == TileType::Vec || TileData::Loc == TileType::Mat,
                  "TLOAD moves GM into a Vec (UB) or Mat (L1) tile");
    static_assert(std::is_same_v<typename TileData::DType, std::remove_cv_t<typename GlobalData::DType>>,
                  "TLOAD keeps the element type");
    if (!detail::ready(dst, "TLOAD")) return {};
    const unsigned R = dst.GetValidRow(), C = dst.GetValidCol();
    if (int64_t(R) > src.GetShape(3) || int64_t(C) > src.GetShape(4))
        pto_sim::fail("TLOAD: tile valid region larger than the global tensor's shape");
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c)
            dst.at(r, c) = pto_sim::convert<typename TileData::DType>(src.at(r, c));
    detail::wr(dst, PIPE_MTE2, "TLOAD");
    return {};
}

template <typename TileData, typename GlobalData, typename... WaitEvents>
inline RecordEvent TSTORE(GlobalData& dst, TileData& src, WaitEvents&...) {
    static_assert(TileData::Loc == TileType::Vec || TileData::Loc == TileType::Acc ||
                  TileData::Loc == TileType::Mat, "TSTORE moves a Vec, Mat or Acc tile to GM");
    if (!detail::ready(src, "TSTORE")) return {};
    // UB -> GM runs on MTE3; L0C -> GM goes through the fixpipe.
    detail::rd(src, TileData::Loc == TileType::Acc ? PIPE_FIX : PIPE_MTE3, "TSTORE");
    const unsigned R = src.GetValidRow(), C = src.GetValidCol();
    if (int64_t(R) > dst.GetShape(3) || int64_t(C) > dst.GetShape(4))
        pto_sim::fail("TSTORE: tile valid region larger than the global tensor's shape");
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c)
            dst.at(r, c) = pto_sim::convert<typename GlobalData::RawDType>(src.at(r, c));
    return {};
}

// Fixpipe store that accumulates into GM (L0C -> GM with atomic add).
template <typename TileData, typename GlobalData, AtomicType atomicType, typename... WaitEvents>
inline RecordEvent TSTORE(GlobalData& dst, TileData& src, WaitEvents&...) {
    if constexpr (atomicType == AtomicType::AtomicNone) {
        return TSTORE(dst, src);
    } else {
        static_assert(TileData::Loc == TileType::Acc || TileData::Loc == TileType::Vec,
                      "atomic TSTORE moves a Vec or Acc tile to GM");
        if (!detail::ready(src, "TSTORE")) return {};
        detail::rd(src, TileData::Loc == TileType::Acc ? PIPE_FIX : PIPE_MTE3, "TSTORE");
        using G = typename GlobalData::RawDType;
        for (unsigned r = 0; r < src.GetValidRow(); ++r)
            for (unsigned c = 0; c < src.GetValidCol(); ++c) {
                float sum = float(pto_sim::calc_t<G>(dst.at(r, c))) + float(pto_sim::calc_t<typename TileData::DType>(src.at(r, c)));
                dst.at(r, c) = pto_sim::convert<G>(sum);
            }
        return {};
    }
}

// TPREFETCH: the device's form moves the window into dst ahead of its TLOAD ("Semantics and
// caching behavior are target/implementation-defined"); PTO reads nothing from that staging
// tile. Here the window is copied as TLOAD does.
template <typename TileData, typename GlobalData>
inline RecordEvent TPREFETCH(TileData& dst, GlobalData& src) {
    static_assert(TileData::Loc == TileType::Vec, "TPREFETCH stages into a Vec (UB) tile");
    return TLOAD(dst, src);
}

// TPRINT: the valid region of a Vec tile on stdout, as the device's cce::printf and the
// official CPU code print it: "TPRINT RxC", then a line per row, elements separated by one
// space, a float (half widened) as %W.Pf, an integer as %Wd (W, P from the PrintFormat).
template <PrintFormat Format = PrintFormat::Width8_Precision4, typename TileData>
inline RecordEvent TPRINT(TileData& src) {
    static_assert(TileData::Loc == TileType::Vec, "TPRINT prints a Vec tile here");
    using T = typename TileData::DType;
    static_assert(!std::is_same_v<T, bfloat16_t>, "TPRINT has no bfloat16 form");
    const int width = Format == PrintFormat::Width10_Precision6 ? 10 : 8;
    const int precision = Format == PrintFormat::Width8_Precision4 ? 4
                        : Format == PrintFormat::Width8_Precision2 ? 2 : 6;
    // the whole tile under stdout's lock: kernels on several workers print whole blocks
    flockfile(stdout);
    std::printf("TPRINT %ux%u\n", src.GetValidRow(), src.GetValidCol());
    for (unsigned r = 0; r < src.GetValidRow(); ++r) {
        for (unsigned c = 0; c < src.GetValidCol(); ++c) {
            if (c != 0) std::printf(" ");
            if constexpr (std::is_integral_v<T>) std::printf("%*d", width, int(src.at(r, c)));
            else std::printf("%*.*f", width, precision, double(float(src.at(r, c))));
        }
        std::printf("\n");
    }
    std::fflush(stdout);
    funlockfile(stdout);
    return {};
}

// MGATHER / MSCATTER: a GM table addressed through an index tile. Coalesce::Row moves row
// idx[0, r] of the table (the last two dimensions of the GlobalTensor) to or from row r of the
// tile; Coalesce::Elem moves the table's element idx[r, c] in row-major order of its shape,
// reached through its row stride. An index naming no row (element) of the table is an error
// and nothing is moved (the library's GatherOOB/ScatterOOB::Undefined, made safe). A scatter
// writes in row-major order of the tile, so the last write of a position wins.
enum class Coalesce : uint8_t { Row = 0, Elem = 1 };

namespace detail {
template <Coalesce Mode, typename G, typename I>
inline bool table_indices(G& table, I& idx, unsigned rows, unsigned cols, const char* op) {
    static_assert(std::is_integral_v<typename I::DType>, "MGATHER/MSCATTER: integral indices");
    const int64_t room = Mode == Coalesce::Row ? table.GetShape(3) : table.GetShape(3) * table.GetShape(4);
    const unsigned R = Mode == Coalesce::Row ? 1 : rows, C = Mode == Coalesce::Row ? rows : cols;
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c)
            if (int64_t(idx.at(r, c)) < 0 || int64_t(idx.at(r, c)) >= room) {
                pto_sim::fail(op);
                return false;
            }
    return true;
}
template <Coalesce Mode, typename G, typename I>
inline typename G::RawDType& table_at(G& table, I& idx, unsigned r, unsigned c) {
    if constexpr (Mode == Coalesce::Row) return table.at(int64_t(idx.at(0, r)), c);
    const int64_t x = int64_t(idx.at(r, c)), w = table.GetShape(4);
    return table.at(x / w, x % w);
}
// A gather (tile <- table, the tile written on `pipe`) or a scatter (table <- tile, the tile
// read there), after every index is checked.
template <Coalesce Mode, bool Gather, typename X, typename G, typename I>
inline void table_move(X& tile, G& table, I& idx, int pipe, const char* op, const char* bad) {
    static_assert(std::is_same_v<typename X::DType, typename G::RawDType>,
                  "MGATHER/MSCATTER: the tile and the table have different element types");
    need_vec<X>(op); need_vec<I>(op);
    if (!(ready(tile, op) && ready(idx, op))) return;
    if constexpr (!Gather) rd(tile, pipe, op);
    rd(idx, pipe, op);
    const unsigned R = tile.GetValidRow(), C = tile.GetValidCol();
    if (!table_indices<Mode>(table, idx, R, C, bad)) return;
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c) {
            if constexpr (Gather) tile.at(r, c) = table_at<Mode>(table, idx, r, c);
            else table_at<Mode>(table, idx, r, c) = tile.at(r, c);
        }
    if constexpr (Gather) wr(tile, pipe, op);
}
}  // namespace detail

template <Coalesce Mode = Coalesce::Row, typename D, typename G, typename I, typename... WaitEvents>
inline RecordEvent MGATHER(D& dst, G& table, I& idx, WaitEvents&...) {
    detail::table_move<Mode, true>(dst, table, idx, PIPE_MTE2, "MGATHER",
                                   "MGATHER: an index leaves the table");
    return {};
}

template <Coalesce Mode = Coalesce::Row, typename G, typename S, typename I, typename... WaitEvents>
inline RecordEvent MSCATTER(G& table, S& src, I& idx, WaitEvents&...) {
    detail::table_move<Mode, false>(src, table, idx, PIPE_MTE3, "MSCATTER",
                                    "MSCATTER: an index leaves the table");
    return {};
}

// Mat -> Left/Right (MTE1), Acc -> Mat (FIX), Acc -> Vec (FIX, A5 only), Vec -> Vec (V).
template <typename DstTileData, typename SrcTileData, typename... WaitEvents>
inline RecordEvent TMOV(DstTileData& dst, SrcTileData& src, WaitEvents&...) {
    constexpr TileType D = DstTileData::Loc, S = SrcTileData::Loc;
    static_assert(DstTileData::Rows == SrcTileData::Rows && DstTileData::Cols == SrcTileData::Cols,
                  "TMOV: source and destination tiles must have the same shape");
#if defined(PTO_NPU_ARCH_A2A3)
    static_assert((S == TileType::Mat && (D == TileType::Left || D == TileType::Right || D == TileType::Bias)) ||
                  (S == TileType::Vec && D == TileType::Vec) || (S == TileType::Acc && D == TileType::Mat),
                  "TMOV on A2/A3 supports Mat->Left/Right/Bias, Vec->Vec and Acc->Mat only "
                  "(cube results reach the vector core through GM)");
#else
    static_assert((S == TileType::Mat && (D == TileType::Left || D == TileType::Right || D == TileType::Bias)) ||
                  (S == TileType::Vec && (D == TileType::Vec || D == TileType::Mat)) ||
                  (S == TileType::Acc && (D == TileType::Vec || D == TileType::Mat)),
                  "TMOV on A5 supports Mat->Left/Right/Bias, Vec->Vec/Mat and Acc->Vec/Mat");
#endif
    if (!(detail::ready(dst, "TMOV") && detail::ready(src, "TMOV"))) return {};
    // Mat -> L0 on MTE1, L0C out through the fixpipe, UB -> L1 on MTE3, UB -> UB on V
    const int pipe = S == TileType::Mat ? PIPE_MTE1 : S == TileType::Acc ? PIPE_FIX
                   : D == TileType::Mat ? PIPE_MTE3 : PIPE_V;
    detail::rd(src, pipe, "TMOV");
    const unsigned R = dst.GetValidRow(), C = dst.GetValidCol();
    std::vector<typename DstTileData::DType> tmp(std::size_t(R) * C);
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c) tmp[std::size_t(r) * C + c] = pto_sim::convert<typename DstTileData::DType>(src.at(r, c));
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c) dst.at(r, c) = tmp[std::size_t(r) * C + c];
    detail::wr(dst, pipe, "TMOV");
    return {};
}

// ------------------------------------------------------------------------------------------
// Element-wise: tile-tile, tile-scalar, unary. The library documents every one of them for
// row-major tiles only ("Tile layout must be row-major", docs/isa/TADD.md, TADDS.md, TEXP.md
// ...; its CPU implementation rejects a column-major tile in TADDS/TMULS/...): so do we.
// ------------------------------------------------------------------------------------------
namespace detail {
template <class... T> inline constexpr bool all_row_major = (T::isRowMajor && ...);
}  // namespace detail
#define PTO_SIM_ROW_MAJOR(NAME, ...)                                                            \
    static_assert(detail::all_row_major<__VA_ARGS__>,                                           \
                  #NAME ": tiles must be row-major (docs/isa/" #NAME ".md)")
#define PTO_SIM_BINARY(NAME, EXPR)                                                              \
    template <typename D, typename S0, typename S1, typename... WaitEvents>                     \
    inline RecordEvent NAME(D& dst, S0& src0, S1& src1, WaitEvents&...) {                       \
        PTO_SIM_ROW_MAJOR(NAME, D, S0, S1);                                                     \
        detail::map(#NAME, [](unsigned r, unsigned c, S0& a_, S1& b_) {                          \
            auto a = detail::val(a_, r, c); auto b = detail::val(b_, r, c); return EXPR; },      \
            dst, src0, src1);                                                                   \
        return {};                                                                              \
    }
PTO_SIM_BINARY(TADD, a + b)
PTO_SIM_BINARY(TSUB, a - b)
PTO_SIM_BINARY(TMUL, a * b)
PTO_SIM_BINARY(TDIV, detail::divv(a, b))
PTO_SIM_BINARY(TMAX, detail::fmaxv(a, b))
PTO_SIM_BINARY(TMIN, detail::fminv(a, b))
PTO_SIM_BINARY(TSHL, detail::shlv<typename D::DType>(a, b))
PTO_SIM_BINARY(TSHR, detail::shrv<typename D::DType>(a, b))
PTO_SIM_BINARY(TAND, a & b)
PTO_SIM_BINARY(TOR, a | b)
PTO_SIM_BINARY(TFMOD, detail::fmodv(a, b))
PTO_SIM_BINARY(TSUBRELU, detail::fmaxv(decltype(a)(a - b), decltype(a)(0)))
#undef PTO_SIM_BINARY

// fused forms with a read-write dst (docs/isa/TFUSEDMULADD.md, TFUSEDMULADDRELU.md,
// TMULADDDST.md; TAXPY below): dst's old value d is read before it is written; the product
// is rounded before the sum (no fused multiply-add)
#define PTO_SIM_READ_WRITE(NAME, EXPR)                                                          \
    template <typename D, typename S0, typename S1, typename... WaitEvents,                     \
              std::enable_if_t<is_tile<S1>::value, int> = 0>                                    \
    inline RecordEvent NAME(D& dst, S0& src0, S1& src1, WaitEvents&...) {                       \
        PTO_SIM_ROW_MAJOR(NAME, D, S0, S1);                                                     \
        detail::map(#NAME, [](unsigned r, unsigned c, D& d_, S0& a_, S1& b_) {                   \
            auto d = detail::val(d_, r, c); auto a = detail::val(a_, r, c);                     \
            auto b = detail::val(b_, r, c); return EXPR; }, dst, dst, src0, src1);              \
        return {};                                                                              \
    }
PTO_SIM_READ_WRITE(TFUSEDMULADD, decltype(a)(decltype(a)(a * d) + b))
PTO_SIM_READ_WRITE(TFUSEDMULADDRELU,
                   detail::fmaxv(decltype(a)(decltype(a)(a * d) + b), decltype(a)(0)))
PTO_SIM_READ_WRITE(TMULADDDST, decltype(a)(decltype(a)(a * b) + d))
#undef PTO_SIM_READ_WRITE
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TAXPY(D& dst, S& src0, typename S::DType scalar, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TAXPY, D, S);
    static_assert(std::is_same_v<typename D::DType, typename S::DType>,
                  "TAXPY: PTO emits the same-type form (dst and src0 of one type)");
    const auto s = pto_sim::calc_t<typename S::DType>(scalar);
    detail::map("TAXPY", [s](unsigned r, unsigned c, D& d_, S& a_) {
        auto a = detail::val(a_, r, c);
        return decltype(a)(decltype(a)(a * s) + detail::val(d_, r, c)); }, dst, dst, src0);
    return {};
}

// TPOW and TPOWS take a scratch tile (docs/isa/TPOW.md, TPOWS.md); the CPU check needs none.
template <typename D, typename S0, typename S1, typename T, typename... WaitEvents,
          std::enable_if_t<is_tile<S1>::value, int> = 0>
inline RecordEvent TPOW(D& dst, S0& base, S1& exp, T&, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TPOW, D, S0, S1);
    detail::map("TPOW", [](unsigned r, unsigned c, S0& a_, S1& b_) {
        return detail::powv(detail::val(a_, r, c), detail::val(b_, r, c)); }, dst, base, exp);
    return {};
}
template <typename D, typename S, typename T, typename... WaitEvents,
          std::enable_if_t<is_tile<T>::value, int> = 0>
inline RecordEvent TPOWS(D& dst, S& base, typename D::DType exp, T&, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TPOWS, D, S);
    const auto s = pto_sim::calc_t<typename S::DType>(exp);
    detail::map("TPOWS", [s](unsigned r, unsigned c, S& a_) {
        return detail::powv(detail::val(a_, r, c), s); }, dst, base);
    return {};
}

// TPRELU takes a u8 scratch tile (docs/isa/TPRELU.md); the CPU check needs none.
template <typename D, typename S0, typename S1, typename T, typename... WaitEvents>
inline RecordEvent TPRELU(D& dst, S0& src0, S1& src1, T&, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TPRELU, D, S0, S1);
    static_assert(std::is_same_v<typename T::DType, uint8_t>, "TPRELU: tmp must be a uint8_t tile");
    detail::map("TPRELU", [](unsigned r, unsigned c, S0& a_, S1& b_) {
        auto a = detail::val(a_, r, c); return a > 0 ? a : decltype(a)(a * detail::val(b_, r, c)); },
        dst, src0, src1);
    return {};
}

// three-operand sums, left to right (docs/isa/TADDC.md, TSUBC.md, TADDSC.md, TSUBSC.md)
#define PTO_SIM_TERNARY(NAME, EXPR)                                                             \
    template <typename D, typename S0, typename S1, typename S2, typename... WaitEvents,        \
              std::enable_if_t<is_tile<S2>::value, int> = 0>                                    \
    inline RecordEvent NAME(D& dst, S0& src0, S1& src1, S2& src2, WaitEvents&...) {             \
        PTO_SIM_ROW_MAJOR(NAME, D, S0, S1, S2);                                                 \
        detail::map(#NAME, [](unsigned r, unsigned c, S0& a_, S1& b_, S2& c_) {                  \
            auto a = detail::val(a_, r, c); auto b = detail::val(b_, r, c);                     \
            auto x = detail::val(c_, r, c); return EXPR; }, dst, src0, src1, src2);             \
        return {};                                                                              \
    }
PTO_SIM_TERNARY(TADDC, decltype(a)(decltype(a)(a + b) + x))
PTO_SIM_TERNARY(TSUBC, decltype(a)(decltype(a)(a - b) + x))
#undef PTO_SIM_TERNARY
#define PTO_SIM_SCALAR_TILE(NAME, EXPR)                                                         \
    template <typename D, typename S0, typename S1, typename... WaitEvents>                     \
    inline RecordEvent NAME(D& dst, S0& src0, typename S0::DType scalar, S1& src1,              \
                            WaitEvents&...) {                                                   \
        PTO_SIM_ROW_MAJOR(NAME, D, S0, S1);                                                     \
        const auto s = pto_sim::calc_t<typename S0::DType>(scalar);                             \
        detail::map(#NAME, [s](unsigned r, unsigned c, S0& a_, S1& b_) {                         \
            auto a = detail::val(a_, r, c); auto b = detail::val(b_, r, c); return EXPR; },      \
            dst, src0, src1);                                                                   \
        return {};                                                                              \
    }
PTO_SIM_SCALAR_TILE(TADDSC, decltype(a)(decltype(a)(a + s) + b))
PTO_SIM_SCALAR_TILE(TSUBSC, decltype(a)(decltype(a)(a - s) + b))
#undef PTO_SIM_SCALAR_TILE

// TREM and TREMS take a scratch tile (docs/isa/TREM.md, TREMS.md); the CPU check needs none.
template <typename D, typename S0, typename S1, typename T, typename... WaitEvents,
          std::enable_if_t<is_tile<T>::value, int> = 0>
inline RecordEvent TREM(D& dst, S0& src0, S1& src1, T&, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TREM, D, S0, S1);
    detail::map("TREM", [](unsigned r, unsigned c, S0& a_, S1& b_) {
        return detail::remv(detail::val(a_, r, c), detail::val(b_, r, c)); }, dst, src0, src1);
    return {};
}
template <typename D, typename S, typename T, typename... WaitEvents,
          std::enable_if_t<is_tile<T>::value, int> = 0>
inline RecordEvent TREMS(D& dst, S& src, typename S::DType scalar, T&, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TREMS, D, S);
    const auto s = pto_sim::calc_t<typename S::DType>(scalar);
    detail::map("TREMS", [s](unsigned r, unsigned c, S& a_) {
        return detail::remv(detail::val(a_, r, c), s); }, dst, src);
    return {};
}

// TXOR and TXORS take a scratch tile (docs/isa/TXOR.md, TXORS.md); the CPU check needs none.
template <typename D, typename S0, typename S1, typename T, typename... WaitEvents,
          std::enable_if_t<is_tile<T>::value, int> = 0>
inline RecordEvent TXOR(D& dst, S0& src0, S1& src1, T&, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TXOR, D, S0, S1);
    detail::map("TXOR", [](unsigned r, unsigned c, S0& a_, S1& b_) {
        return detail::val(a_, r, c) ^ detail::val(b_, r, c); }, dst, src0, src1);
    return {};
}
template <typename D, typename S, typename T, typename... WaitEvents,
          std::enable_if_t<is_tile<T>::value, int> = 0>
inline RecordEvent TXORS(D& dst, S& src, typename S::DType scalar, T&, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TXORS, D, S);
    const auto s = pto_sim::calc_t<typename S::DType>(scalar);
    detail::map("TXORS", [s](unsigned r, unsigned c, S& a_) { return detail::val(a_, r, c) ^ s; },
                dst, src);
    return {};
}

#define PTO_SIM_SCALAR(NAME, EXPR)                                                              \
    template <typename D, typename S, typename... WaitEvents>                                   \
    inline RecordEvent NAME(D& dst, S& src, typename S::DType scalar, WaitEvents&...) {         \
        PTO_SIM_ROW_MAJOR(NAME, D, S);                                                          \
        const auto s = pto_sim::calc_t<typename S::DType>(scalar);                              \
        detail::map(#NAME, [s](unsigned r, unsigned c, S& a_) {                                  \
            auto a = detail::val(a_, r, c); return EXPR; }, dst, src);                          \
        return {};                                                                              \
    }
PTO_SIM_SCALAR(TADDS, a + s)
PTO_SIM_SCALAR(TSUBS, a - s)
PTO_SIM_SCALAR(TMULS, a * s)
PTO_SIM_SCALAR(TMAXS, detail::fmaxv(a, s))
PTO_SIM_SCALAR(TMINS, detail::fminv(a, s))
PTO_SIM_SCALAR(TSHLS, detail::shlv<typename D::DType>(a, s))
PTO_SIM_SCALAR(TSHRS, detail::shrv<typename D::DType>(a, s))
PTO_SIM_SCALAR(TANDS, a & s)
PTO_SIM_SCALAR(TORS, a | s)
PTO_SIM_SCALAR(TFMODS, detail::fmodv(a, s))
PTO_SIM_SCALAR(TLRELU, a > 0 ? a : decltype(a)(a * s))
#undef PTO_SIM_SCALAR

// TDIVS has two forms: tile / scalar and scalar / tile.
template <typename D, typename S, typename... WaitEvents, std::enable_if_t<is_tile<S>::value, int> = 0>
inline RecordEvent TDIVS(D& dst, S& src, typename S::DType scalar, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TDIVS, D, S);
    const auto s = pto_sim::calc_t<typename S::DType>(scalar);
    detail::map("TDIVS", [s](unsigned r, unsigned c, S& a_) { return detail::divv(detail::val(a_, r, c), s); }, dst, src);
    return {};
}
template <typename D, typename S, typename... WaitEvents, std::enable_if_t<is_tile<S>::value, int> = 0>
inline RecordEvent TDIVS(D& dst, typename D::DType scalar, S& src, WaitEvents&...) {
    PTO_SIM_ROW_MAJOR(TDIVS, D, S);
    const auto s = pto_sim::calc_t<typename D::DType>(scalar);
    detail::map("TDIVS", [s](unsigned r, unsigned c, S& a_) { return detail::divv(s, detail::val(a_, r, c)); }, dst, src);
    return {};
}

template <typename D, typename... WaitEvents>
inline RecordEvent TEXPANDS(D& dst, typename D::DType scalar, WaitEvents&...) {
    const auto s = pto_sim::calc_t<typename D::DType>(scalar);
    detail::map("TEXPANDS", [s](unsigned, unsigned) { return s; }, dst);
    return {};
}

#define PTO_SIM_UNARY(NAME, EXPR)                                                               \
    template <typename D, typename S, typename... WaitEvents>                                   \
    inline RecordEvent NAME(D& dst, S& src, WaitEvents&...) {                                   \
        PTO_SIM_ROW_MAJOR(NAME, D, S);                                                          \
        detail::map(#NAME, [](unsigned r, unsigned c, S& a_) {                                   \
            auto a = detail::val(a_, r, c); using C_ = decltype(a); (void)sizeof(C_);           \
            return EXPR; }, dst, src);                                                          \
        return {};                                                                              \
    }
PTO_SIM_UNARY(TEXP, C_(std::exp(a)))
PTO_SIM_UNARY(TLOG, C_(std::log(a)))
PTO_SIM_UNARY(TSQRT, C_(std::sqrt(a)))
PTO_SIM_UNARY(TRSQRT, C_(C_(1) / C_(std::sqrt(a))))
PTO_SIM_UNARY(TRECIP, C_(C_(1) / a))
PTO_SIM_UNARY(TABS, detail::absv(a))
PTO_SIM_UNARY(TNEG, C_(-a))
PTO_SIM_UNARY(TRELU, detail::fmaxv(a, C_(0)))
PTO_SIM_UNARY(TNOT, C_(~a))
#undef PTO_SIM_UNARY
#undef PTO_SIM_ROW_MAJOR

// ------------------------------------------------------------------------------------------
// Reductions. Row reductions take a scratch tile as in the library; dst is R x 1 (DN) or an
// ND tile whose first valid column receives the result.
// ------------------------------------------------------------------------------------------
namespace detail {
// Integers accumulate in int64 and wrap to the destination's width, as in PTO's reference
// (through float, a 32-bit sum lost its low bits and saturated). Float rows accumulate in
// float, one element after another (half and bfloat16 rows too), as the library's CPU
// implementation does (TypeSum); columns accumulate in the element type (ColT), each step
// rounded to it, as the library's TCOLSUM adds row after row.
template <class T> using reduce_t = std::conditional_t<std::is_integral_v<T>, int64_t, float>;
template <class T> struct ColAcc {
    T v;
    ColAcc(float x) : v(T(x)) {}
    operator float() const { return float(v); }
};
template <class T> using col_reduce_t = std::conditional_t<std::is_integral_v<T>, int64_t,
                                                           ColAcc<T>>;
template <class T, class A> inline T reduced(A acc) {
    if constexpr (std::is_integral_v<T>) return T(acc);
    else return pto_sim::convert<T>(float(acc));
}
template <class D, class S, class Tmp, class Init, class Step>
inline void row_reduce(const char* op, D& dst, S& src, Tmp& tmp, Init init, Step step) {
    need_vec<D>(op); need_vec<S>(op); need_vec<Tmp>(op);
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "dst and src must have the same element type");
    static_assert(S::isRowMajor && !S::isBoxedLayout, "row reductions need an ND (row-major) source");
    if (!(ready(dst, op) && ready(src, op) && ready(tmp, op))) return;
    if (dst.GetValidRow() != src.GetValidRow()) { pto_sim::fail(std::string(op) + ": dst and src valid rows differ"); return; }
    rd(src, PIPE_V, op);
    using A = reduce_t<typename S::DType>;
    for (unsigned r = 0; r < src.GetValidRow(); ++r) {
        A acc = init(A(val(src, r, 0)));
        for (unsigned c = 1; c < src.GetValidCol(); ++c) acc = step(acc, A(val(src, r, c)));
        dst.at(r, 0) = reduced<typename D::DType>(acc);
    }
    wr(tmp, PIPE_V, op);
    wr(dst, PIPE_V, op);
}
template <class D, class S, class Step, class A = col_reduce_t<typename S::DType>>
inline void col_reduce(const char* op, D& dst, S& src, Step step) {
    need_vec<D>(op); need_vec<S>(op);
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "dst and src must have the same element type");
    if (!(ready(dst, op) && ready(src, op))) return;
    if (dst.GetValidCol() != src.GetValidCol()) { pto_sim::fail(std::string(op) + ": dst and src valid cols differ"); return; }
    rd(src, PIPE_V, op);
    for (unsigned c = 0; c < src.GetValidCol(); ++c) {
        A acc = A(val(src, 0, c));
        for (unsigned r = 1; r < src.GetValidRow(); ++r) acc = step(acc, A(val(src, r, c)));
        dst.at(0, c) = reduced<typename D::DType>(acc);
    }
    wr(dst, PIPE_V, op);
}
inline constexpr auto add_ = [](auto a, auto b) { return a + b; };
inline constexpr auto max_ = [](auto a, auto b) { return fmaxv(a, b); };
inline constexpr auto min_ = [](auto a, auto b) { return fminv(a, b); };
inline constexpr auto id_ = [](auto a) { return a; };
// an integer product wraps to the accumulator's width (through unsigned: defined)
inline constexpr auto mul_ = [](auto a, auto b) {
    using A = decltype(a);
    if constexpr (std::is_integral_v<A>) return A(std::make_unsigned_t<A>(a) * std::make_unsigned_t<A>(b));
    else return a * b;
};
}  // namespace detail

template <typename D, typename S, typename Tmp, typename... WaitEvents>
inline RecordEvent TROWSUM(D& dst, S& src, Tmp& tmp, WaitEvents&...) {
    detail::row_reduce("TROWSUM", dst, src, tmp, detail::id_, detail::add_); return {};
}
template <typename D, typename S, typename Tmp, typename... WaitEvents>
inline RecordEvent TROWMAX(D& dst, S& src, Tmp& tmp, WaitEvents&...) {
    detail::row_reduce("TROWMAX", dst, src, tmp, detail::id_, detail::max_); return {};
}
template <typename D, typename S, typename Tmp, typename... WaitEvents>
inline RecordEvent TROWMIN(D& dst, S& src, Tmp& tmp, WaitEvents&...) {
    detail::row_reduce("TROWMIN", dst, src, tmp, detail::id_, detail::min_); return {};
}
// Products are computed in float (half and bfloat16 too) and rounded once, rows and columns
// alike: the library's CPU code multiplies in the element type (docs/ascend-fidelity.md).
template <typename D, typename S, typename Tmp, typename... WaitEvents>
inline RecordEvent TROWPROD(D& dst, S& src, Tmp& tmp, WaitEvents&...) {
    detail::row_reduce("TROWPROD", dst, src, tmp, detail::id_, detail::mul_); return {};
}
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TCOLSUM(D& dst, S& src, WaitEvents&...) {
    detail::col_reduce("TCOLSUM", dst, src, detail::add_); return {};
}
template <typename D, typename S, typename Tmp, typename... WaitEvents, std::enable_if_t<is_tile<Tmp>::value, int> = 0>
inline RecordEvent TCOLSUM(D& dst, S& src, Tmp& tmp, bool /*isBinary*/, WaitEvents&...) {
    detail::wr(tmp, PIPE_V, "TCOLSUM");
    detail::col_reduce("TCOLSUM", dst, src, detail::add_); return {};
}
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TCOLMAX(D& dst, S& src, WaitEvents&...) {
    detail::col_reduce("TCOLMAX", dst, src, detail::max_); return {};
}
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TCOLMIN(D& dst, S& src, WaitEvents&...) {
    detail::col_reduce("TCOLMIN", dst, src, detail::min_); return {};
}
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TCOLPROD(D& dst, S& src, WaitEvents&...) {
    detail::col_reduce<D, S, decltype(detail::mul_), detail::reduce_t<typename S::DType>>(
        "TCOLPROD", dst, src, detail::mul_);
    return {};
}

// Arg-reductions write the first index of the max (min) of each row (column) of src, as PTO's
// reference does: a NaN wins over any number, the first NaN over later ones (the library's
// CPU code skips a NaN unless it comes first: docs/ascend-fidelity.md). tmp is not needed here.
namespace detail {
template <class T> inline bool is_nan(T x) {
    if constexpr (std::is_floating_point_v<T>) return x != x;
    else return false;
}
template <bool ROW, bool MAX, class D, class S, class Tmp>
inline void arg_reduce(const char* op, D& dst, S& src, Tmp& tmp) {
    need_vec<D>(op); need_vec<S>(op); need_vec<Tmp>(op);
    static_assert(std::is_same_v<typename D::DType, int32_t> || std::is_same_v<typename D::DType, uint32_t>,
                  "the indices of an arg-reduction are int32_t or uint32_t");
    if (!(ready(dst, op) && ready(src, op) && ready(tmp, op))) return;
    const unsigned n = ROW ? src.GetValidRow() : src.GetValidCol();
    const unsigned len = ROW ? src.GetValidCol() : src.GetValidRow();
    if ((ROW ? dst.GetValidRow() : dst.GetValidCol()) != n) {
        pto_sim::fail(std::string(op) + (ROW ? ": dst and src valid rows differ" : ": dst and src valid cols differ"));
        return;
    }
    rd(src, PIPE_V, op);
    for (unsigned i = 0; i < n; ++i) {
        auto best = ROW ? val(src, i, 0) : val(src, 0, i);
        unsigned at = 0;
        for (unsigned j = 1; j < len; ++j) {
            const auto x = ROW ? val(src, i, j) : val(src, j, i);
            if ((MAX ? x > best : x < best) || (is_nan(x) && !is_nan(best))) { best = x; at = j; }
        }
        (ROW ? dst.at(i, 0) : dst.at(0, i)) = typename D::DType(at);
    }
    wr(tmp, PIPE_V, op);
    wr(dst, PIPE_V, op);
}
}  // namespace detail
#define PTO_SIM_ARG(NAME, ROW, MAX)                                                             \
    template <typename D, typename S, typename Tmp, typename... WaitEvents,                     \
              std::enable_if_t<is_tile<Tmp>::value, int> = 0>                                   \
    inline RecordEvent NAME(D& dst, S& src, Tmp& tmp, WaitEvents&...) {                         \
        detail::arg_reduce<ROW, MAX>(#NAME, dst, src, tmp); return {};                          \
    }
PTO_SIM_ARG(TROWARGMAX, true, true)
PTO_SIM_ARG(TROWARGMIN, true, false)
PTO_SIM_ARG(TCOLARGMAX, false, true)
PTO_SIM_ARG(TCOLARGMIN, false, false)
#undef PTO_SIM_ARG

// ------------------------------------------------------------------------------------------
// Layout ops: every element of dst is an element of a source (or 0), no arithmetic.
// ------------------------------------------------------------------------------------------
// TEXTRACT, the Vec -> Vec path: dst = the window of src at (indexRow, indexCol).
template <typename D, typename S, typename... WaitEvents, std::enable_if_t<is_tile<S>::value, int> = 0>
inline RecordEvent TEXTRACT(D& dst, S& src, uint16_t indexRow = 0, uint16_t indexCol = 0, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "TEXTRACT: dst and src element types differ");
    if (dst.GetValidRow() + indexRow > src.GetValidRow() || dst.GetValidCol() + indexCol > src.GetValidCol()) {
        pto_sim::fail("TEXTRACT: the window leaves src");
        return {};
    }
    detail::map("TEXTRACT", [&](unsigned r, unsigned c, S& s) { return detail::val(s, r + indexRow, c + indexCol); },
                dst, src);
    return {};
}

// TCONCAT: each row of dst is the row of src0 followed by the row of src1.
template <typename D, typename S0, typename S1, typename... WaitEvents, std::enable_if_t<is_tile<S1>::value, int> = 0>
inline RecordEvent TCONCAT(D& dst, S0& src0, S1& src1, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, typename S0::DType> && std::is_same_v<typename D::DType, typename S1::DType>,
                  "TCONCAT: dst, src0 and src1 element types differ");
    static_assert(detail::all_row_major<D, S0, S1>, "TCONCAT: tiles must be row-major (docs/isa/TCONCAT.md)");
    const unsigned n0 = src0.GetValidCol();
    if (dst.GetValidRow() != src0.GetValidRow() || dst.GetValidRow() != src1.GetValidRow() ||
        dst.GetValidCol() != n0 + src1.GetValidCol()) {
        pto_sim::fail("TCONCAT: dst is not [src0 | src1] (valid rows equal, valid columns summed)");
        return {};
    }
    detail::map("TCONCAT", [&](unsigned r, unsigned c, S0& a, S1& b) {
        return c < n0 ? detail::val(a, r, c) : detail::val(b, r, c - n0); }, dst, src0, src1);
    return {};
}

// TRESHAPE: dst becomes a view of src's bytes (as on A2/A3, where it is a TASSIGN).
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TRESHAPE(D& dst, S& src, WaitEvents&...) {
    static_assert(D::Loc == S::Loc, "TRESHAPE: source and target TileType must be the same");
    static_assert(D::bytes() == S::bytes(), "TRESHAPE: total byte size must match");
    static_assert(D::isBoxedLayout == S::isBoxedLayout, "TRESHAPE: cannot reshape between boxed and non-boxed layouts");
    if (!detail::ready(src, "TRESHAPE")) return {};
    dst.data_ = reinterpret_cast<typename D::DType*>(src.data());
    dst.addr_ = src.addr();
    return {};
}

// TFILLPAD, TFILLPAD_EXPAND, TFILLPAD_INPLACE: src in dst's top-left corner, every other element
// of dst the pad value dst's tile type names (PadVal): 0, +-inf, or the integer extremes.
namespace detail {
template <class D> inline pto_sim::calc_t<typename D::DType> pad_value() {
    using T = typename D::DType;
    using C = pto_sim::calc_t<T>;
    static_assert(D::PadVal == PadValue::Zero || D::PadVal == PadValue::Max || D::PadVal == PadValue::Min,
                  "TFILLPAD: dst's tile type must name a pad value (Zero, Max or Min)");
    if constexpr (D::PadVal == PadValue::Zero) return C(0);
    else if constexpr (std::is_floating_point_v<C>) return D::PadVal == PadValue::Max ? INFINITY : -INFINITY;
    else return D::PadVal == PadValue::Max ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
}
template <bool EXPAND, class D, class S> inline void fill_pad(const char* op, D& dst, S& src) {
    static_assert(sizeof(typename D::DType) == sizeof(typename S::DType), "TFILLPAD: src and dst element sizes differ");
    static_assert(EXPAND ? (D::Rows >= S::Rows && D::Cols >= S::Cols) : (D::Rows == S::Rows && D::Cols == S::Cols),
                  "TFILLPAD: dst must have src's shape (TFILLPAD_EXPAND: at least src's shape)");
    const unsigned R = src.GetValidRow(), K = src.GetValidCol();
    const auto pad = pad_value<D>();
    map(op, [&](unsigned r, unsigned c, S& s) { return r < R && c < K ? val(s, r, c) : pad; }, dst, src);
}
}  // namespace detail
template <typename D, typename S, typename... WaitEvents, std::enable_if_t<is_tile<S>::value, int> = 0>
inline RecordEvent TFILLPAD(D& dst, S& src, WaitEvents&...) { detail::fill_pad<false>("TFILLPAD", dst, src); return {}; }
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TFILLPAD_EXPAND(D& dst, S& src, WaitEvents&...) { detail::fill_pad<true>("TFILLPAD_EXPAND", dst, src); return {}; }
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TFILLPAD_INPLACE(D& dst, S& src, WaitEvents&...) {
    if (detail::ready(dst, "TFILLPAD_INPLACE") && detail::ready(src, "TFILLPAD_INPLACE") && dst.addr() != src.addr())
        pto_sim::fail("TFILLPAD_INPLACE: dst and src must be the same storage");
    detail::fill_pad<false>("TFILLPAD_INPLACE", dst, src);
    return {};
}

// TGATHER (index form): dst[i, j] = src0's element idx[i, j] of its row-major storage; an index
// outside it gives 0 and reads nothing. tmp is not needed here.
template <typename D, typename S0, typename S1, typename Tmp, typename... WaitEvents,
          std::enable_if_t<is_tile<Tmp>::value, int> = 0>
inline RecordEvent TGATHER(D& dst, S0& src0, S1& idx, Tmp& tmp, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, typename S0::DType>, "TGATHER: dst and src0 element types differ");
    static_assert(sizeof(typename S1::DType) == 4 && std::is_integral_v<typename S1::DType>, "TGATHER: indices are 32-bit integers");
    if (!detail::ready(tmp, "TGATHER")) return {};
    const int64_t n = int64_t(S0::Rows) * S0::Cols;
    detail::map("TGATHER", [&](unsigned r, unsigned c, S0& a, S1& ix) {
        const int64_t k = int64_t(ix.at(r, c));
        return k >= 0 && k < n ? detail::val(a, unsigned(k / S0::Cols), unsigned(k % S0::Cols))
                               : pto_sim::calc_t<typename S0::DType>(0);
    }, dst, src0, idx);
    detail::wr(tmp, PIPE_V, "TGATHER");
    return {};
}

// TSCATTER (index form): dst's storage element idx[i, j] becomes src[i, j], in row-major order
// of (i, j), so the last write of a position wins. dst is not cleared first (the official CPU
// simulator's behaviour; the device clears it, and PTO's emitter zeroes dst before). An index
// outside dst is an error and nothing is written.
template <typename D, typename S, typename I, typename... WaitEvents, std::enable_if_t<is_tile<I>::value, int> = 0>
inline RecordEvent TSCATTER(D& dst, S& src, I& idx, WaitEvents&...) {
    using T = typename D::DType;
    using X = typename I::DType;
    static_assert(std::is_same_v<T, typename S::DType>, "TSCATTER: dst and src element types differ");
    static_assert(std::is_integral_v<X> && (sizeof(X) == sizeof(T) || (sizeof(T) == 1 && sizeof(X) == 2)),
                  "TSCATTER: indices as wide as the elements (2 bytes for 1-byte elements)");
    detail::need_vec<D>("TSCATTER"); detail::need_vec<S>("TSCATTER"); detail::need_vec<I>("TSCATTER");
    if (!(detail::ready(dst, "TSCATTER") && detail::ready(src, "TSCATTER") && detail::ready(idx, "TSCATTER")))
        return {};
    detail::rd(src, PIPE_V, "TSCATTER");
    detail::rd(idx, PIPE_V, "TSCATTER");
    const unsigned R = idx.GetValidRow(), C = idx.GetValidCol();
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c)
            if (int64_t(idx.at(r, c)) < 0 || int64_t(idx.at(r, c)) >= int64_t(D::Numel)) {
                pto_sim::fail("TSCATTER: an index lies outside dst");
                return {};
            }
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c) dst.data()[int64_t(idx.at(r, c))] = src.at(r, c);
    detail::wr(dst, PIPE_V, "TSCATTER");
    return {};
}

// TGATHERB: block c (32 bytes) of row r of dst is the 32 bytes of src's storage at byte offset
// offset(r, c), read as unsigned. An offset off a block boundary or whose block leaves src is an
// error and nothing is written.
template <typename D, typename S, typename O, typename... WaitEvents, std::enable_if_t<is_tile<O>::value, int> = 0>
inline RecordEvent TGATHERB(D& dst, S& src, O& offset, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "TGATHERB: dst and src element types differ");
    static_assert(D::isRowMajor, "TGATHERB: dst must be row-major (docs/isa/TGATHERB.md)");
    detail::need_vec<D>("TGATHERB"); detail::need_vec<S>("TGATHERB"); detail::need_vec<O>("TGATHERB");
    if (!(detail::ready(dst, "TGATHERB") && detail::ready(src, "TGATHERB") && detail::ready(offset, "TGATHERB")))
        return {};
    constexpr unsigned per = 32 / sizeof(typename D::DType);
    const unsigned R = dst.GetValidRow(), B = dst.GetValidCol() / per;
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < B; ++c) {
            const uint64_t off = uint32_t(offset.at(r, c));
            if (off % 32 != 0 || off + 32 > S::bytes()) {
                pto_sim::fail("TGATHERB: a block offset leaves src");
                return {};
            }
        }
    detail::rd(src, PIPE_V, "TGATHERB");
    detail::rd(offset, PIPE_V, "TGATHERB");
    auto* in = reinterpret_cast<const unsigned char*>(src.data());
    for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < B; ++c)
            std::memcpy(&dst.at(r, c * per), in + uint32_t(offset.at(r, c)), 32);
    detail::wr(dst, PIPE_V, "TGATHERB");
    return {};
}

// TINSERT, the Vec -> Vec path (A5): the window of dst at (indexRow, indexCol) becomes src; the
// rest of dst keeps its value.
template <typename D, typename S, typename... WaitEvents, std::enable_if_t<is_tile<S>::value, int> = 0>
inline RecordEvent TINSERT(D& dst, S& src, uint16_t indexRow = 0, uint16_t indexCol = 0, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "TINSERT: dst and src element types differ");
    const unsigned h = src.GetValidRow(), w = src.GetValidCol();
    if (h + indexRow > dst.GetValidRow() || w + indexCol > dst.GetValidCol()) {
        pto_sim::fail("TINSERT: the window leaves dst");
        return {};
    }
    detail::map("TINSERT", [&](unsigned r, unsigned c, D& d, S& s) {
        return r >= indexRow && r - indexRow < h && c >= indexCol && c - indexCol < w
                   ? detail::val(s, r - indexRow, c - indexCol) : detail::val(d, r, c);
    }, dst, dst, src);
    return {};
}

// ------------------------------------------------------------------------------------------
// Sorts of float (value, uint32 index) pairs, two float slots a pair (docs/isa/TSORT32.md,
// TMRGSORT.md): descending; NaN first (the library's CPU code leaves it unordered), -0 equal
// to +0, ties by the smaller index, then by position. Pairs move as bits.
// ------------------------------------------------------------------------------------------
namespace detail {
inline bool sort_before(float x, float y) { return x != x ? y == y : x > y; }
inline bool sort_equal(float x, float y) { return x == y || (x != x && y != y); }
template <class D, class S, class I>
inline void sort32(D& dst, S& src, I& idx) {
    static_assert(std::is_same_v<typename D::DType, float> && std::is_same_v<typename S::DType, float>,
                  "TSORT32: float value tiles (two slots a pair)");
    static_assert(std::is_same_v<typename I::DType, uint32_t>, "TSORT32: the indices are uint32_t");
    static_assert(D::isRowMajor && S::isRowMajor && I::isRowMajor, "TSORT32: row-major tiles");
    if (!(ready(dst, "TSORT32") && ready(src, "TSORT32") && ready(idx, "TSORT32"))) return;
    rd(src, PIPE_V, "TSORT32"); rd(idx, PIPE_V, "TSORT32");
    const unsigned R = src.GetValidRow(), C = src.GetValidCol();
    if (idx.GetValidRow() != R || idx.GetValidCol() != C || dst.GetValidCol() != 2 * C) {
        pto_sim::fail("TSORT32: idx must have src's shape and dst twice its columns"); return;
    }
    for (unsigned r = 0; r < R; ++r)
        for (unsigned b = 0; b < C; b += 32) {
            const unsigned n = C - b < 32 ? C - b : 32;
            for (unsigned c = b; c < b + n; ++c) {
                const float v = src.at(r, c); const uint32_t i = idx.at(r, c);
                unsigned k = 0;
                for (unsigned j = b; j < b + n; ++j) {
                    const float w = src.at(r, j); const uint32_t x = idx.at(r, j);
                    k += sort_before(w, v) || (sort_equal(w, v) && (x < i || (x == i && j < c)));
                }
                std::memcpy(&dst.at(r, 2 * (b + k)), &src.at(r, c), 4);
                std::memcpy(&dst.at(r, 2 * (b + k) + 1), &idx.at(r, c), 4);
            }
        }
    wr(dst, PIPE_V, "TSORT32");
}
}  // namespace detail
template <typename D, typename S, typename I>
inline RecordEvent TSORT32(D& dst, S& src, I& idx) { detail::sort32(dst, src, idx); return {}; }
// the form for rows that are not whole blocks of 32 (tmp: the padded copy on the device)
template <typename D, typename S, typename I, typename Tmp>
inline RecordEvent TSORT32(D& dst, S& src, I& idx, Tmp& tmp) {
    if (!detail::ready(tmp, "TSORT32")) return {};
    detail::sort32(dst, src, idx);
    detail::wr(tmp, PIPE_V, "TSORT32");
    return {};
}
// The single-list merge: src's row is groups of 4 sorted blocks of blockLen slots; each group
// merged, taking the first block's head that no other head comes before.
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TMRGSORT(D& dst, S& src, uint32_t blockLen, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, float> && std::is_same_v<typename S::DType, float>,
                  "TMRGSORT: float pair tiles (two slots a pair)");
    static_assert(D::Rows == 1 && S::Rows == 1 && D::isRowMajor && S::isRowMajor,
                  "TMRGSORT: one-row row-major tiles");
    if (!(detail::ready(dst, "TMRGSORT") && detail::ready(src, "TMRGSORT"))) return {};
    detail::rd(src, PIPE_V, "TMRGSORT");
    const unsigned W = src.GetValidCol();
    if (blockLen == 0 || blockLen % 64 || W % (4 * blockLen) || dst.GetValidCol() != W) {
        pto_sim::fail("TMRGSORT: blockLen must be a multiple of 64 and src whole groups of 4 blocks");
        return {};
    }
    const unsigned n = blockLen / 2;
    for (unsigned g = 0; g < W / 2; g += 4 * n) {
        unsigned h[4] = {g, g + n, g + 2 * n, g + 3 * n};
        for (unsigned o = g; o < g + 4 * n; ++o) {
            int p = -1;
            for (int q = 0; q < 4; ++q) {
                if (h[q] >= g + (q + 1) * n) continue;
                if (p < 0 || detail::sort_before(src.at(0, 2 * h[q]), src.at(0, 2 * h[p]))) p = q;
            }
            std::memcpy(&dst.at(0, 2 * o), &src.at(0, 2 * h[p]), 4);
            std::memcpy(&dst.at(0, 2 * o + 1), &src.at(0, 2 * h[p] + 1), 4);
            ++h[p];
        }
    }
    detail::wr(dst, PIPE_V, "TMRGSORT");
    return {};
}

// THISTOGRAM (docs/isa/THISTOGRAM.md, A5 only): per row, the count of each value 0..255 of
// byte `byte` of the elements whose upper bytes match the filter (uint16: idx(r, 0); uint32:
// idx(0, 0), idx(1, 0), ... for bytes 3, 2, ...). The docs define counts ("dst_{r,b} = |{j |
// ...}|"); the library's CPU code stores running sums of them.
enum class HistByte : uint8_t { BYTE_0 = 0, BYTE_1 = 1, BYTE_2 = 2, BYTE_3 = 3 };
template <HistByte byte, typename D, typename S, typename I, typename... WaitEvents>
inline RecordEvent THISTOGRAM(D& dst, S& src, I& idx, WaitEvents&...) {
#if defined(PTO_NPU_ARCH_A2A3)
    static_assert(sizeof(D) == 0, "THISTOGRAM is not available on A2/A3 (docs/isa/THISTOGRAM.md)");
#endif
    using T = typename S::DType;
    static_assert(std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t>, "THISTOGRAM: uint16_t or uint32_t source");
    static_assert(std::is_same_v<typename D::DType, uint32_t>, "THISTOGRAM: uint32_t counts");
    static_assert(std::is_same_v<typename I::DType, uint8_t>, "THISTOGRAM: uint8_t filter");
    static_assert(unsigned(byte) < sizeof(T), "THISTOGRAM: the byte lies inside the element");
    if (!(detail::ready(dst, "THISTOGRAM") && detail::ready(src, "THISTOGRAM") && detail::ready(idx, "THISTOGRAM"))) return {};
    detail::rd(src, PIPE_V, "THISTOGRAM"); detail::rd(idx, PIPE_V, "THISTOGRAM");
    if (dst.GetValidCol() < 256) { pto_sim::fail("THISTOGRAM: dst has 256 bins a row"); return {}; }
    for (unsigned r = 0; r < src.GetValidRow(); ++r) {
        for (unsigned b = 0; b < 256; ++b) dst.at(r, b) = 0;
        for (unsigned c = 0; c < src.GetValidCol(); ++c) {
            const uint32_t u = src.at(r, c);
            bool keep = true;
            for (unsigned k = sizeof(T) - 1, m = 0; k > unsigned(byte); --k, ++m)
                keep = keep && ((u >> (8 * k)) & 0xFFu) == (sizeof(T) == 2 ? idx.at(r, 0) : idx.at(m, 0));
            if (keep) ++dst.at(r, (u >> (8 * unsigned(byte))) & 0xFFu);
        }
    }
    detail::wr(dst, PIPE_V, "THISTOGRAM");
    return {};
}

// Partial element-wise ops (docs/isa/TPARTADD.md, TPARTMUL.md, TPARTMAX.md, TPARTMIN.md): over
// dst's valid region, f(src0, src1) where both sources' valid regions hold the element, else the
// element of the one that does (0 where neither does: the official CPU code's choice).
namespace detail {
template <class D, class S0, class S1, class F>
inline void part(const char* op, F f, D& dst, S0& src0, S1& src1) {
    static_assert(std::is_same_v<typename D::DType, typename S0::DType> && std::is_same_v<typename D::DType, typename S1::DType>,
                  "TPART*: dst, src0 and src1 element types differ");
    using C = pto_sim::calc_t<typename D::DType>;
    const unsigned r0 = src0.GetValidRow(), c0 = src0.GetValidCol(), r1 = src1.GetValidRow(), c1 = src1.GetValidCol();
    map(op, [&](unsigned r, unsigned c, S0& a, S1& b) {
        const bool in0 = r < r0 && c < c0, in1 = r < r1 && c < c1;
        return in0 && in1 ? C(f(val(a, r, c), val(b, r, c))) : in0 ? val(a, r, c) : in1 ? val(b, r, c) : C(0);
    }, dst, src0, src1);
}
}  // namespace detail
#define PTO_SIM_PART(NAME, EXPR)                                                                \
    template <typename D, typename S0, typename S1, typename... WaitEvents,                     \
              std::enable_if_t<is_tile<S1>::value, int> = 0>                                    \
    inline RecordEvent NAME(D& dst, S0& src0, S1& src1, WaitEvents&...) {                       \
        static_assert(detail::all_row_major<D, S0, S1>, #NAME ": tiles must be row-major");      \
        detail::part(#NAME, [](auto a, auto b) { return EXPR; }, dst, src0, src1);              \
        return {};                                                                              \
    }
PTO_SIM_PART(TPARTADD, a + b)
PTO_SIM_PART(TPARTMUL, a * b)
PTO_SIM_PART(TPARTMAX, detail::fmaxv(a, b))
PTO_SIM_PART(TPARTMIN, detail::fminv(a, b))
#undef PTO_SIM_PART

// Partial arg-selections (docs/isa/TPARTARGMAX.md, TPARTARGMIN.md): over dst's valid region,
// src0's (value, index) pair where both sources hold the element and cmp(src0, src1) holds
// (ties and NaN take src1's), else the pair of the source that holds it (0 where neither does,
// as the official CPU code). Each value tile and its index tile share one valid region.
namespace detail {
template <class DV, class S0, class S1, class DI, class I0, class I1, class Cmp>
inline void part_arg(const char* op, Cmp cmp, DV& dst, S0& src0, S1& src1, DI& dstIdx, I0& src0Idx,
                     I1& src1Idx) {
    static_assert(all_row_major<DV, S0, S1, DI, I0, I1>, "TPARTARG*: tiles must be row-major");
    static_assert(std::is_same_v<typename DV::DType, typename S0::DType> && std::is_same_v<typename DV::DType, typename S1::DType>,
                  "TPARTARG*: dst, src0 and src1 value types differ");
    static_assert(std::is_same_v<typename DI::DType, typename I0::DType> && std::is_same_v<typename DI::DType, typename I1::DType>,
                  "TPARTARG*: dstIdx, src0Idx and src1Idx index types differ");
    static_assert(std::is_integral_v<typename DI::DType>, "TPARTARG*: indices are integers");
    if (src0.GetValidRow() != src0Idx.GetValidRow() || src0.GetValidCol() != src0Idx.GetValidCol() ||
        src1.GetValidRow() != src1Idx.GetValidRow() || src1.GetValidCol() != src1Idx.GetValidCol() ||
        dst.GetValidRow() != dstIdx.GetValidRow() || dst.GetValidCol() != dstIdx.GetValidCol()) {
        pto_sim::fail(std::string(op) + ": a value tile and its index tile have different valid regions");
        return;
    }
    const unsigned r0 = src0.GetValidRow(), c0 = src0.GetValidCol(), r1 = src1.GetValidRow(), c1 = src1.GetValidCol();
    // 0: neither holds (r, c), 1: src0's pair, 2: src1's pair
    auto pick = [&](unsigned r, unsigned c, S0& a, S1& b) {
        const bool in0 = r < r0 && c < c0, in1 = r < r1 && c < c1;
        return in0 && in1 ? (cmp(val(a, r, c), val(b, r, c)) ? 1 : 2) : in0 ? 1 : in1 ? 2 : 0;
    };
    map(op, [&](unsigned r, unsigned c, S0& a, S1& b, I0& ia, I1& ib) {
        const int k = pick(r, c, a, b);
        return k == 1 ? val(ia, r, c) : k == 2 ? val(ib, r, c) : 0;
    }, dstIdx, src0, src1, src0Idx, src1Idx);
    using C = pto_sim::calc_t<typename DV::DType>;
    map(op, [&](unsigned r, unsigned c, S0& a, S1& b) {
        const int k = pick(r, c, a, b);
        return k == 1 ? val(a, r, c) : k == 2 ? val(b, r, c) : C(0);
    }, dst, src0, src1);
}
}  // namespace detail
#define PTO_SIM_PART_ARG(NAME, CMP)                                                             \
    template <typename DV, typename S0, typename S1, typename DI, typename I0, typename I1,      \
              typename... WaitEvents>                                                           \
    inline RecordEvent NAME(DV& dst, S0& src0, S1& src1, DI& dstIdx, I0& src0Idx, I1& src1Idx,  \
                            WaitEvents&...) {                                                   \
        detail::part_arg(#NAME, [](auto a, auto b) { return a CMP b; }, dst, src0, src1, dstIdx, \
                         src0Idx, src1Idx);                                                     \
        return {};                                                                              \
    }
PTO_SIM_PART_ARG(TPARTARGMAX, >)
PTO_SIM_PART_ARG(TPARTARGMIN, <)
#undef PTO_SIM_PART_ARG

// TINTERLEAVE, TDEINTERLEAVE (docs/isa/TINTERLEAVE.md, TDEINTERLEAVE.md, two-source forms; the
// library's operand order dst1, dst0, src1, src0): four row-major tiles of one valid shape with
// an even column count C. TINTERLEAVE: the stream src0[0], src1[0], src0[1], ... of each row,
// its first C elements into dst0, the rest into dst1; TDEINTERLEAVE: of each row of
// [src0 | src1], the even elements into dst0, the odd ones into dst1.
namespace detail {
template <bool Inter, class D, class S>
inline void interleave(const char* op, D& dst1, D& dst0, S& src1, S& src0) {
    static_assert(all_row_major<D, S>, "TINTERLEAVE/TDEINTERLEAVE: tiles must be row-major");
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "TINTERLEAVE/TDEINTERLEAVE: element types differ");
    const unsigned R = dst0.GetValidRow(), K = dst0.GetValidCol();
    for (auto* t : {&src0, &src1})
        if (t->GetValidRow() != R || t->GetValidCol() != K) { pto_sim::fail(std::string(op) + ": valid shapes differ"); return; }
    if (dst1.GetValidRow() != R || dst1.GetValidCol() != K || K % 2) {
        pto_sim::fail(std::string(op) + ": valid shapes differ or the column count is odd");
        return;
    }
    for (int half = 0; half < 2; ++half)
        map(op, [&](unsigned r, unsigned c, S& a, S& b) {
            if (Inter) {
                const unsigned k = c / 2 + half * (K / 2);
                return c % 2 == 0 ? val(a, r, k) : val(b, r, k);
            }
            const unsigned j = 2 * c + half;
            return j < K ? val(a, r, j) : val(b, r, j - K);
        }, half ? dst1 : dst0, src0, src1);
}
}  // namespace detail
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TINTERLEAVE(D& dst1, D& dst0, S& src1, S& src0, WaitEvents&...) {
    detail::interleave<true>("TINTERLEAVE", dst1, dst0, src1, src0);
    return {};
}
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TDEINTERLEAVE(D& dst1, D& dst0, S& src1, S& src0, WaitEvents&...) {
    detail::interleave<false>("TDEINTERLEAVE", dst1, dst0, src1, src0);
    return {};
}

// TPAIRREDUCESUM (docs/isa/TPairReduceSum.md): dst[i, j] = src[i, 2j] + src[i, 2j + 1] for the
// first ceil(cols / 2) columns (a missing odd element adds +0), 0 in the rest of the row.
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TPAIRREDUCESUM(D& dst, S& src, WaitEvents&...) {
    static_assert(detail::all_row_major<D, S>, "TPAIRREDUCESUM: tiles must be row-major");
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "TPAIRREDUCESUM: dst and src element types differ");
    using C = pto_sim::calc_t<typename S::DType>;
    const unsigned K = src.GetValidCol();
    if (src.GetValidRow() != dst.GetValidRow() || K != dst.GetValidCol()) {
        pto_sim::fail("TPAIRREDUCESUM: src and dst valid shapes differ");
        return {};
    }
    detail::map("TPAIRREDUCESUM", [K](unsigned r, unsigned c, S& a) {
        if (2 * c >= K) return C(0);
        return C(detail::val(a, r, 2 * c) + (2 * c + 1 < K ? detail::val(a, r, 2 * c + 1) : C(0)));
    }, dst, src);
    return {};
}

// ------------------------------------------------------------------------------------------
// Broadcasts: src1 is a per-row (R x 1) or per-column (1 x C) tile.
// ------------------------------------------------------------------------------------------
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TROWEXPAND(D& dst, S& src, WaitEvents&...) {
    detail::map("TROWEXPAND", [](unsigned r, unsigned, S& b) { return detail::val(b, r, 0); }, dst, src);
    return {};
}
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TCOLEXPAND(D& dst, S& src, WaitEvents&...) {
    detail::map("TCOLEXPAND", [](unsigned, unsigned c, S& b) { return detail::val(b, 0, c); }, dst, src);
    return {};
}
// The per-row operand of TROWEXPAND<op> (docs/isa/TROWEXPANDADD.md) is either a column-major
// R x 1 tile (Mode 1: one value per row) or a row-major tile of one 32-byte block per row
// (Mode 2: the block repeats along the row); anything else is an error, as in the library.
namespace detail {
template <class D, class B> inline bool per_row_operand(const D& dst, const B& b) {
    const unsigned block = 32 / sizeof(typename B::DType);
    return b.GetValidRow() == dst.GetValidRow() &&
           (B::isRowMajor ? b.GetValidCol() == block : b.GetValidCol() == 1);
}
}  // namespace detail
#define PTO_SIM_EXPAND(NAME, ROW, EXPR)                                                         \
    template <typename D, typename S0, typename S1, typename... WaitEvents>                     \
    inline RecordEvent NAME(D& dst, S0& src0, S1& src1, WaitEvents&...) {                       \
        static_assert(D::isRowMajor, #NAME ": dst must be row-major");                          \
        if (ROW && !detail::per_row_operand(dst, src1)) {                                       \
            pto_sim::fail(#NAME ": invalid src1 shape (a column-major R x 1 tile or a "         \
                          "row-major block of 32 bytes per row)");                              \
            return {};                                                                          \
        }                                                                                       \
        detail::map(#NAME, [](unsigned r, unsigned c, S0& a_, S1& b_) {                          \
            auto a = detail::val(a_, r, c);                                                     \
            auto b = ROW ? detail::val(b_, r, c % b_.GetValidCol()) : detail::val(b_, 0, c);    \
            return EXPR; }, dst, src0, src1);                                                   \
        return {};                                                                              \
    }
PTO_SIM_EXPAND(TROWEXPANDADD, true, a + b)
PTO_SIM_EXPAND(TROWEXPANDSUB, true, a - b)
PTO_SIM_EXPAND(TROWEXPANDMUL, true, a * b)
PTO_SIM_EXPAND(TROWEXPANDDIV, true, detail::divv(a, b))
PTO_SIM_EXPAND(TROWEXPANDMAX, true, detail::fmaxv(a, b))
PTO_SIM_EXPAND(TROWEXPANDMIN, true, detail::fminv(a, b))
PTO_SIM_EXPAND(TROWEXPANDEXPDIF, true, decltype(a)(std::exp(a - b)))
PTO_SIM_EXPAND(TCOLEXPANDADD, false, a + b)
PTO_SIM_EXPAND(TCOLEXPANDSUB, false, a - b)
PTO_SIM_EXPAND(TCOLEXPANDMUL, false, a * b)
PTO_SIM_EXPAND(TCOLEXPANDDIV, false, detail::divv(a, b))
PTO_SIM_EXPAND(TCOLEXPANDMAX, false, detail::fmaxv(a, b))
PTO_SIM_EXPAND(TCOLEXPANDMIN, false, detail::fminv(a, b))
PTO_SIM_EXPAND(TCOLEXPANDEXPDIF, false, decltype(a)(std::exp(a - b)))
#undef PTO_SIM_EXPAND

// ------------------------------------------------------------------------------------------
// Transpose and conversion
// ------------------------------------------------------------------------------------------
template <typename D, typename S, typename Tmp, typename... WaitEvents>
inline RecordEvent TTRANS(D& dst, S& src, Tmp& tmp, WaitEvents&...) {
    static_assert(sizeof(typename D::DType) == sizeof(typename S::DType), "TTRANS keeps the element size");
    static_assert(S::isRowMajor, "TTRANS needs a row-major source");
    detail::wr(tmp, PIPE_V, "TTRANS");
    detail::map("TTRANS", [](unsigned r, unsigned c, S& a) { return detail::val(a, c, r); }, dst, src);
    return {};
}

template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TCVT(D& dst, S& src, RoundMode mode, WaitEvents&...) {
    detail::need_vec<D>("TCVT"); detail::need_vec<S>("TCVT");
    if (!(detail::ready(dst, "TCVT") && detail::ready(src, "TCVT"))) return {};
    if (mode != RoundMode::CAST_RINT && mode != RoundMode::CAST_NONE)
        pto_sim::fail("TCVT: the CPU check implements CAST_RINT (round to nearest even) only");
    detail::rd(src, PIPE_V, "TCVT");
    for (unsigned r = 0; r < dst.GetValidRow(); ++r)
        for (unsigned c = 0; c < dst.GetValidCol(); ++c)
            dst.at(r, c) = pto_sim::convert<typename D::DType>(src.at(r, c));
    detail::wr(dst, PIPE_V, "TCVT");
    return {};
}

// ------------------------------------------------------------------------------------------
// Cube: C (Acc, L0C) = A (Left, L0A) @ B (Right, L0B) [+ C_in]
// ------------------------------------------------------------------------------------------
namespace detail {
template <class C, class A, class B>
constexpr void check_matmul() {
    static_assert(A::Loc == TileType::Left && B::Loc == TileType::Right && C::Loc == TileType::Acc,
                  "TMATMUL takes Left, Right and Acc tiles");
    static_assert(A::Rows == C::Rows && A::Cols == B::Rows && B::Cols == C::Cols,
                  "TMATMUL: TileLeft::Rows == TileRes::Rows, TileLeft::Cols == TileRight::Rows, "
                  "TileRight::Cols == TileRes::Cols");
    using TA = typename A::DType; using TB = typename B::DType; using TC = typename C::DType;
    static_assert(std::is_same_v<TA, TB>, "TMATMUL: left and right element types must match");
#if defined(PTO_NPU_ARCH_A2A3)
    static_assert((std::is_same_v<TC, int32_t> && std::is_same_v<TA, int8_t>) ||
                  (std::is_same_v<TC, float> && (std::is_same_v<TA, half> || std::is_same_v<TA, float> ||
                                                 std::is_same_v<TA, bfloat16_t>)),
                  "TMATMUL on A2/A3: (int32, int8, int8), (float, half, half), (float, float, float), "
                  "(float, bfloat16, bfloat16)");
#else
    static_assert(std::is_same_v<TC, float> && (std::is_same_v<TA, half> || std::is_same_v<TA, float> ||
                                                std::is_same_v<TA, bfloat16_t>),
                  "TMATMUL on A5 accumulates half/bfloat16/float into float (no int8 GEMM)");
    // A5 enforces the fractal layouts: Left nZ (col-major boxes of row-major fractals),
    // Right (row-major boxes of col-major fractals), Acc nZ.
    static_assert(!A::isRowMajor && A::SFractal == SLayout::RowMajor, "A5 TMATMUL: Left must be ColMajor/SLayout::RowMajor");
    static_assert(B::isRowMajor && B::SFractal == SLayout::ColMajor, "A5 TMATMUL: Right must be RowMajor/SLayout::ColMajor");
    static_assert(!C::isRowMajor && C::SFractal == SLayout::RowMajor, "A5 TMATMUL: Acc must be ColMajor/SLayout::RowMajor");
#endif
}
template <class C, class A, class B>
inline void matmul(const char* op, C& out, A& a, B& b, C* in) {
    if (!(ready(out, op) && ready(a, op) && ready(b, op))) return;
    rd(a, PIPE_M, op); rd(b, PIPE_M, op);
    if (in) rd(*in, PIPE_M, op);
    const unsigned M = a.GetValidRow(), K = a.GetValidCol(), N = b.GetValidCol();
    if (M < 1 || K < 1 || N < 1 || M > 4095 || K > 4095 || N > 4095) { pto_sim::fail(std::string(op) + ": m/k/n outside [1, 4095]"); return; }
    using TC = typename C::DType;
    std::vector<TC> res(std::size_t(M) * N);
    for (unsigned i = 0; i < M; ++i)
        for (unsigned j = 0; j < N; ++j) {
            if constexpr (std::is_integral_v<TC>) {
                int64_t acc = in ? int64_t(in->at(i, j)) : 0;
                for (unsigned k = 0; k < K; ++k) acc += int64_t(a.at(i, k)) * int64_t(b.at(k, j));
                res[std::size_t(i) * N + j] = TC(acc);
            } else {
                // as the library's CPU implementation: a fused multiply-add per k from zero,
                // the input accumulator added at the end (C1 = C0 + A.B)
                float acc = 0.0f;
                for (unsigned k = 0; k < K; ++k) acc = std::fma(float(a.at(i, k)), float(b.at(k, j)), acc);
                res[std::size_t(i) * N + j] = TC(in ? float(in->at(i, j)) + acc : acc);
            }
        }
    for (unsigned i = 0; i < M; ++i)
        for (unsigned j = 0; j < N; ++j) out.at(i, j) = res[std::size_t(i) * N + j];
    wr(out, PIPE_M, op);
}
}  // namespace detail

template <typename TileRes, typename TileLeft, typename TileRight, typename... WaitEvents>
inline RecordEvent TMATMUL(TileRes& c, TileLeft& a, TileRight& b, WaitEvents&...) {
    detail::check_matmul<TileRes, TileLeft, TileRight>();
    detail::matmul<TileRes, TileLeft, TileRight>("TMATMUL", c, a, b, nullptr);
    return {};
}
template <typename TileRes, typename TileLeft, typename TileRight, typename... WaitEvents>
inline RecordEvent TMATMUL_ACC(TileRes& cOut, TileRes& cIn, TileLeft& a, TileRight& b, WaitEvents&...) {
    detail::check_matmul<TileRes, TileLeft, TileRight>();
    detail::matmul<TileRes, TileLeft, TileRight>("TMATMUL_ACC", cOut, a, b, &cIn);
    return {};
}
// C = A @ B + bias row (docs/isa/TMATMUL_BIAS.md): the bias is a one-row row-major Bias tile
// of C's element type, added to every row after the product (as the library's CPU code)
template <typename TileRes, typename TileLeft, typename TileRight, typename TileBias, typename... WaitEvents>
inline RecordEvent TMATMUL_BIAS(TileRes& c, TileLeft& a, TileRight& b, TileBias& bias, WaitEvents&...) {
    detail::check_matmul<TileRes, TileLeft, TileRight>();
    static_assert(std::is_same_v<typename TileBias::DType, typename TileRes::DType>,
                  "TMATMUL_BIAS: the bias has the result's element type");
    static_assert(TileBias::Loc == TileType::Bias && TileBias::Rows == 1 && TileBias::isRowMajor,
                  "TMATMUL_BIAS: the bias is a one-row row-major Bias tile");
    if (!detail::ready(bias, "TMATMUL_BIAS")) return {};
    detail::rd(bias, PIPE_M, "TMATMUL_BIAS");
    detail::matmul<TileRes, TileLeft, TileRight>("TMATMUL_BIAS", c, a, b, nullptr);
    using TC = typename TileRes::DType;
    for (unsigned i = 0; i < c.GetValidRow(); ++i)
        for (unsigned j = 0; j < c.GetValidCol(); ++j) {
            if constexpr (std::is_integral_v<TC>)   // wraps, as the cube's int32 adder
                c.at(i, j) = TC(uint32_t(c.at(i, j)) + uint32_t(bias.at(0, j)));
            else
                c.at(i, j) = TC(float(c.at(i, j)) + float(bias.at(0, j)));
        }
    return {};
}

// ------------------------------------------------------------------------------------------
// Compares, selects and generators (docs/isa/TCMP.md, TCMPS.md, TSEL.md, TSELS.md, TCI.md,
// TTRI.md). A mask is a uint8_t tile of one bit per element, row by row: bit c % 8 of byte
// c / 8 of row r is element (r, c); bits past the source's columns are 0.
// ------------------------------------------------------------------------------------------
enum class CmpMode : uint8_t { EQ = 0, NE = 1, LT = 2, LE = 3, GT = 4, GE = 5 };

namespace detail {
template <class T> inline bool cmpv(T a, T b, CmpMode m) {
    switch (m) {
        case CmpMode::EQ: return a == b;
        case CmpMode::NE: return a != b;
        case CmpMode::LT: return a < b;
        case CmpMode::LE: return a <= b;
        case CmpMode::GT: return a > b;
        case CmpMode::GE: return a >= b;
    }
    return false;
}
// dst(r, w) = the bits pred(r, 8w + b) of an R x C source, over dst's valid columns.
template <class D, class F> inline void pack_mask(const char* op, D& dst, unsigned R, unsigned C, F pred) {
    static_assert(std::is_same_v<typename D::DType, uint8_t>, "the mask of a compare is a uint8_t tile");
    need_vec<D>(op);
    if (!ready(dst, op)) return;
    const unsigned W = dst.GetValidCol();
    if (dst.GetValidRow() != R || W < (C + 7) / 8) {
        pto_sim::fail(std::string(op) + ": the mask tile is smaller than a bit per source element");
        return;
    }
    for (unsigned r = 0; r < R; ++r)
        for (unsigned w = 0; w < W; ++w) {
            uint8_t byte = 0;
            for (unsigned b = 0; b < 8; ++b)
                if (8 * w + b < C && pred(r, 8 * w + b)) byte |= uint8_t(1u << b);
            dst.at(r, w) = byte;
        }
    wr(dst, PIPE_V, op);
}
template <class M> inline bool mask_bit(M& m, unsigned r, unsigned c) {
    static_assert(std::is_same_v<typename M::DType, uint8_t>, "a select mask is a uint8_t tile");
    return (m.at(r, c / 8) >> (c % 8)) & 1u;
}
}  // namespace detail

template <typename D, typename S0, typename S1, typename... WaitEvents, std::enable_if_t<is_tile<S1>::value, int> = 0>
inline RecordEvent TCMP(D& dst, S0& src0, S1& src1, CmpMode mode, WaitEvents&...) {
    static_assert(std::is_same_v<typename S0::DType, typename S1::DType>, "TCMP: src0 and src1 must have same type");
    static_assert(detail::all_row_major<S0, S1>, "TCMP: tiles must be row-major (docs/isa/TCMP.md)");
    if (!(detail::ready(src0, "TCMP") && detail::ready(src1, "TCMP"))) return {};
    if (src0.GetValidRow() != src1.GetValidRow() || src0.GetValidCol() != src1.GetValidCol()) {
        pto_sim::fail("TCMP: src0 and src1 differ in shape");
        return {};
    }
    detail::rd(src0, PIPE_V, "TCMP"); detail::rd(src1, PIPE_V, "TCMP");
    detail::pack_mask("TCMP", dst, src0.GetValidRow(), src0.GetValidCol(), [&](unsigned r, unsigned c) {
        return detail::cmpv(detail::val(src0, r, c), detail::val(src1, r, c), mode); });
    return {};
}
template <typename D, typename S, typename... WaitEvents>
inline RecordEvent TCMPS(D& dst, S& src0, typename S::DType scalar, CmpMode mode, WaitEvents&...) {
    static_assert(detail::all_row_major<S>, "TCMPS: tiles must be row-major (docs/isa/TCMPS.md)");
    if (!detail::ready(src0, "TCMPS")) return {};
    detail::rd(src0, PIPE_V, "TCMPS");
    const auto s = pto_sim::calc_t<typename S::DType>(scalar);
    detail::pack_mask("TCMPS", dst, src0.GetValidRow(), src0.GetValidCol(), [&](unsigned r, unsigned c) {
        return detail::cmpv(detail::val(src0, r, c), s, mode); });
    return {};
}
// TSEL/TSELS take a scratch tile (the A2/A3 compare mask, the scalar); the CPU check needs none.
template <typename D, typename M, typename T, typename... WaitEvents>
inline RecordEvent TSEL(D& dst, M& mask, D& src0, D& src1, T& tmp, WaitEvents&...) {
    static_assert(detail::all_row_major<D, M>, "TSEL: tiles must be row-major (docs/isa/TSEL.md)");
    if (!(detail::ready(mask, "TSEL") && detail::ready(tmp, "TSEL"))) return {};
    detail::rd(mask, PIPE_V, "TSEL");
    detail::map("TSEL", [&](unsigned r, unsigned c, D& a_, D& b_) {
        return detail::mask_bit(mask, r, c) ? detail::val(a_, r, c) : detail::val(b_, r, c); }, dst, src0, src1);
    detail::wr(tmp, PIPE_V, "TSEL");
    return {};
}
template <typename D, typename M, typename S, typename T, typename... WaitEvents>
inline RecordEvent TSELS(D& dst, M& mask, S& src, T& tmp, typename S::DType scalar, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, typename S::DType>, "TSELS: dst and src element types differ");
    static_assert(detail::all_row_major<D, M, S>, "TSELS: tiles must be row-major (docs/isa/TSELS.md)");
    if (!(detail::ready(mask, "TSELS") && detail::ready(tmp, "TSELS"))) return {};
    detail::rd(mask, PIPE_V, "TSELS");
    const auto s = pto_sim::calc_t<typename S::DType>(scalar);
    detail::map("TSELS", [&](unsigned r, unsigned c, S& a_) {
        return detail::mask_bit(mask, r, c) ? detail::val(a_, r, c) : s; }, dst, src);
    detail::wr(tmp, PIPE_V, "TSELS");
    return {};
}
// TCI: dst(0, c) = start + c (descending: start - c); integers wrap (computed unsigned).
template <typename D, typename T, int descending, typename... WaitEvents>
inline RecordEvent TCI(D& dst, T start, WaitEvents&...) {
    static_assert(D::Rows == 1, "TCI only support 1 row tile");
    static_assert(std::is_same_v<typename D::DType, T>, "TCI data type must match tile data type");
    detail::map("TCI", [start](unsigned, unsigned c) {
        if constexpr (std::is_integral_v<T>) {
            const uint64_t s = uint64_t(int64_t(start));
            return T(descending ? s - uint64_t(c) : s + uint64_t(c));
        } else {
            using C = pto_sim::calc_t<T>;
            return descending ? C(start) - C(c) : C(start) + C(c);
        }
    }, dst);
    return {};
}
// TTRI: 1 where c <= r + diagonal (lower), or where c >= r + diagonal (upper); else 0.
template <typename D, int isUpperOrLower, typename... WaitEvents>
inline RecordEvent TTRI(D& dst, int diagonal, WaitEvents&...) {
    static_assert(isUpperOrLower == 0 || isUpperOrLower == 1, "TTRI: isUpperOrLower must be 0 or 1");
    static_assert(detail::all_row_major<D>, "TTRI: tiles must be row-major (docs/isa/TTRI.md)");
    using C = pto_sim::calc_t<typename D::DType>;
    detail::map("TTRI", [diagonal](unsigned r, unsigned c) {
        const int64_t edge = int64_t(r) + diagonal;
        return (isUpperOrLower ? int64_t(c) >= edge : int64_t(c) <= edge) ? C(1) : C(0);
    }, dst);
    return {};
}

// TRANDOM (docs/isa/TRANDOM.md): Philox-4x32 words of a 128-bit counter under a 64-bit key.
// Each row is cut into blocks of 256 columns: column c takes word (c % 256) / 64 of the rounds
// of the counter plus the block's step and lane c % 64; a block steps the counter by the
// storage row's words / 4 (the library's RowStride / 4). Key and counter are not changed.
using TRandomKey = uint32_t[2];
using TRandomCounter = uint32_t[4];
template <uint16_t Rounds = 10, typename D, typename... WaitEvents>
inline RecordEvent TRANDOM(D& dst, TRandomKey& key, TRandomCounter& counter, WaitEvents&...) {
    using T = typename D::DType;
    static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>,
                  "TRANDOM: int32_t or uint32_t tiles (docs/isa/TRANDOM.md)");
    static_assert(Rounds == 7 || Rounds == 10, "TRANDOM: Rounds is 7 or 10");
    static_assert(D::isRowMajor, "TRANDOM: row-major tiles (docs/isa/TRANDOM.md)");
    const unsigned blocks = (dst.GetValidCol() + 255) / 256;
    const uint64_t stride = uint64_t(D::Cols) / 4;
    detail::map("TRANDOM", [&](unsigned r, unsigned c) {
        const uint64_t step = (uint64_t(r) * blocks + c / 256) * stride + c % 64;
        uint64_t t = uint64_t(counter[0]) + (step & 0xFFFFFFFFu);
        uint32_t w[4];
        w[0] = uint32_t(t);
        t = uint64_t(counter[1]) + (step >> 32) + (t >> 32);
        w[1] = uint32_t(t);
        t = uint64_t(counter[2]) + (t >> 32);
        w[2] = uint32_t(t);
        w[3] = counter[3] + uint32_t(t >> 32);
        uint32_t k0 = key[0], k1 = key[1];
        for (uint16_t i = 0; i < Rounds; ++i) {
            const uint64_t p0 = uint64_t(w[0]) * 0xD2511F53u, p1 = uint64_t(w[2]) * 0xCD9E8D57u;
            const uint32_t n0 = uint32_t(p1 >> 32) ^ w[1] ^ k0, n2 = uint32_t(p0 >> 32) ^ w[3] ^ k1;
            w[0] = n0; w[1] = uint32_t(p1); w[2] = n2; w[3] = uint32_t(p0);
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        return T(w[(c % 256) / 64]);
    }, dst);
    return {};
}

// Integer quantisation with per-row f32 parameters (docs/isa/TQUANT.md, "Integer INT8";
// TDEQUANT.md). The parameter of row r is element (r, 0) of its tile: a column-major R x 1 tile
// or rows whose first element holds it (a padded R x 1 tile, or a block per row).
enum class QuantType { MXFP8 = 0, MXFP4_E2M1 = 1, INT8_SYM = 2, INT8_ASYM = 3 };
// dst = clamp(rint(src * scale (+ offset))), each operation rounded to float; NaN gives 0.
template <QuantType Q, typename D, typename S, typename P, typename... WaitEvents>
inline RecordEvent TQUANT(D& dst, S& src, P& scale, P* offset = nullptr, WaitEvents&...) {
    static_assert(std::is_same_v<typename S::DType, float>, "TQUANT: float32 input (docs/isa/TQUANT.md)");
    static_assert(Q == QuantType::INT8_SYM || Q == QuantType::INT8_ASYM, "TQUANT: the INT8 forms only");
    using U = typename D::DType;
    static_assert(std::is_same_v<U, std::conditional_t<Q == QuantType::INT8_SYM, int8_t, uint8_t>>,
                  "TQUANT: INT8_SYM writes int8_t, INT8_ASYM uint8_t");
    if (Q == QuantType::INT8_ASYM && offset == nullptr) {
        pto_sim::fail("TQUANT: INT8_ASYM needs an offset");
        return {};
    }
    constexpr float lo = std::numeric_limits<U>::min(), hi = std::numeric_limits<U>::max();
    detail::map("TQUANT", [&](unsigned r, unsigned c, S& s_, P& p_) {
        float x = float(s_.at(r, c)) * float(p_.at(r, 0));
        if (Q == QuantType::INT8_ASYM) x = x + float(offset->at(r, 0));
        return x != x ? U(0) : U(std::nearbyint(x < lo ? lo : x > hi ? hi : x));
    }, dst, src, scale);
    return {};
}
// A2/A3's form: the same codes; src (scaled in place, then reused by the cast chain) and tmp
// are clobbered, here with NaN, so a kernel that reads src afterwards is caught.
template <QuantType Q, typename D, typename S, typename P, typename T, typename... WaitEvents>
inline RecordEvent TQUANT(D& dst, S& src, P& scale, T& tmp, P* offset = nullptr, WaitEvents&...) {
    TQUANT<Q>(dst, src, scale, offset);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    detail::map("TQUANT", [nan](unsigned, unsigned) { return nan; }, src);
    detail::wr(tmp, PIPE_V, "TQUANT");
    return {};
}
// dst = (src - offset) * scale in float, each operation rounded; src int8_t or int16_t.
template <typename D, typename S, typename P, typename... WaitEvents>
inline RecordEvent TDEQUANT(D& dst, S& src, P& scale, P& offset, WaitEvents&...) {
    static_assert(std::is_same_v<typename D::DType, float> && std::is_same_v<typename P::DType, float>,
                  "TDEQUANT: float dst, scale and offset (docs/isa/TDEQUANT.md)");
    static_assert(std::is_same_v<typename S::DType, int8_t> || std::is_same_v<typename S::DType, int16_t>,
                  "TDEQUANT: int8_t or int16_t src (docs/isa/TDEQUANT.md)");
    detail::map("TDEQUANT", [](unsigned r, unsigned c, S& s_, P& sc, P& of) {
        return (float(s_.at(r, c)) - float(of.at(r, 0))) * float(sc.at(r, 0));
    }, dst, src, scale, offset);
    return {};
}

}  // namespace pto

#endif  // PTO_ASCEND_CPU_CHECK_PTO_INST_HPP
