"""The ARM64 kernel emitter: the shared C renderer plus NEON templates.

Vector code is compiled under ``#if defined(__aarch64__)`` (NEON is mandatory on AArch64);
elsewhere the portable loops of :class:`~pto_core.codegen.cstyle.CStyleRenderer` remain, which
compilers auto-vectorise, so one source runs on the x86 host and under ``qemu-aarch64``.
f32 and f16 tiles get NEON code (f16 is widened to f32 for the math and rounded once per op,
exactly like the reference); other types use the portable loops.

Native FP16 arithmetic: a fused loop over f16 tiles whose every op is a single IEEE operation
(add, sub, mul, div, sqrt, max, min, neg, abs, 1/x, copies; constants exactly representable in
f16) also gets a ``float16x8_t`` variant under ``__ARM_FEATURE_FP16_VECTOR_ARITHMETIC`` (e.g.
``-march=armv8.2-a+fp16``). It gives the same bits as the widening code: an IEEE op on f16
inputs rounded once to f16 equals the op in f32 rounded to f16, because f32 carries more than
2 x 11 + 2 significand bits (double rounding is then innocuous). Transcendentals, composite ops
(silu, rsqrt, ...), runtime scalars and reductions stay on the widening path.

>>> "vaddq_f32" in Arm64Renderer().VEC_BINARY["add"]
True
"""

from __future__ import annotations

from typing import Sequence

from pto_core.codegen.cstyle import CStyleRenderer, _Out
from pto_core.ir import Category, ElementType, Function, Instr, MemRefType, TileType
from pto_core.ir.ops import KINDS, Expr
from pto_core.options import CompileOptions
from pto_core.passes.fuse_loops import nest_shape

#: the preprocessor test of native FP16 vector arithmetic (ARMv8.2-A FP16 extension)
FP16_GUARD = "defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)"

NEON_HELPERS = r"""
#if defined(__aarch64__)
#include <arm_neon.h>
/* Vector twins of _pto_expf/_pto_logf/_pto_tanhf: same reductions and polynomials. */
static inline float32x4_t _pto_vexpq_f32(float32x4_t x) {
    x = vmaxq_f32(x, vdupq_n_f32(-104.0f));
    x = vminq_f32(x, vdupq_n_f32(89.0f));
    float32x4_t fn = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
    int32x4_t n = vcvtq_s32_f32(fn);
    float32x4_t r = vfmsq_f32(x, fn, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, fn, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
    p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
    p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
    p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
    int32x4_t h = vshrq_n_s32(n, 1), l = vsubq_s32(n, h);
    float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(h, vdupq_n_s32(127)), 23));
    float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(l, vdupq_n_s32(127)), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}
static inline float32x4_t _pto_vlogq_f32(float32x4_t x) {
    uint32x4_t sub = vcltq_f32(x, vdupq_n_f32(1.17549435e-38f));  /* subnormal: scale by 2^23 */
    int32x4_t ix = vreinterpretq_s32_f32(vbslq_f32(sub, vmulq_n_f32(x, 8388608.0f), x));
    int32x4_t e = vsubq_s32(vandq_s32(vshrq_n_s32(ix, 23), vdupq_n_s32(0xff)), vdupq_n_s32(126));
    e = vsubq_s32(e, vandq_s32(vreinterpretq_s32_u32(sub), vdupq_n_s32(23)));
    float32x4_t m = vreinterpretq_f32_s32(vorrq_s32(vandq_s32(ix, vdupq_n_s32(0x007fffff)),
                                                    vdupq_n_s32(0x3f000000)));
    uint32x4_t small = vcltq_f32(m, vdupq_n_f32(0.707106781186547524f));
    e = vaddq_s32(e, vreinterpretq_s32_u32(small));            /* all-ones lanes are -1 */
    m = vaddq_f32(m, vreinterpretq_f32_u32(vandq_u32(small, vreinterpretq_u32_f32(m))));
    m = vsubq_f32(m, vdupq_n_f32(1.0f));
    float32x4_t z = vmulq_f32(m, m);
    float32x4_t y = vdupq_n_f32(7.0376836292e-2f);
    y = vfmaq_f32(vdupq_n_f32(-1.1514610310e-1f), y, m);
    y = vfmaq_f32(vdupq_n_f32(1.1676998740e-1f), y, m);
    y = vfmaq_f32(vdupq_n_f32(-1.2420140846e-1f), y, m);
    y = vfmaq_f32(vdupq_n_f32(1.4249322787e-1f), y, m);
    y = vfmaq_f32(vdupq_n_f32(-1.6668057665e-1f), y, m);
    y = vfmaq_f32(vdupq_n_f32(2.0000714765e-1f), y, m);
    y = vfmaq_f32(vdupq_n_f32(-2.4999993993e-1f), y, m);
    y = vfmaq_f32(vdupq_n_f32(3.3333331174e-1f), y, m);
    y = vmulq_f32(vmulq_f32(y, m), z);
    float32x4_t fe = vcvtq_f32_s32(e);
    y = vfmaq_f32(y, fe, vdupq_n_f32(-2.12194440e-4f));
    y = vfmaq_f32(y, z, vdupq_n_f32(-0.5f));
    float32x4_t r = vfmaq_f32(vaddq_f32(m, y), fe, vdupq_n_f32(0.693359375f));
    r = vbslq_f32(vceqq_f32(x, vdupq_n_f32(0.0f)), vdupq_n_f32(-INFINITY), r);
    r = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), vdupq_n_f32(NAN), r);
    r = vbslq_f32(vceqq_f32(x, vdupq_n_f32(INFINITY)), vdupq_n_f32(INFINITY), r);
    return vbslq_f32(vceqq_f32(x, x), r, x);                   /* NaN in, NaN out */
}
/* FMAX/FMIN propagate NaN but order -0 below +0; the reference returns the second of two
 * equal operands (max(+0, -0) is -0), as _pto_maxf does. */
static inline float32x4_t _pto_vmaxq_f32(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vceqq_f32(a, b), b, vmaxq_f32(a, b));
}
static inline float32x4_t _pto_vminq_f32(float32x4_t a, float32x4_t b) {
    return vbslq_f32(vceqq_f32(a, b), b, vminq_f32(a, b));
}
#if defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
static inline float16x8_t _pto_vmaxq_f16(float16x8_t a, float16x8_t b) {
    return vbslq_f16(vceqq_f16(a, b), b, vmaxq_f16(a, b));
}
static inline float16x8_t _pto_vminq_f16(float16x8_t a, float16x8_t b) {
    return vbslq_f16(vceqq_f16(a, b), b, vminq_f16(a, b));
}
#endif
static inline float32x4_t _pto_vtanhq_f32(float32x4_t x) {
    float32x4_t t = _pto_vexpq_f32(vmulq_n_f32(vabsq_f32(x), -2.0f));
    float32x4_t r = vdivq_f32(vsubq_f32(vdupq_n_f32(1.0f), t), vaddq_f32(vdupq_n_f32(1.0f), t));
    return vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0f)), vnegq_f32(r), r);
}
#endif
"""

#: the preprocessor test of the x86 AVX-512 twins (x86-64-v4 and -march=native builds here)
AVX512_GUARD = "!defined(__aarch64__) && defined(__AVX512F__)"

AVX512_HELPERS = r"""
#if """ + AVX512_GUARD + r"""
#include <immintrin.h>
/* AVX-512 twins of the NEON helpers (16 lanes). _pto_expf's steps: the same range reduction,
 * polynomial and FMAs; scalef multiplies by 2^n with one rounding, which is what the two
 * exact-then-rounding factors of the portable code give. */
static inline __m512 _pto_x16_exp(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);     /* a NaN x is kept: the second */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}
static inline __m512 _pto_x16_neg(__m512 a) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a),
                                                _mm512_set1_epi32((int)0x80000000u)));
}
/* maxps/minps are `a > b ? a : b` / `a < b ? a : b`: the reference's rule but for a NaN a */
static inline __m512 _pto_x16_max(__m512 a, __m512 b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_max_ps(a, b), a);
}
static inline __m512 _pto_x16_min(__m512 a, __m512 b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_min_ps(a, b), a);
}
/* row max/min accumulation: a NaN in either operand stays (maxps(b, a) returns a when either
 * is NaN; the blend takes a NaN b) */
static inline __m512 _pto_x16_maxacc(__m512 a, __m512 b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), _mm512_max_ps(b, a), b);
}
static inline __m512 _pto_x16_minacc(__m512 a, __m512 b) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q), _mm512_min_ps(b, a), b);
}
/* horizontal reductions: lane l with l + 8, then l + 4, l + 2, l + 1 (the portable lane
 * tree's order, so a row sum has the same bits on both paths) */
#define _PTO_X16_TREE(op, v) do { \
        v = op(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2))); \
        v = op(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1))); \
        v = op(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2))); \
        v = op(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1))); } while (0)
static inline float _pto_x16_hsum(__m512 v) { _PTO_X16_TREE(_mm512_add_ps, v); return _mm512_cvtss_f32(v); }
static inline float _pto_x16_hmax(__m512 v) { _PTO_X16_TREE(_pto_x16_maxacc, v); return _mm512_cvtss_f32(v); }
static inline float _pto_x16_hmin(__m512 v) { _PTO_X16_TREE(_pto_x16_minacc, v); return _mm512_cvtss_f32(v); }
#endif
"""


class Arm64Renderer(CStyleRenderer):
    """C with NEON intrinsics under ``__aarch64__``."""

    name = "arm64"
    vector_guard = "defined(__aarch64__)"
    vec_width = 4

    VEC_UNARY = {"neg": "vnegq_f32({0})", "abs": "vabsq_f32({0})", "exp": "_pto_vexpq_f32({0})",
                 "log": "_pto_vlogq_f32({0})", "sqrt": "vsqrtq_f32({0})",
                 "recip": "vdivq_f32(vdupq_n_f32(1.0f), {0})", "tanh": "_pto_vtanhq_f32({0})"}
    VEC_BINARY = {"add": "vaddq_f32({0}, {1})", "sub": "vsubq_f32({0}, {1})",
                  "mul": "vmulq_f32({0}, {1})", "div": "vdivq_f32({0}, {1})",
                  "max": "_pto_vmaxq_f32({0}, {1})", "min": "_pto_vminq_f32({0}, {1})"}
    VEC_HREDUCE = {"sum": "vaddvq_f32({0})", "max": "vmaxvq_f32({0})", "min": "vminvq_f32({0})"}
    VEC_ACCUMULATE = {"max": "vmaxq_f32({0}, {1})", "min": "vminq_f32({0}, {1})"}

    def prelude(self) -> str:
        return super().prelude() + NEON_HELPERS + AVX512_HELPERS

    def tile_decl(self, name: str, t: TileType) -> str:
        # unused: the NEON and AVX-512 loops keep a tile only they use in registers, so a
        # build of one of them may never name it (the portable loop does)
        return (f"{self.ctype(t.dtype)} {name}[{t.rows}][{t.cols}] "
                f"__attribute__((aligned({self.tile_align}), unused));")

    def vec_type(self) -> str:
        return "float32x4_t"

    def vec_dup(self, text: str) -> str:
        return f"vdupq_n_f32({text})"

    def vec_load(self, dtype: ElementType, ptr: str) -> str | None:
        if dtype is ElementType.F32:
            return f"vld1q_f32({ptr})"
        if dtype is ElementType.F16:
            return f"vcvt_f32_f16(vld1_f16((const float16_t*)({ptr})))"
        return None

    def vec_store(self, dtype: ElementType, ptr: str, value: str) -> str | None:
        if dtype is ElementType.F32:
            return f"vst1q_f32({ptr}, {value})"
        if dtype is ElementType.F16:
            return f"vst1_f16((float16_t*)({ptr}), vcvt_f16_f32({value}))"
        return None

    def vector_group(self, fn: Function, group: list[Instr]) -> list[str] | None:
        """The widening NEON loop, plus a native ``float16x8_t`` twin under
        :data:`FP16_GUARD` when every op of the group can be computed in f16 exactly."""
        base = super().vector_group(fn, group)
        if base is None:
            return None
        if native_f16_group(fn, group):
            native = _NativeF16Renderer().vector_group(fn, group)
            if native is not None:
                base = [f"#if {FP16_GUARD}", *native, "#else", *base, "#endif"]
        # a block each: two unfused groups in one scope both hoist a scalar as _pto_s0
        return (["    {", *base, "    }"]
                + self._x86_twin(_Avx512Renderer().vector_group, fn, group, block=True))

    def vector_row_reduce(self, fn: Function, s: Instr) -> list[str] | None:
        """The NEON row reduction, plus its AVX-512 twin on x86 hosts."""
        base = super().vector_row_reduce(fn, s)
        if base is None:
            return None
        return base + self._x86_twin(_Avx512Renderer().vector_row_reduce, fn, s)

    def _x86_twin(self, render, fn: Function, what, block: bool = False) -> list[str]:
        """``#elif`` :data:`AVX512_GUARD` and the AVX-512 variant ``render(fn, what)`` makes
        (inside the NEON section's ``#if``, before the portable ``#else``; in a ``{}`` block
        if ``block``), or nothing."""
        x86 = _Avx512Renderer()
        x86.row_open = self.row_open          # inside a row pipeline: no row loop of its own
        lines = render.__func__(x86, fn, what)
        if lines is None:
            return []
        return [f"#elif {AVX512_GUARD}", *(["    {", *lines, "    }"] if block else lines)]

    # ---------------------------------------------------------------- row pipelines
    #: the body being rendered, as units in the order they run: ("group", element-wise
    #: instructions of one loop nest) or ("stmt", any other statement); None: not collecting
    _units: list[tuple[str, object]] | None = None

    def render_body(self, out: _Out, fn: Function, body: Sequence,
                    options: CompileOptions) -> None:
        """The shared renderer's body, except that consecutive loop nests and row reductions
        that each touch only row ``r`` of tiles with the same rows run in one loop over the
        rows (when ``fuse_loops`` is on): a row pipeline.

        Each unit finishes row ``r`` before the next one starts it, and no unit touches
        another row (of a tile, or of a memref: a load or store of an R-row tile at row
        offset ``o`` reaches memref row ``o * R + r``), so the results are those of the units
        one after the other, bit for bit. But a row of a 64 x 128 f32 tile (512 bytes) stays in L1 from the
        load through the last store, where five passes over the whole 32 KiB tile went through
        L2 (softmax: load, row max, subtract and exp, row sum, divide and store).
        """
        outer, self._units = self._units, []
        try:
            super().render_body(out, fn, body, options)     # collects the units
            units = self._units
        finally:
            self._units = outer
        pipeline = options.enabled("fuse_loops")
        i = 0
        while i < len(units):
            rows = row_local_rows(fn, units[i]) if pipeline else None
            j = i + 1
            while rows is not None and j < len(units) and row_local_rows(fn, units[j]) == rows:
                j += 1
            if j - i >= 2:
                self._render_pipeline(out, fn, rows, units[i:j], options)
            else:
                self._render_unit(out, fn, units[i], options)
            i = j

    def _render_unit(self, out: _Out, fn: Function, unit: tuple[str, object],
                     options: CompileOptions) -> None:
        kind, x = unit
        if kind == "group":
            super().render_group(out, fn, x)
        else:
            super().render_stmt(out, fn, x, options)

    def _render_pipeline(self, out: _Out, fn: Function, rows: int,
                         run: list[tuple[str, object]], options: CompileOptions) -> None:
        out.comment(f"row pipeline: {len(run)} loop nests and reductions, one row at a time")
        with out.block(f"for (int _pto_r = 0; _pto_r < {rows}; _pto_r++)"):
            self.row_open = rows
            try:
                for unit in run:
                    with out.block(""):       # each unit's names in a scope of their own
                        self._render_unit(out, fn, unit, options)
            finally:
                self.row_open = None

    def render_group(self, out: _Out, fn: Function, group: list[Instr]) -> None:
        if self._units is None:
            super().render_group(out, fn, group)
        else:
            self._units.append(("group", group))

    def render_stmt(self, out: _Out, fn: Function, s, options: CompileOptions) -> None:
        if self._units is None:
            super().render_stmt(out, fn, s, options)
        else:
            self._units.append(("stmt", s))


def row_local_rows(fn: Function, unit: tuple[str, object]) -> int | None:
    """The rows of a unit (see :meth:`Arm64Renderer.render_body`) whose row ``r`` writes only
    row ``r`` of tiles with that many rows (and of its memrefs' windows), and reads only that
    row or a one-row tile, else None: element-wise loop nests and row reductions.

    A column broadcast reads its one-row ``b`` at every row, which is safe: no unit of a
    pipeline of more than one row writes a one-row tile.
    """
    kind, x = unit
    if kind == "group":
        rows = nest_shape(fn, x[0])[0]
        for s in x:
            col_b = s.operand("b") if s.opdef.category is Category.COL_EXPAND else None
            for v in s.operands:
                t = fn.type_of(v) if isinstance(v, str) else None
                if isinstance(t, TileType) and t.rows != (1 if v == col_b else rows):
                    return None
        return rows
    if isinstance(x, Instr) and x.opdef.category is Category.ROW_REDUCE:
        dst, a = (fn.type_of(v) for v in x.operands)
        return a.rows if dst.rows == a.rows else None
    return None


#: expression kinds that are one correctly rounded IEEE operation (or exact) in f16
NATIVE_F16_KINDS = frozenset(k.name for k in KINDS.values() if k.exact)


def _f16_exact(v: float) -> bool:
    import numpy as np
    # compare as Python floats: numpy would compare a Python float in float16
    return float(np.float16(v)) == v or v != v


def native_f16_expr(e: Expr) -> bool:
    """Is ``e`` at most one IEEE operation on variables and f16-exact constants?

    >>> from pto_core.ir.ops import OPS
    >>> native_f16_expr(OPS["TADD"].expr), native_f16_expr(OPS["TRSQRT"].expr)
    (True, False)
    """
    if e.kind == "var":
        return True
    if e.kind == "const":
        return _f16_exact(float(e.value))
    if e.kind not in NATIVE_F16_KINDS:
        return False
    return all(a.kind == "var" or (a.kind == "const" and _f16_exact(float(a.value)))
               for a in e.args)


def native_f16_group(fn: Function, group: list[Instr]) -> bool:
    """May a fused loop compute in f16 without changing a bit? Every tile and memref it
    touches is f16, every op is one IEEE operation, and scalars are f16-exact literals."""
    for s in group:
        cat = s.opdef.category
        for v in s.operands:
            t = fn.type_of(v) if isinstance(v, str) else None
            if isinstance(t, (TileType, MemRefType)) and t.dtype is not ElementType.F16:
                return False
        if cat in (Category.LOAD, Category.STORE):
            continue
        if s.opdef.expr is None or not native_f16_expr(s.opdef.expr):
            return False
        if cat is Category.TILE_SCALAR:
            v = s.operand("s")
            if isinstance(v, str) or not _f16_exact(float(v)):
                return False      # a runtime scalar would be rounded to f16 before the op
    return True


class _NativeF16Renderer(Arm64Renderer):
    """The vector templates of :class:`Arm64Renderer` on eight f16 lanes, for
    :meth:`Arm64Renderer.vector_group` only (reductions keep accumulating in f32)."""

    vec_width = 8
    VEC_UNARY = {"neg": "vnegq_f16({0})", "abs": "vabsq_f16({0})", "sqrt": "vsqrtq_f16({0})",
                 "recip": "vdivq_f16(vdupq_n_f16(1.0f), {0})"}
    VEC_BINARY = {"add": "vaddq_f16({0}, {1})", "sub": "vsubq_f16({0}, {1})",
                  "mul": "vmulq_f16({0}, {1})", "div": "vdivq_f16({0}, {1})",
                  "max": "_pto_vmaxq_f16({0}, {1})", "min": "_pto_vminq_f16({0}, {1})"}

    def vector_group(self, fn: Function, group: list[Instr]) -> list[str] | None:
        return CStyleRenderer.vector_group(self, fn, group)

    def vec_type(self) -> str:
        return "float16x8_t"

    def vec_holds_stored(self, dtype: ElementType) -> bool:
        return dtype is ElementType.F16

    def vec_dup(self, text: str) -> str:
        return f"vdupq_n_f16({text})"

    def vec_load(self, dtype: ElementType, ptr: str) -> str | None:
        return f"vld1q_f16((const float16_t*)({ptr}))" if dtype is ElementType.F16 else None

    def vec_store(self, dtype: ElementType, ptr: str, value: str) -> str | None:
        return f"vst1q_f16((float16_t*)({ptr}), {value})" if dtype is ElementType.F16 else None


class _Avx512Renderer(Arm64Renderer):
    """The vector templates on 16 f32 lanes of AVX-512, for the x86 twins of
    :meth:`Arm64Renderer.vector_group` and :meth:`Arm64Renderer.vector_row_reduce` only: f32
    tiles; ops without a template (log, tanh, ...) keep the portable loop."""

    vec_width = 16
    VEC_UNARY = {"neg": "_pto_x16_neg({0})", "abs": "_mm512_abs_ps({0})",
                 "exp": "_pto_x16_exp({0})", "sqrt": "_mm512_sqrt_ps({0})",
                 "recip": "_mm512_div_ps(_mm512_set1_ps(1.0f), {0})"}
    VEC_BINARY = {"add": "_mm512_add_ps({0}, {1})", "sub": "_mm512_sub_ps({0}, {1})",
                  "mul": "_mm512_mul_ps({0}, {1})", "div": "_mm512_div_ps({0}, {1})",
                  "max": "_pto_x16_max({0}, {1})", "min": "_pto_x16_min({0}, {1})"}
    VEC_HREDUCE = {"sum": "_pto_x16_hsum({0})", "max": "_pto_x16_hmax({0})",
                   "min": "_pto_x16_hmin({0})"}
    VEC_ACCUMULATE = {"max": "_pto_x16_maxacc({0}, {1})", "min": "_pto_x16_minacc({0}, {1})"}

    def vector_group(self, fn: Function, group: list[Instr]) -> list[str] | None:
        return CStyleRenderer.vector_group(self, fn, group)

    def vector_row_reduce(self, fn: Function, s: Instr) -> list[str] | None:
        return CStyleRenderer.vector_row_reduce(self, fn, s)

    def vec_type(self) -> str:
        return "__m512"

    def vec_dup(self, text: str) -> str:
        return f"_mm512_set1_ps({text})"

    def vec_load(self, dtype: ElementType, ptr: str) -> str | None:
        return f"_mm512_loadu_ps({ptr})" if dtype is ElementType.F32 else None

    def vec_store(self, dtype: ElementType, ptr: str, value: str) -> str | None:
        return f"_mm512_storeu_ps({ptr}, {value})" if dtype is ElementType.F32 else None
