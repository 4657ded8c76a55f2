"""The shared C-family kernel renderer.

One class turns an InCore function into C-like source; a backend subclasses it and overrides
the few templates that differ (types, qualifiers, intrinsics, vector code, the function
signature), the way tinygrad's ``renderer/cstyle.py`` serves C, CUDA, OpenCL and Metal.

Everything is driven by the instruction table: element-wise ops print their ``Expr`` tree through
:meth:`CStyleRenderer.expr` (scalar) or :meth:`CStyleRenderer.vexpr` (vector templates), and
reductions use the row's ``reduce`` kind.

Kernel ABI (see ``runtime/include/pto_runtime.h``)::

    int32_t <symbol>(const int64_t* args)

each memref parameter takes two slots (pointer to the window's first element, row stride in
elements), each scalar one slot (int64; floats are the bits of a double). The body lives in a
``static`` function taking typed parameters, so InCore calls that were not inlined become plain C
calls. Distinct memref parameters are assumed not to overlap (like ``restrict``) unless they name
the same window.

Loop fusion: element-wise instructions run in the loop nests the ``fuse_loops`` pass numbered
(:mod:`pto_core.passes.fuse_loops`), in the order of their numbers; each op still
stores its own destination tile element before the next op reads it. A function that did not go
through the pass is fused here when ``options.enabled("fuse_loops")``, else every instruction
is a nest of its own.

>>> from pto_core import PTOModule, PTOFunctionBuilder, ElementType as T, MemorySpace as M
>>> m = PTOModule("m")
>>> f = (PTOFunctionBuilder("k", module=m).in_core().memref("a", M.GLOBAL, T.F32)
...      .memref("o", M.GLOBAL, T.F32).tile("x", 4, 8, T.F32).load("x", "a").exp("x", "x")
...      .store("o", "x").build())
>>> src = CStyleRenderer().render_kernel(f, m)
>>> "int32_t pto_kernel_k(const int64_t* args)" in src, src.count("for (int _pto_r")
(True, 1)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..errors import PTOBackendError
from ..ir import (WHILE_LIMIT_STATUS, Break, Call, Category, Continue, ElementType, For, Function,
                  If, Instr, MemRefType, Module, Return, ScalarType, TileType, While)
from ..ir.ops import (BLOCK_BYTES, COMPARES, INTERLEAVES, ITEM_LAYOUTS, PART_ARGS, PRINT_FORMATS,
                      RANDOM_BLOCK, RANDOM_WORDS, Expr, index_capacity, indexed_tables, random_stride,
                      window_tiles)
from ..options import CompileOptions
from ..passes.fuse_loops import fuse_function, is_element_op, is_fused, nest_shape
from .cnames import c_comment, c_function, c_names, kernel_symbol, user_names, user_text

E = ElementType

#: categories that run one element at a time over the destination's shape (fusable)


@dataclass
class _Out:
    """Lines with indentation."""

    lines: list[str] = field(default_factory=list)
    depth: int = 0

    def __call__(self, text: str = "") -> None:
        # preprocessor lines stay in column 0 so they read as such
        self.lines.append(text if text.startswith("#") or not text else "    " * self.depth + text)

    def comment(self, text: str) -> None:
        """A ``/* text */`` line in the user's names (:func:`user_text`); ``text`` cannot end
        the comment early (:func:`c_comment`)."""
        self(f"/* {c_comment(user_text(text))} */")

    def block(self, head: str) -> "_Block":
        return _Block(self, head)


class _Block:
    def __init__(self, out: _Out, head: str) -> None:
        self.out, self.head = out, head

    def __enter__(self) -> None:
        self.out(self.head + " {")
        self.out.depth += 1

    def __exit__(self, *exc) -> None:
        self.out.depth -= 1
        self.out("}")


# --------------------------------------------------------------------------------------------
# Portable helper functions every C-family kernel may use (element-wise exp/log/tanh written
# as polynomials so loops over them auto-vectorise; libm calls per element would not).
# --------------------------------------------------------------------------------------------

#: the C helper that reads a double from a kernel-ABI slot (needs <string.h>); what
#: :meth:`CStyleRenderer.abi_arguments` calls for float scalars
ARG_F64_HELPER = ("static inline double _pto_arg_f64(int64_t a) "
                  "{ double d; memcpy(&d, &a, 8); return d; }")

#: TRANDOM's generator (cpu/TRandom.hpp), one function for every C-family backend: ``{q}``
#: is its qualifiers (``static inline``; CUDA's ``__device__ __forceinline__``: nvcc warns of an
#: unused static function)
RANDOM_HELPER = r"""
/* word `word` of `rounds` Philox-4x32 rounds of the 128-bit counter c0..c3 (the lowest word
 * first) plus `step`, under the key k0, k1 */
{q} uint32_t _pto_random(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1,
                         uint32_t c2, uint32_t c3, uint64_t step, int rounds, int word) {
    uint64_t t = (uint64_t)c0 + (step & 0xFFFFFFFFu);
    uint32_t w0 = (uint32_t)t;
    t = (uint64_t)c1 + (step >> 32) + (t >> 32);
    uint32_t w1 = (uint32_t)t;
    t = (uint64_t)c2 + (t >> 32);
    uint32_t w2 = (uint32_t)t, w3 = c3 + (uint32_t)(t >> 32);
    for (int i = 0; i < rounds; i++) {
        uint64_t p0 = (uint64_t)w0 * 0xD2511F53u, p1 = (uint64_t)w2 * 0xCD9E8D57u;
        w0 = (uint32_t)(p1 >> 32) ^ w1 ^ k0;
        w2 = (uint32_t)(p0 >> 32) ^ w3 ^ k1;
        w1 = (uint32_t)p1;
        w3 = (uint32_t)p0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return word == 0 ? w0 : word == 1 ? w1 : word == 2 ? w2 : w3;
}
"""

PORTABLE_HELPERS = r"""
static inline float _pto_bits_f32(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t _pto_f32_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
""" + ARG_F64_HELPER + r"""

/* Fused multiply-add where the hardware has it (so polynomial loops still vectorise), two
 * roundings elsewhere. Kernels are compiled with -ffp-contract=off (every op of a program rounds
 * on its own, as in the reference), so the helpers ask for their FMAs explicitly. */
#if defined(__FMA__) || defined(__aarch64__)
#define _PTO_FMA(a, b, c) fmaf((a), (b), (c))
#else
#define _PTO_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* exp: n = round(x / ln 2), r = x - n ln 2 (two-part constant), degree-6 polynomial
 * (Cephes expf coefficients), scaled by 2^n as two factors so n in [-150, 128] never leaves
 * the normal exponent range (denormal results and overflow to inf come out right). The same
 * steps and roundings as the NEON twin _pto_vexpq_f32 where _PTO_FMA is fused. */
static inline float _pto_expf(float x) {
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    float t = x * 1.44269504088896341f + 12582912.0f;   /* 1.5 * 2^23: round to nearest */
    float n = t - 12582912.0f;
    int32_t ni = _pto_f32_bits(t) - 0x4B400000;
    float r = _PTO_FMA(-n, 0.693359375f, x);
    r = _PTO_FMA(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = _PTO_FMA(p, r, 1.3981999507e-3f);
    p = _PTO_FMA(p, r, 8.3334519073e-3f);
    p = _PTO_FMA(p, r, 4.1665795894e-2f);
    p = _PTO_FMA(p, r, 1.6666665459e-1f);
    p = _PTO_FMA(p, r, 5.0000001201e-1f);
    p = _PTO_FMA(p, r * r, r + 1.0f);
    int32_t h = ni >> 1, l = ni - h;
    return p * _pto_bits_f32((h + 127) << 23) * _pto_bits_f32((l + 127) << 23);
}

/* log: x = m * 2^e with m in [sqrt(1/2), sqrt(2)), degree-8 polynomial in m - 1 (Cephes logf
 * coefficients). A subnormal x is scaled by 2^23 first (its exponent field would say 2^-126
 * whatever its value): a select, so the loop still vectorises. Zero gives -inf, negatives
 * NaN, inf stays inf. */
static inline float _pto_logf(float x) {
    int32_t sub = x < 1.17549435e-38f;                  /* FLT_MIN; zero and negatives too */
    int32_t ix = _pto_f32_bits(sub ? x * 8388608.0f : x);
    int32_t e = ((ix >> 23) & 0xff) - 126 - (sub ? 23 : 0);
    float m = _pto_bits_f32((ix & 0x007fffff) | 0x3f000000);
    int32_t small = m < 0.707106781186547524f;
    e -= small;
    m = small ? m + m - 1.0f : m - 1.0f;
    float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    float fe = (float)e;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    float r = m + y + 0.693359375f * fe;
    r = x == 0.0f ? -INFINITY : r;
    r = x < 0.0f ? NAN : r;
    r = x == INFINITY ? INFINITY : r;
    return x != x ? x : r;
}

/* tanh(x) = sign(x) (1 - t) / (1 + t) with t = exp(-2|x|). */
static inline float _pto_tanhf(float x) {
    float t = _pto_expf(-2.0f * (x < 0.0f ? -x : x));
    float r = (1.0f - t) / (1.0f + t);
    return x < 0.0f ? -r : r;
}

/* integer division and remainder of tile elements as C truncates them, without the traps of
 * the hardware instruction: a zero divisor records status 1 (the kernel returns it, which
 * fails the task, as the reference raises) and gives 0; MIN / -1 wraps as numpy does */
static inline int64_t _pto_idiv(int64_t a, int64_t b, int32_t* status) {
    if (b == 0) { *status = 1; return 0; }
    return b == -1 ? (int64_t)(0 - (uint64_t)a) : a / b;
}
static inline int64_t _pto_imod(int64_t a, int64_t b, int32_t* status) {
    if (b == 0) { *status = 1; return 0; }
    return b == -1 ? 0 : a % b;
}
/* the floored remainder (TREM: the divisor's sign): the truncated one, plus the divisor once
 * where a nonzero result's sign differs from the divisor's (as the reference computes it) */
static inline int64_t _pto_irem(int64_t a, int64_t b, int32_t* status) {
    int64_t r = _pto_imod(a, b, status);
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}
/* the integer power (TPOW): exact, wrapping (square and multiply, unsigned); a negative
 * exponent gives the integer part of 1 / a^-b: 1, -1 or 0 */
static inline int64_t _pto_ipow(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    uint64_t r = 1, x = (uint64_t)a;
    for (; b > 0; b >>= 1) { if (b & 1) r *= x; x *= x; }
    return (int64_t)r;
}
static inline float _pto_remf(float a, float b) {
    float r = fmodf(a, b);
    return (r != 0.0f && (r < 0.0f) != (b < 0.0f)) ? r + b : r;
}
static inline double _pto_rem(double a, double b) {
    double r = fmod(a, b);
    return (r != 0.0 && (r < 0.0) != (b < 0.0)) ? r + b : r;
}

/* max/min as the reference defines them: a NaN operand gives NaN (C's fmax/fmin would drop
 * it), and of two equal operands (+0 and -0) the second is returned */
static inline float _pto_maxf(float a, float b) { return (a > b || a != a) ? a : b; }
static inline float _pto_minf(float a, float b) { return (a < b || a != a) ? a : b; }
static inline double _pto_max(double a, double b) { return (a > b || a != a) ? a : b; }
static inline double _pto_min(double a, double b) { return (a < b || a != a) ? a : b; }

/* bf16 <-> f32 (round to nearest even; NaN stays NaN) */
static inline float _pto_bf16_to_f32(uint16_t v) { return _pto_bits_f32((int32_t)((uint32_t)v << 16)); }
static inline uint16_t _pto_f32_to_bf16(float f) {
    uint32_t u = (uint32_t)_pto_f32_bits(f);
    if (f != f) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
""" + RANDOM_HELPER.replace("{q}", "static inline")


def c_literal(value: float | int, ctype: str) -> str:
    """A numeric literal in ``ctype`` (INFINITY and NAN need <math.h>)."""
    if ctype in ("float", "double"):
        v = float(value)
        if math.isinf(v):
            return ("-" if v < 0 else "") + "INFINITY"
        if math.isnan(v):
            return "NAN"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return text + ("f" if ctype == "float" else "")
    if not float(value).is_integer():
        raise PTOBackendError(f"non-integer literal {value!r} in integer code")
    v = int(value)                  # exact for ints (float(2**63 - 1) is 2**63)
    if v == -2 ** 63:               # 9223372036854775808 is no int64 literal
        return "(-INT64_C(9223372036854775807) - 1)"
    return f"INT64_C({v})" if ctype == "int64_t" else str(v)


class CStyleRenderer:
    """Renders InCore functions as C. Subclass and override the class attributes and template
    methods marked *template*; everything else is shared.

    Vector code: set :attr:`vec_width` (lanes per vector, 0 = none) and fill the ``vec_*``
    templates; element loops and row reductions then get a vector variant inside
    ``#if <vector_guard>`` with the portable loop in ``#else``.
    """

    #: backend name used in comments
    name: str = "c"
    #: kernel source suffix
    suffix: str = ".c"
    #: preprocessor condition under which the vector variant is compiled ("" = always)
    vector_guard: str = ""
    #: vector lanes (f32) per register; 0 disables vector variants
    vec_width: int = 0
    #: tile alignment in bytes
    tile_align: int = 16
    #: bytes of tiles one kernel may declare as arrays on its worker thread's stack (a
    #: kernel and the callees it was not inlined with); larger programs are rejected by
    #: :meth:`render_kernel`, naming the function and its largest tiles, instead of crashing
    #: on a stack overflow. 1 MiB sits well inside the 8 MiB default thread stack. A
    #: backend that does not keep tiles on the stack sets None.
    stack_tile_bytes: int | None = 1 << 20

    # ---------------------------------------------------------------- templates: types
    #: *template* storage type of one element, per element type
    CTYPES: dict[ElementType, str] = {
        E.F32: "float", E.F64: "double", E.F16: "_Float16", E.BF16: "uint16_t", E.I64: "int64_t",
        E.I32: "int32_t", E.I16: "int16_t", E.I8: "int8_t", E.U8: "uint8_t"}
    #: *template* a stored element converted to the compute type ("{0}": the element); element
    #: types not listed are computed in their storage type
    TO_COMPUTE: dict[ElementType, str] = {E.BF16: "_pto_bf16_to_f32({0})", E.F16: "(float){0}"}
    #: *template* a computed value rounded to the storage type ("{0}": the value)
    FROM_COMPUTE: dict[ElementType, str] = {E.BF16: "_pto_f32_to_bf16({0})",
                                            E.F16: "(_Float16)({0})"}

    def ctype(self, dtype: ElementType) -> str:
        """Storage type of one element (from :attr:`CTYPES`)."""
        return self.CTYPES[dtype]

    def compute_type(self, dtype: ElementType) -> str:
        """*template* Type element-wise math is done in (f16/bf16 compute in f32)."""
        if dtype in (E.F16, E.BF16, E.F32):
            return "float"
        return self.ctype(dtype)

    def to_compute(self, dtype: ElementType, text: str) -> str:
        """Convert a stored element to the compute type (from :attr:`TO_COMPUTE`)."""
        template = self.TO_COMPUTE.get(dtype)
        return template.format(text) if template else text

    def from_compute(self, dtype: ElementType, text: str) -> str:
        """Round a computed value to the storage type (from :attr:`FROM_COMPUTE`)."""
        template = self.FROM_COMPUTE.get(dtype)
        return template.format(text) if template else text

    def scalar_ctype(self, dtype: ElementType) -> str:
        """*template* C type of a scalar variable (ints are 64-bit: one argument slot)."""
        return "double" if dtype.is_float else "int64_t"

    # ---------------------------------------------------------------- templates: text
    def prelude(self) -> str:
        """*template* File header: includes and helper functions."""
        return ("#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n#include <math.h>\n"
                + PORTABLE_HELPERS)

    def signature(self, symbol: str) -> str:
        """*template* The exported kernel function's declaration (kernel ABI)."""
        return f"int32_t {symbol}(const int64_t* args)"

    def body_qualifiers(self) -> str:
        """*template* Qualifiers of the static body function."""
        return "static inline"

    def restrict(self) -> str:
        """*template* Pointer qualifier for memref parameters."""
        return "restrict"

    def tile_decl(self, name: str, t: TileType) -> str:
        """*template* Declaration of an on-chip tile."""
        return (f"{self.ctype(t.dtype)} {name}[{t.rows}][{t.cols}] "
                f"__attribute__((aligned({self.tile_align})));")

    # expression templates for the compute type "float"; "{0}", "{1}" are the operands
    UNARY_F32 = {"neg": "(-{0})", "abs": "fabsf({0})", "exp": "_pto_expf({0})",
                 "log": "_pto_logf({0})", "sqrt": "sqrtf({0})", "recip": "(1.0f / {0})",
                 "tanh": "_pto_tanhf({0})"}
    BINARY_F32 = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
                  "div": "({0} / {1})", "max": "_pto_maxf({0}, {1})",
                  "min": "_pto_minf({0}, {1})", "fmod": "fmodf({0}, {1})",
                  "rem": "_pto_remf({0}, {1})",
                  "pow": "(float)pow((double)({0}), (double)({1}))"}
    UNARY_F64 = {"neg": "(-{0})", "abs": "fabs({0})", "exp": "exp({0})", "log": "log({0})",
                 "sqrt": "sqrt({0})", "recip": "(1.0 / {0})", "tanh": "tanh({0})"}
    BINARY_F64 = {**BINARY_F32, "max": "_pto_max({0}, {1})", "min": "_pto_min({0}, {1})",
                  "fmod": "fmod({0}, {1})", "rem": "_pto_rem({0}, {1})",
                  "pow": "pow({0}, {1})"}
    UNARY_INT = {"neg": "(-{0})", "abs": "({0} < 0 ? -{0} : {0})", "not": "(~{0})"}
    BINARY_INT = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
                  "div": "_pto_idiv({0}, {1}, &_pto_status)", "max": "({0} > {1} ? {0} : {1})",
                  "min": "({0} < {1} ? {0} : {1})", "mod": "_pto_imod({0}, {1}, &_pto_status)",
                  "fmod": "_pto_imod({0}, {1}, &_pto_status)",
                  "rem": "_pto_irem({0}, {1}, &_pto_status)", "pow": "_pto_ipow({0}, {1})",
                  "and": "({0} & {1})",
                  "or": "({0} | {1})", "xor": "({0} ^ {1})",
                  # tile shifts (TSHL/TSHR): an amount outside [0, width of the element {0})
                  # gives 0 / the sign fill, and a left shift runs unsigned: no undefined
                  # behaviour for any operand
                  "shl": "((({1}) < 0 || ({1}) >= 8 * (int)sizeof({0})) ? (int64_t)0 : "
                         "(int64_t)((uint64_t)(int64_t)({0}) << ({1})))",
                  "shr": "((({1}) < 0 || ({1}) >= 8 * (int)sizeof({0})) ? "
                         "(int64_t)(({0}) < 0 ? -1 : 0) : (int64_t)({0}) >> ({1}))"}

    #: three-operand kinds, every compute type
    TERNARY = {"select": "(({0}) > 0 ? ({1}) : ({2}))"}

    # vector templates (only used when vec_width > 0)
    VEC_UNARY: dict[str, str] = {}
    VEC_BINARY: dict[str, str] = {}
    #: horizontal reductions of a vector: "sum" | "max" | "min" -> template
    VEC_HREDUCE: dict[str, str] = {}
    #: lane-wise accumulation of a vector row reduction, where it may differ from the
    #: element-wise template of :attr:`VEC_BINARY` (the sign of a zero max/min reduction is
    #: unspecified, so it needs no tie rule)
    VEC_ACCUMULATE: dict[str, str] = {}

    def vec_type(self) -> str:
        """*template* The f32 vector type."""
        raise NotImplementedError

    def vec_dup(self, text: str) -> str:
        """*template* Broadcast a float to every lane."""
        raise NotImplementedError

    def vec_load(self, dtype: ElementType, ptr: str) -> str | None:
        """*template* Load ``vec_width`` elements at ``ptr`` as an f32 vector (None: unsupported
        dtype, so the portable loop is used)."""
        return None

    def vec_store(self, dtype: ElementType, ptr: str, value: str) -> str | None:
        """*template* Store an f32 vector to ``vec_width`` elements at ``ptr``."""
        return None

    def vec_holds_stored(self, dtype: ElementType) -> bool:
        """*template* Does a computed vector equal what storing it to a ``dtype`` tile keeps?
        Then later ops of the loop reuse the register instead of re-reading the (rounded)
        element. True for f32; a vector type of the storage type (native f16) says so too."""
        return dtype is E.F32

    # ---------------------------------------------------------------- expressions
    def literal(self, value: float | int, ctype: str) -> str:
        """A numeric literal in ``ctype``."""
        return c_literal(value, ctype)

    def expr(self, e: Expr, env: dict[str, str], ctype: str) -> str:
        """Print an element-wise ``Expr`` tree with ``env`` giving each variable's C text."""
        if e.kind == "var":
            return env[str(e.value)]
        if e.kind == "const":
            return self.literal(e.value, ctype)
        args = [self.expr(a, env, ctype) for a in e.args]
        if len(args) == 3:
            return self.TERNARY[e.kind].format(*args)
        if ctype == "float":
            table = self.UNARY_F32 if len(args) == 1 else self.BINARY_F32
        elif ctype == "double":
            table = self.UNARY_F64 if len(args) == 1 else self.BINARY_F64
        else:
            table = self.UNARY_INT if len(args) == 1 else self.BINARY_INT
        if table is self.BINARY_INT and e.kind in ("max", "min") and args[0] == args[1]:
            # max(a, a) is a; "a < a" is a self-comparison that -Werror refuses
            return args[0]
        if e.kind not in table:
            if ctype == "double" and e.kind in self.BINARY_INT and e.kind == "mod":
                return f"fmod({args[0]}, {args[1]})"
            raise PTOBackendError(f"'{e.kind}' is not supported for {ctype} in the {self.name} "
                                  f"backend")
        return table[e.kind].format(*args)

    def vexpr(self, e: Expr, env: dict[str, str]) -> str:
        """Print an ``Expr`` with the vector templates (compute type f32)."""
        if e.kind == "var":
            return env[str(e.value)]
        if e.kind == "const":
            return self.vec_dup(self.literal(e.value, "float"))
        args = [self.vexpr(a, env) for a in e.args]
        table = self.VEC_UNARY if len(args) == 1 else self.VEC_BINARY
        return table[e.kind].format(*args)

    def vexpr_supported(self, e: Expr) -> bool:
        if e.kind in ("var", "const"):
            return True
        table = self.VEC_UNARY if len(e.args) == 1 else self.VEC_BINARY
        return e.kind in table and all(self.vexpr_supported(a) for a in e.args)

    # ---------------------------------------------------------------- whole kernels
    def render_kernel(self, fn: Function, module: Module | None = None,
                      options: CompileOptions | None = None, symbol: str | None = None) -> str:
        """The complete source file of one InCore function's kernel."""
        options = options or CompileOptions()
        symbol = symbol or kernel_symbol(fn.name)
        self.check_stack(fn, module)
        with user_names():
            return self._render_kernel(*self.c_named(fn, module), options, symbol)

    def _render_kernel(self, fn: Function, module: Module | None, options: CompileOptions,
                       symbol: str) -> str:
        out = _Out()
        out.comment(f"Generated by PTO ({self.name} backend) from InCore function '{fn.name}'. "
                    "Do not edit.")
        for line in self.prelude().rstrip("\n").split("\n"):
            out(line)
        out()
        def fused(f: Function) -> Function:
            return fuse_function(f) if options.enabled("fuse_loops") and not is_fused(f) else f

        # callees that were not inlined become static functions, each rendered once
        for callee in self._callees(fn, module):
            self._render_body_function(out, fused(callee), options)
            out()
        self._render_body_function(out, fused(fn), options)
        out()
        self._render_entry(out, fn, symbol)
        return "\n".join(out.lines) + "\n"

    def check_stack(self, fn: Function, module: Module | None) -> None:
        """Reject a kernel whose stack tiles exceed :attr:`stack_tile_bytes`."""
        if self.stack_tile_bytes is None:
            return
        fns = [fn] + self._callees(fn, module)
        tiles = sorted(((n, t) for f in fns for n, t in f.tiles.items()),
                       key=lambda nt: -nt[1].nbytes)
        need = sum(t.nbytes for _, t in tiles)
        if need > self.stack_tile_bytes:
            big = ", ".join(f"{n} {t.rows}x{t.cols}x{t.dtype.value} ({t.nbytes} B)"
                            for n, t in tiles[:3])
            raise PTOBackendError(
                f"tiles need {need} bytes, more than the {self.stack_tile_bytes} a {self.name} "
                f"kernel may keep on its worker's stack; largest: {big} (use smaller tiles)",
                function=fn.name)

    @staticmethod
    def c_named(fn: Function, module: Module | None) -> tuple[Function, Module | None]:
        """``fn`` and ``module`` with their values under C names (:mod:`.cnames`): what every
        rendering entry point works on, so no user name reaches the generated text as it is."""
        return c_function(fn), (c_names(module) if module is not None else None)

    def _callees(self, fn: Function, module: Module | None) -> list[Function]:
        order: list[Function] = []

        def visit(f: Function) -> None:
            for s in f.walk():
                if isinstance(s, Call):
                    if module is None or s.callee not in module.functions:
                        raise PTOBackendError(f"call of '{s.callee}' cannot be resolved without "
                                              f"its module", function=f.name)
                    callee = module.functions[s.callee]
                    if callee not in order:
                        visit(callee)
                        order.append(callee)

        visit(fn)
        return order

    def _param_decls(self, fn: Function) -> list[str]:
        decls = []
        for p in fn.params:
            if isinstance(p.type, MemRefType):
                decls.append(f"{self.ctype(p.type.dtype)}* {self.restrict()} {p.name}".replace("  ", " "))
                decls.append(f"int64_t _pto_ld_{p.name}")
            else:
                decls.append(f"{self.scalar_ctype(p.type.dtype)} {p.name}")
        return decls

    def _render_body_function(self, out: _Out, fn: Function, options: CompileOptions) -> None:
        params = ", ".join(self._param_decls(fn)) or "void"
        with out.block(f"{self.body_qualifiers()} int32_t _pto_body_{fn.name}({params})"):
            for loc in fn.locals:
                if isinstance(loc.type, TileType):
                    out(self.tile_decl(loc.name, loc.type))
                else:
                    ct = self.scalar_ctype(loc.type.dtype)
                    out(f"{ct} {loc.name} = {self.literal(0, ct)};")
            for p in fn.params:                      # silence unused-parameter warnings
                if isinstance(p.type, MemRefType):
                    out(f"(void)_pto_ld_{p.name};")
            out("int32_t _pto_status = 0;   /* non-zero: an integer element op failed */")
            self.render_body(out, fn, fn.body, options)
            out("return _pto_status;")

    def abi_arguments(self, fn: Function, pointer: str = "{0}*") -> list[str]:
        """C expressions that unpack the kernel ABI's slots ``args[k]`` into ``fn``'s
        parameters, in order: a memref's pointer (``pointer`` of its element type) and row
        stride, a scalar's int64 or the double its slot carries (:data:`ARG_F64_HELPER`).

        >>> from pto_core import PTOFunctionBuilder, ElementType as T
        >>> f = (PTOFunctionBuilder("k").in_core().memref("a", dtype=T.F16)
        ...      .scalar("s", T.F32).tile("x", 1, 8, T.F16).load("x", "a").build())
        >>> CStyleRenderer().abi_arguments(f)
        ['(_Float16*)(intptr_t)args[0]', 'args[1]', '_pto_arg_f64(args[2])']
        """
        args, k = [], 0
        for p in fn.params:
            if isinstance(p.type, MemRefType):
                args += [f"({pointer.format(self.ctype(p.type.dtype))})(intptr_t)args[{k}]",
                         f"args[{k + 1}]"]
                k += 2
            else:
                args.append(f"_pto_arg_f64(args[{k}])" if p.type.dtype.is_float else f"args[{k}]")
                k += 1
        return args

    def _render_entry(self, out: _Out, fn: Function, symbol: str) -> None:
        with out.block(self.signature(symbol)):
            args = self.abi_arguments(fn)
            if not fn.params:
                out("(void)args;")
            out(f"return _pto_body_{fn.name}({', '.join(args)});")

    # ---------------------------------------------------------------- statements
    def render_body(self, out: _Out, fn: Function, body: Sequence, options: CompileOptions) -> None:
        """Render statements; element-wise instructions as the loop nests ``Instr.nest``
        numbers (one nest each when unnumbered): a nest runs once its last instruction is
        reached and every lower-numbered nest of the body has run."""
        left = Counter(s.nest for s in body if is_element_op(s) and s.nest is not None)
        order = sorted(left)
        nests: dict[int, list[Instr]] = {}

        def run_complete(everything: bool = False) -> None:
            # everything: a statement that is no element op ends every nest begun before it
            while order and order[0] in nests and (everything or left[order[0]] == 0):
                self.render_group(out, fn, nests.pop(order.pop(0)))

        for s in body:
            if not is_element_op(s):
                run_complete(everything=True)
                self.render_stmt(out, fn, s, options)
            elif s.nest is None:
                self.render_group(out, fn, [s])
            else:
                nests.setdefault(s.nest, []).append(s)
                left[s.nest] -= 1
                run_complete()
        run_complete(everything=True)

    def end_body(self, out: _Out) -> None:
        """What closes the body of a FOR, IF, ELSE or WHILE: nothing here (the CUDA emitter
        syncs the block when the body wrote shared tiles)."""

    def render_stmt(self, out: _Out, fn: Function, s, options: CompileOptions) -> None:
        if isinstance(s, For):
            head = (f"for (int64_t {s.var} = {self.index(s.start)}; {s.var} < {self.index(s.end)}; "
                    f"{s.var} += {self.index(s.step)})")
            with out.block(head):
                self.render_body(out, fn, s.body, options)
                self.end_body(out)
        elif isinstance(s, If):
            with out.block(f"if ({s.cond} != 0)"):
                self.render_body(out, fn, s.then_body, options)
                self.end_body(out)
            if s.else_body:
                with out.block("else"):
                    self.render_body(out, fn, s.else_body, options)
                    self.end_body(out)
        elif isinstance(s, While):
            head, guard = self.while_head(out, fn, s)
            out.comment(str(s))
            with out.block(head):
                out(guard)
                self.render_body(out, fn, s.body, options)
                self.end_body(out)
        elif isinstance(s, (Break, Continue)):
            out(f"{'break' if isinstance(s, Break) else 'continue'};")
        elif isinstance(s, Return):
            out("return _pto_status;")
        elif isinstance(s, Call):
            out(f"if (_pto_body_{s.callee}({', '.join(self._call_args(fn, s))}) != 0) return -1;")
        else:
            cat = s.opdef.category
            if cat is Category.SCALAR:
                self.render_scalar(out, fn, s)
            elif cat in (Category.ROW_REDUCE, Category.COL_REDUCE):
                self.render_reduce(out, fn, s)
            elif cat is Category.MATMUL:
                self.render_matmul(out, fn, s)
            elif cat is Category.TRANSPOSE:
                self.render_transpose(out, fn, s)
            elif cat is Category.CONVERT:
                self.render_convert(out, fn, s)
            elif cat in (Category.LAYOUT, Category.MASK):
                self.render_layout(out, fn, s)
            elif cat is Category.INDEXED:
                self.render_indexed(out, fn, s)
            elif cat is Category.HINT:
                self.render_prefetch(out, fn, s)
            elif cat is Category.DEBUG:
                self.render_print(out, fn, s)
            else:  # pragma: no cover - every category is handled above
                raise PTOBackendError(f"no template for {s.op}", function=fn.name,
                                      instruction=str(s))

    def while_head(self, out: _Out, fn: Function, s: While) -> tuple[str, str]:
        """A WHILE as a C ``for`` whose counter guards the iterations: the head, and the first
        statement of the body, which fails the kernel with
        :data:`~pto_core.ir.WHILE_LIMIT_STATUS` on the iteration past ``s.limit`` instead of
        running on (a ``continue`` goes through the increment, so it counts too). The counter
        is named by the nesting depth, so nested WHILEs do not shadow each other."""
        n = f"_pto_w{out.depth}"
        err = self.scalar_error(fn, s, f"the WHILE did not end within {s.limit} iterations",
                                WHILE_LIMIT_STATUS, n)
        return (f"for (int64_t {n} = 1; {s.cond} != 0; {n}++)",
                f"if ({n} > INT64_C({s.limit})) {err}")

    def _call_args(self, fn: Function, call: Call) -> list[str]:
        # InCore-to-InCore calls carry no offsets: a memref is passed on whole
        out = []
        for a in call.args:
            if isinstance(a.value, str) and isinstance(fn.type_of(a.value), MemRefType):
                out += [a.value, f"_pto_ld_{a.value}"]
            else:
                out.append(self.scalar_value(fn, a.value))
        return out

    def index(self, v) -> str:
        """An index operand (int literal, loop variable or integer scalar)."""
        return str(v) if isinstance(v, str) else str(int(v))

    def scalar_value(self, fn: Function, v) -> str:
        if isinstance(v, str):
            return v
        if isinstance(v, float):
            return self.literal(v, "double")
        return self.literal(v, "int64_t")

    # ---------------------------------------------------------------- scalar ops
    #: integer scalar arithmetic as the reference does it: exact, then wrapped to the
    #: destination's width. Computed in 64 bits (unsigned where C would overflow, which is
    #: undefined), so no operand value is undefined behaviour; a zero divisor and a negative
    #: shift are checked before (:meth:`scalar_error`).
    SCALAR_INT = {
        "add": "(int64_t)((uint64_t)({0}) + (uint64_t)({1}))",
        "sub": "(int64_t)((uint64_t)({0}) - (uint64_t)({1}))",
        "mul": "(int64_t)((uint64_t)({0}) * (uint64_t)({1}))",
        "neg": "(int64_t)(0 - (uint64_t)({0}))",
        "abs": "(({0}) < 0 ? (int64_t)(0 - (uint64_t)({0})) : (int64_t)({0}))",
        "div": "(({1}) == -1 ? (int64_t)(0 - (uint64_t)({0})) : (int64_t)({0}) / ({1}))",
        "mod": "(({1}) == -1 ? INT64_C(0) : (int64_t)({0}) % ({1}))",
        "shl": "(({1}) >= 64 ? INT64_C(0) : (int64_t)((uint64_t)({0}) << ({1})))",
        "shr": "(({1}) >= 64 ? (({0}) < 0 ? INT64_C(-1) : INT64_C(0)) : (int64_t)({0}) >> ({1}))",
        "max": "(({0}) > ({1}) ? ({0}) : ({1}))", "min": "(({0}) < ({1}) ? ({0}) : ({1}))",
        "and": "(({0}) & ({1}))", "or": "(({0}) | ({1}))",
    }
    #: run-time errors of integer scalar ops: (kind, C condition on the divisor/shift ``{1}``,
    #: message, kernel status)
    SCALAR_INT_CHECKS = {
        "div": ("({1}) == 0", "integer division by zero", 1),
        "mod": ("({1}) == 0", "integer division by zero", 1),
        "shl": ("({1}) < 0", "shift by a negative amount", 2),
        "shr": ("({1}) < 0", "shift by a negative amount", 2),
    }

    def scalar_error(self, fn: Function, s: Instr, message: str, status: int,
                     value: str) -> str:
        """*template* The C statement run when scalar op ``s`` cannot be computed
        (``message``; ``value`` is the C text of the offending operand). In a kernel: return
        ``status`` (1: integer division by zero, 2: negative shift), which fails the task."""
        return f"return {status};"

    def render_scalar(self, out: _Out, fn: Function, s: Instr) -> None:
        dst = s.operands[0]
        t = fn.type_of(dst)
        ct = self.scalar_ctype(t.dtype)
        env = {n: self.scalar_value(fn, v) for n, v in zip(("a", "b"), s.operands[1:])}
        if s.opdef.is_compare:
            out(f"{dst} = ({env['a']} {COMPARES[s.attr('cmp')].symbol} {env['b']}) ? 1 : 0;")
            return
        e = s.opdef.expr
        if t.dtype.is_int and e.kind in self.SCALAR_INT and all(
                a.kind in ("var", "const") for a in e.args):
            args = [self.expr(a, env, "int64_t") for a in e.args]
            if e.kind in self.SCALAR_INT_CHECKS:
                cond, message, status = self.SCALAR_INT_CHECKS[e.kind]
                out(f"if ({cond.format(*args)}) "
                    f"{self.scalar_error(fn, s, message, status, args[1])}")
            out(f"{dst} = ({ct})({self.SCALAR_INT[e.kind].format(*args)});")
            return
        out(f"{dst} = ({ct})({self.expr(e, env, ct)});")

    # ---------------------------------------------------------------- element loops
    def group_shape(self, fn: Function, s: Instr) -> tuple[int, int]:
        return nest_shape(fn, s)

    def _group_plan(self, fn: Function, group: list[Instr]) -> dict:
        """Per-row pointers for loads/stores: {id(instr): (var, memref, row_expr, col_expr)}."""
        rows, cols = self.group_shape(fn, group[0])
        ptrs = {}
        for k, s in enumerate(group):
            cat = s.opdef.category
            if cat in (Category.LOAD, Category.STORE):
                mem = s.operands[1] if cat is Category.LOAD else s.operands[0]
                ptrs[id(s)] = (f"_pto_p{k}", mem,
                               f"({self.index(s.operands[2])}) * {rows} + _pto_r",
                               f"({self.index(s.operands[3])}) * {cols}")
        return ptrs

    def _row_pointers(self, out: _Out, fn: Function, group: list[Instr], ptrs: dict) -> None:
        for s in group:
            if id(s) in ptrs:
                var, mem, r, c = ptrs[id(s)]
                const = "const " if s.opdef.category is Category.LOAD else ""
                ct = self.ctype(fn.type_of(mem).dtype)
                out(f"{const}{ct}* {var} = {mem} + (int64_t)({r}) * _pto_ld_{mem} + {c};")

    def element_ref(self, fn: Function, s: Instr, operand: str, r: str, c: str) -> str:
        """C text of the element an operand contributes at (r, c) of the destination."""
        v = s.operand(operand)
        cat = s.opdef.category
        if operand == "s":
            return v if isinstance(v, str) else None
        if operand == "b" and cat is Category.ROW_EXPAND:
            return f"{v}[{r}][0]"
        if operand == "b" and cat is Category.COL_EXPAND:
            return f"{v}[0][{c}]"
        return f"{v}[{r}][{c}]"

    def element_stmt(self, fn: Function, s: Instr, ptrs: dict, r: str, c: str) -> str:
        """One op of a fused loop body, for element (r, c), in portable C."""
        cat = s.opdef.category
        if cat is Category.LOAD:
            return f"{s.operands[0]}[{r}][{c}] = {ptrs[id(s)][0]}[{c}];"
        if cat is Category.STORE:
            return f"{ptrs[id(s)][0]}[{c}] = {s.operands[1]}[{r}][{c}];"
        dst = s.operands[0]
        dt = fn.type_of(dst).dtype
        ct = self.compute_type(dt)
        env = {}
        for spec in s.opdef.reads:
            if spec.role == "scalar":
                v = s.operand(spec.name)
                env[spec.name] = (f"({ct})({v})" if isinstance(v, str)
                                  else self.literal(v, ct))
            else:
                ref = self.element_ref(fn, s, spec.name, r, c)
                env[spec.name] = self.to_compute(dt, ref)
        if cat in (Category.ROW_EXPAND, Category.COL_EXPAND) and "a" not in env:
            env["a"] = env["b"]
        return f"{dst}[{r}][{c}] = {self.from_compute(dt, self.expr(s.opdef.expr, env, ct))};"

    def render_group(self, out: _Out, fn: Function, group: list[Instr]) -> None:
        """One loop nest for a run of element-wise instructions (one instruction unfused)."""
        out.comment("; ".join(str(s) for s in group))
        vec = self.vector_group(fn, group)
        if vec is not None:
            if self.vector_guard:
                out(f"#if {self.vector_guard}")
                out.lines += vec
                out("#else")
            else:
                out.lines += vec
                return
        self._portable_group(out, fn, group)
        if vec is not None:
            out("#endif")

    def _portable_group(self, out: _Out, fn: Function, group: list[Instr]) -> None:
        rows, cols = self.group_shape(fn, group[0])
        ptrs = self._group_plan(fn, group)
        with self.row_loop(out, rows):
            self._row_pointers(out, fn, group, ptrs)
            with out.block(f"for (int _pto_c = 0; _pto_c < {cols}; _pto_c++)"):
                for s in group:
                    out(self.element_stmt(fn, s, ptrs, "_pto_r", "_pto_c"))

    def _vector_ok(self, fn: Function, group: list[Instr]) -> bool:
        if not self.vec_width:
            return False
        rows, cols = self.group_shape(fn, group[0])
        if cols < self.vec_width:
            return False
        for s in group:
            dt = fn.type_of(s.operands[0] if s.opdef.category is not Category.STORE
                            else s.operands[1]).dtype
            if self.vec_load(dt, "p") is None:
                return False
            if s.opdef.expr is not None and not self.vexpr_supported(s.opdef.expr):
                return False
        return True

    def vector_group(self, fn: Function, group: list[Instr]) -> list[str] | None:
        """Vector variant of a fused loop nest built from the ``vec_*`` templates, or None."""
        if not self._vector_ok(fn, group):
            return None
        w = self.vec_width
        rows, cols = self.group_shape(fn, group[0])
        ptrs = self._group_plan(fn, group)
        vt = self.vec_type()
        out = _Out()
        out.depth = 1
        # scalars are loop-invariant: broadcast once, in a block of the group's own (another
        # group of the kernel names its broadcasts _pto_s<k> too)
        hoisted: dict[tuple[int, str], str] = {}
        scoped = any(s.opdef.category is Category.TILE_SCALAR for s in group)
        if scoped:
            out("{")
            out.depth += 1
        for k, s in enumerate(group):
            if s.opdef.category is Category.TILE_SCALAR:
                v = s.operand("s")
                text = f"(float)({v})" if isinstance(v, str) else self.literal(v, "float")
                hoisted[(id(s), "s")] = f"_pto_s{k}"
                out(f"const {vt} _pto_s{k} = {self.vec_dup(text)};")
        private = self._group_private_tiles(fn, group) if cols % w == 0 else set()
        with self.row_loop(out, rows):
            self._row_pointers(out, fn, group, ptrs)
            for k, s in enumerate(group):
                if s.opdef.category is Category.ROW_EXPAND:
                    b = s.operand("b")
                    dt = fn.type_of(b).dtype
                    out(f"const {vt} _pto_b{k} = "
                        f"{self.vec_dup(self.to_compute(dt, f'{b}[_pto_r][0]'))};")
                    hoisted[(id(s), "b")] = f"_pto_b{k}"
            out("int _pto_c = 0;")
            with out.block(f"for (; _pto_c + {w} <= {cols}; _pto_c += {w})"):
                live: dict[str, str] = {}      # tile -> vector holding its current elements
                for k, s in enumerate(group):
                    self._vector_stmt(out, fn, s, k, ptrs, hoisted, live, private)
            if cols % w:
                with out.block(f"for (; _pto_c < {cols}; _pto_c++)"):
                    for s in group:
                        out(self.element_stmt(fn, s, ptrs, "_pto_r", "_pto_c"))
        if scoped:
            out.depth -= 1
            out("}")
        return out.lines

    def _group_private_tiles(self, fn: Function, group: list[Instr]) -> set[str]:
        """Tiles of ``group`` that need no copy in memory: no other instruction of ``fn``
        names them, the group writes each before it reads it, reads each only at the element
        it computes (not as the broadcast operand of a row or column expansion), and keeps the
        stored value in its register (:meth:`vec_holds_stored`). The vector loop then leaves
        out their stores: writing a tile nobody reads cost a 32 KiB store stream per 64 x 128
        f32 tile, which evicted the data the kernel streams through L1 (a compiler does not
        remove such stores once they are vector intrinsics)."""
        inside = {id(s) for s in group}
        named = {v for s in fn.walk() if isinstance(s, Instr) and id(s) not in inside
                 for v in s.operands if isinstance(v, str)}
        written: set[str] = set()
        unsafe: set[str] = set()
        for s in group:
            cat = s.opdef.category
            if cat is Category.STORE:
                reads = [s.operands[1]]
            else:
                reads = [s.operand(spec.name) for spec in s.opdef.reads]
                if cat in (Category.ROW_EXPAND, Category.COL_EXPAND):
                    unsafe.add(s.operand("b"))
            unsafe.update(t for t in reads if isinstance(t, str) and t not in written)
            if cat is not Category.STORE:
                written.add(s.operands[0])
        return {t for t in written - unsafe - named
                if t in fn.tiles and self.vec_holds_stored(fn.type_of(t).dtype)}

    def _vector_stmt(self, out: _Out, fn: Function, s: Instr, k: int, ptrs: dict,
                     hoisted: dict, live: dict[str, str], private: set[str]) -> None:
        vt = self.vec_type()
        cat = s.opdef.category

        def operand(name: str) -> str:
            if (id(s), name) in hoisted:
                return hoisted[(id(s), name)]
            tile = s.operand(name)
            if cat is Category.COL_EXPAND and name == "b":
                return self.vec_load(fn.type_of(tile).dtype, f"&{tile}[0][_pto_c]")
            if tile in live:
                return live[tile]
            return self.vec_load(fn.type_of(tile).dtype, f"&{tile}[_pto_r][_pto_c]")

        if cat is Category.LOAD:
            x = s.operands[0]
            dt = fn.type_of(x).dtype
            out(f"{vt} _pto_v{k} = {self.vec_load(dt, f'{ptrs[id(s)][0]} + _pto_c')};")
            if x not in private:
                out(self.vec_store(dt, f"&{x}[_pto_r][_pto_c]", f"_pto_v{k}") + ";")
            live[x] = f"_pto_v{k}"
            return
        if cat is Category.STORE:
            src = s.operands[1]
            dt = fn.type_of(src).dtype
            val = live.get(src) or self.vec_load(dt, f"&{src}[_pto_r][_pto_c]")
            out(self.vec_store(dt, f"{ptrs[id(s)][0]} + _pto_c", val) + ";")
            return
        env = {spec.name: operand(spec.name) for spec in s.opdef.reads}
        if cat in (Category.ROW_EXPAND, Category.COL_EXPAND) and "a" not in env:
            env["a"] = env["b"]
        dst = s.operands[0]
        dt = fn.type_of(dst).dtype
        out(f"{vt} _pto_v{k} = {self.vexpr(s.opdef.expr, env)};")
        if dst not in private:
            out(self.vec_store(dt, f"&{dst}[_pto_r][_pto_c]", f"_pto_v{k}") + ";")
        if self.vec_holds_stored(dt):
            live[dst] = f"_pto_v{k}"
        else:
            live.pop(dst, None)          # re-read the rounded value

    # ---------------------------------------------------------------- reductions
    #: a sum starts from -0, the additive identity: it is -0 only when every term is -0
    REDUCE_INIT = {"sum": "-0.0f", "max": "-INFINITY", "min": "INFINITY", "prod": "1.0f"}

    def reduce_step(self, kind: str, acc: str, x: str, ctype: str) -> str:
        if kind == "sum":
            return f"{acc} + {x}"
        if kind == "prod":      # an integer product runs in uint64_t: it wraps, defined
            return f"{acc} * {x}" if ctype != "uint64_t" else f"{acc} * (uint64_t)({x})"
        table = self.BINARY_F32 if ctype == "float" else self.BINARY_F64 if ctype == "double" \
            else self.BINARY_INT
        return table[kind].format(acc, x)

    def _reduce_init(self, kind: str, ctype: str) -> str:
        if ctype == "float":
            return self.REDUCE_INIT[kind]
        if ctype == "double":
            return {"sum": "-0.0", "max": "-INFINITY", "min": "INFINITY", "prod": "1.0"}[kind]
        if kind == "prod":
            return "1"
        lim = {"int64_t": "INT64", "int32_t": "INT32", "int16_t": "INT16", "int8_t": "INT8",
               "uint8_t": "UINT8"}[ctype]
        return {"sum": "0", "max": f"{lim}_MIN" if lim != "UINT8" else "0",
                "min": f"{lim}_MAX"}[kind]

    def render_reduce(self, out: _Out, fn: Function, s: Instr) -> None:
        """Row/column reductions accumulate in f32 (f64 for f64, int64 for ints) and round
        once."""
        if s.opdef.is_arg:
            self.render_argreduce(out, fn, s)
            return
        dst, a = s.operands
        ta = fn.type_of(a)
        kind = s.opdef.reduce
        ct = self.compute_type(ta.dtype)
        acc_t = ("int64_t" if kind == "sum" else "uint64_t" if kind == "prod" else ct) \
            if ta.dtype.is_int else ct
        out.comment(str(s))
        if s.opdef.category is Category.ROW_REDUCE:
            vec = self.vector_row_reduce(fn, s)
            if vec is not None:
                out(f"#if {self.vector_guard}" if self.vector_guard else "#if 1")
                out.lines += vec
                out("#else")
            if acc_t == "float" and ta.cols >= 2 * self.REDUCE_LANES:
                self._lane_row_reduce(out, dst, a, ta, kind)
            else:
                with self.row_loop(out, ta.rows):
                    out(f"{acc_t} _pto_acc = {self._reduce_init(kind, acc_t)};")
                    with out.block(f"for (int _pto_c = 0; _pto_c < {ta.cols}; _pto_c++)"):
                        x = self.to_compute(ta.dtype, f"{a}[_pto_r][_pto_c]")
                        out(f"_pto_acc = {self.reduce_step(kind, '_pto_acc', x, acc_t)};")
                    out(f"{dst}[_pto_r][0] = {self.from_compute(ta.dtype, '_pto_acc')};")
            if vec is not None:
                out("#endif")
        else:
            with out.block(""):
                out(f"{acc_t} _pto_acc[{ta.cols}];")
                with out.block(f"for (int _pto_c = 0; _pto_c < {ta.cols}; _pto_c++)"):
                    out(f"_pto_acc[_pto_c] = {self.to_compute(ta.dtype, f'{a}[0][_pto_c]')};")
                with out.block(f"for (int _pto_r = 1; _pto_r < {ta.rows}; _pto_r++)"):
                    with out.block(f"for (int _pto_c = 0; _pto_c < {ta.cols}; _pto_c++)"):
                        x = self.to_compute(ta.dtype, f"{a}[_pto_r][_pto_c]")
                        out(f"_pto_acc[_pto_c] = "
                            f"{self.reduce_step(kind, '_pto_acc[_pto_c]', x, acc_t)};")
                with out.block(f"for (int _pto_c = 0; _pto_c < {ta.cols}; _pto_c++)"):
                    out(f"{dst}[0][_pto_c] = {self.from_compute(ta.dtype, '_pto_acc[_pto_c]')};")

    def render_argreduce(self, out: _Out, fn: Function, s: Instr) -> None:
        """The first index of the max (min) of each row (column): a strict comparison keeps
        the first of equal values; a NaN wins over any number, the first NaN over later
        ones."""
        dst, a = s.operands
        ta = fn.type_of(a)
        row = s.opdef.category is Category.ROW_REDUCE
        ct = self.compute_type(ta.dtype)
        rel = ">" if s.opdef.reduce == "argmax" else "<"
        outer, inner = (ta.rows, ta.cols) if row else (ta.cols, ta.rows)

        def elem(j: str) -> str:
            return self.to_compute(ta.dtype, f"{a}[_pto_i][{j}]" if row else f"{a}[{j}][_pto_i]")

        better = f"_pto_x {rel} _pto_best"
        if ta.dtype.is_float:
            better = f"{better} || (_pto_x != _pto_x && _pto_best == _pto_best)"
        out.comment(str(s))
        with out.block(f"for (int _pto_i = 0; _pto_i < {outer}; _pto_i++)"):
            out(f"{ct} _pto_best = {elem('0')};")
            out("int32_t _pto_at = 0;")
            with out.block(f"for (int _pto_j = 1; _pto_j < {inner}; _pto_j++)"):
                out(f"const {ct} _pto_x = {elem('_pto_j')};")
                with out.block(f"if ({better})"):
                    out("_pto_best = _pto_x;")
                    out("_pto_at = _pto_j;")
            out(f"{dst}[_pto_i][0] = _pto_at;" if row else f"{dst}[0][_pto_i] = _pto_at;")

    #: independent partial accumulators of a portable f32 row reduction
    REDUCE_LANES = 16

    def _lane_row_reduce(self, out: _Out, dst: str, a: str, ta: TileType, kind: str) -> None:
        """Portable f32 row reduction with :attr:`REDUCE_LANES` partial accumulators.

        A single running sum is one long dependency chain that compilers may not reorder
        (that would change the rounding), and a NaN-propagating max compiles to a
        data-dependent branch per element. Here lane ``l`` accumulates columns ``l, l + L,
        l + 2L, ...`` with a plain add or a plain select (``a > x ? a : x``, which is exactly
        x86's ``maxps``); NaNs are tracked in separate flags and override the result at the
        end. The lane loop has no dependency between iterations, so it vectorises without
        -ffast-math (SSE, AVX and AVX-512 alike); ``unroll 1`` keeps GCC from unrolling it
        into scalar code before the loop vectoriser sees it. Lanes are combined pairwise, the
        tail added in order: the order is fixed by the source, not by the compiler.
        """
        L = self.REDUCE_LANES
        main = ta.cols - ta.cols % L
        nan = kind in ("max", "min")
        rel = ">" if kind == "max" else "<"

        def step(acc: str, x: str) -> str:
            return f"{acc} {rel} {x} ? {acc} : {x}" if nan else self.reduce_step(kind, acc, x,
                                                                                "float")

        def elem(c: str) -> str:
            return self.to_compute(ta.dtype, f"{a}[_pto_r][{c}]")

        with self.row_loop(out, ta.rows):
            out(f"float _pto_lane[{L}];")
            if nan:
                out(f"int32_t _pto_nan[{L}];")
            with out.block(f"for (int _pto_l = 0; _pto_l < {L}; _pto_l++)"):
                out(f"const float _pto_x = {elem('_pto_l')};")
                out("_pto_lane[_pto_l] = _pto_x;")
                if nan:
                    out("_pto_nan[_pto_l] = _pto_x != _pto_x;")
            with out.block(f"for (int _pto_c = {L}; _pto_c < {main}; _pto_c += {L})"):
                out("#pragma GCC unroll 1")
                with out.block(f"for (int _pto_l = 0; _pto_l < {L}; _pto_l++)"):
                    out(f"const float _pto_x = {elem('_pto_c + _pto_l')};")
                    out(f"_pto_lane[_pto_l] = {step('_pto_lane[_pto_l]', '_pto_x')};")
                    if nan:
                        out("_pto_nan[_pto_l] |= _pto_x != _pto_x;")
            w = L // 2
            while w:
                with out.block(f"for (int _pto_l = 0; _pto_l < {w}; _pto_l++)"):
                    out(f"_pto_lane[_pto_l] = "
                        f"{step('_pto_lane[_pto_l]', f'_pto_lane[_pto_l + {w}]')};")
                    if nan:
                        out(f"_pto_nan[_pto_l] |= _pto_nan[_pto_l + {w}];")
                w //= 2
            out("float _pto_acc = _pto_lane[0];")
            if main < ta.cols:
                with out.block(f"for (int _pto_c = {main}; _pto_c < {ta.cols}; _pto_c++)"):
                    out(f"const float _pto_x = {elem('_pto_c')};")
                    out(f"_pto_acc = {step('_pto_acc', '_pto_x')};")
                    if nan:
                        out("_pto_nan[0] |= _pto_x != _pto_x;")
            if nan:
                out("if (_pto_nan[0]) _pto_acc = NAN;")
            out(f"{dst}[_pto_r][0] = {self.from_compute(ta.dtype, '_pto_acc')};")

    def vector_row_reduce(self, fn: Function, s: Instr) -> list[str] | None:
        """Vector variant of a row reduction: lane-wise accumulation, then a horizontal
        reduction template."""
        dst, a = s.operands
        ta = fn.type_of(a)
        kind = s.opdef.reduce
        w = self.vec_width
        if (not w or ta.cols < w or kind not in self.VEC_HREDUCE
                or self.vec_load(ta.dtype, "p") is None):
            return None
        vt = self.vec_type()
        op = self.VEC_ACCUMULATE.get(kind) or {"sum": self.VEC_BINARY["add"],
                                               "max": self.VEC_BINARY["max"],
                                               "min": self.VEC_BINARY["min"]}[kind]
        out = _Out()
        out.depth = 1
        with self.row_loop(out, ta.rows):
            out(f"{vt} _pto_vacc = {self.vec_dup(self.REDUCE_INIT[kind])};")
            out("int _pto_c = 0;")
            with out.block(f"for (; _pto_c + {w} <= {ta.cols}; _pto_c += {w})"):
                x = self.vec_load(ta.dtype, f"&{a}[_pto_r][_pto_c]")
                out(f"_pto_vacc = {op.format('_pto_vacc', x)};")
            out(f"float _pto_acc = {self.VEC_HREDUCE[kind].format('_pto_vacc')};")
            if ta.cols % w:
                with out.block(f"for (; _pto_c < {ta.cols}; _pto_c++)"):
                    x = self.to_compute(ta.dtype, f"{a}[_pto_r][_pto_c]")
                    out(f"_pto_acc = {self.reduce_step(kind, '_pto_acc', x, 'float')};")
            out(f"{dst}[_pto_r][0] = {self.from_compute(ta.dtype, '_pto_acc')};")
        return out.lines

    # ---------------------------------------------------------------- row pipelines
    #: rows of the row loop a backend opened around several instructions (a row pipeline);
    #: None: each element loop and row reduction has a row loop of its own
    row_open: int | None = None

    def row_loop(self, out: _Out, rows: int) -> _Block:
        """The loop over the rows (``_pto_r``) of an element loop or row reduction; inside a
        row pipeline only a block, as the pipeline's loop runs the rows."""
        if self.row_open is None:
            return out.block(f"for (int _pto_r = 0; _pto_r < {rows}; _pto_r++)")
        if rows != self.row_open:  # pragma: no cover - the pipeline checks the rows
            raise PTOBackendError(f"a {rows}-row loop inside a {self.row_open}-row pipeline")
        return out.block("")

    # ---------------------------------------------------------------- matmul etc.
    def render_matmul(self, out: _Out, fn: Function, s: Instr) -> None:
        """dst = [acc +] a @ b (or a @ b + bias), accumulated in f32 (int32/64 for integer inputs), i-k-j order so
        the inner loop is contiguous and vectorises."""
        ops = s.named_operands()
        dst, acc, a, b = ops["dst"], ops.get(s.opdef.addend or ""), ops["a"], ops["b"]
        row = "0" if s.opdef.addend == "bias" else "_pto_r"     # a bias row serves every row
        td, ta, tb = fn.type_of(dst), fn.type_of(a), fn.type_of(b)
        at = "int64_t" if ta.dtype.is_int else ("double" if ta.dtype is E.F64 else "float")
        out.comment(str(s))
        with out.block(""):
            out(f"{at} _pto_mm[{td.rows}][{td.cols}];")
            with out.block(f"for (int _pto_r = 0; _pto_r < {td.rows}; _pto_r++)"):
                with out.block(f"for (int _pto_c = 0; _pto_c < {td.cols}; _pto_c++)"):
                    init = (self.to_compute(td.dtype, f"{acc}[{row}][_pto_c]") if acc
                            else "0")
                    out(f"_pto_mm[_pto_r][_pto_c] = {init};")
                with out.block(f"for (int _pto_k = 0; _pto_k < {ta.cols}; _pto_k++)"):
                    out(f"const {at} _pto_x = {self.to_compute(ta.dtype, f'{a}[_pto_r][_pto_k]')};")
                    with out.block(f"for (int _pto_c = 0; _pto_c < {td.cols}; _pto_c++)"):
                        y = self.to_compute(tb.dtype, f"{b}[_pto_k][_pto_c]")
                        out(f"_pto_mm[_pto_r][_pto_c] += _pto_x * {y};")
            with out.block(f"for (int _pto_r = 0; _pto_r < {td.rows}; _pto_r++)"):
                with out.block(f"for (int _pto_c = 0; _pto_c < {td.cols}; _pto_c++)"):
                    out(f"{dst}[_pto_r][_pto_c] = "
                        f"{self.from_compute(td.dtype, self._cast(td.dtype, '_pto_mm[_pto_r][_pto_c]'))};")

    def _cast(self, dtype: ElementType, text: str) -> str:
        return f"({self.compute_type(dtype)})({text})"

    def render_transpose(self, out: _Out, fn: Function, s: Instr) -> None:
        dst, a = s.operands
        ta = fn.type_of(a)
        out.comment(str(s))
        if dst == a:                    # a square tile in place: swap across the diagonal
            with out.block(f"for (int _pto_r = 0; _pto_r < {ta.rows}; _pto_r++)"):
                with out.block(f"for (int _pto_c = _pto_r + 1; _pto_c < {ta.cols}; _pto_c++)"):
                    out(f"const {self.ctype(ta.dtype)} _pto_t = {a}[_pto_r][_pto_c];")
                    out(f"{a}[_pto_r][_pto_c] = {a}[_pto_c][_pto_r];")
                    out(f"{a}[_pto_c][_pto_r] = _pto_t;")
            return
        # dst row by row, a read down its columns: GCC 12's -O3 AVX-512 code for the other
        # order (dst written down its columns) after a TFILLPAD_EXPAND of a is wrong
        with out.block(f"for (int _pto_r = 0; _pto_r < {ta.cols}; _pto_r++)"):
            with out.block(f"for (int _pto_c = 0; _pto_c < {ta.rows}; _pto_c++)"):
                out(f"{dst}[_pto_r][_pto_c] = {a}[_pto_c][_pto_r];")

    INT_LIMITS = {E.I64: ("INT64_MIN", "INT64_MAX"), E.I32: ("INT32_MIN", "INT32_MAX"),
                  E.I16: ("INT16_MIN", "INT16_MAX"), E.I8: ("INT8_MIN", "INT8_MAX"),
                  E.U8: ("0", "UINT8_MAX")}

    def convert_expr(self, src: ElementType, dst: ElementType, x: str) -> str:
        """Element conversion: floats round to nearest even, integers saturate."""
        if dst.is_float:
            if src.is_float:
                return self.from_compute(dst, self._cast(dst, self.to_compute(src, x)))
            return self.from_compute(dst, f"({self.compute_type(dst)})({x})")
        lo, hi = self.INT_LIMITS[dst]
        if src.is_float:
            v = f"(double){self.to_compute(src, x)}"
            return (f"(({v}) != ({v}) ? 0 : ({v}) <= (double){lo} ? {lo} : ({v}) >= (double){hi} "
                    f"? {hi} : ({self.ctype(dst)})nearbyint({v}))")
        return (f"((int64_t){x} < (int64_t){lo} ? {lo} : (int64_t){x} > (int64_t){hi} ? {hi} : "
                f"({self.ctype(dst)}){x})")

    def render_convert(self, out: _Out, fn: Function, s: Instr) -> None:
        dst, a = s.operands
        td, ta = fn.type_of(dst), fn.type_of(a)
        out.comment(str(s))
        with out.block(f"for (int _pto_r = 0; _pto_r < {ta.rows}; _pto_r++)"):
            with out.block(f"for (int _pto_c = 0; _pto_c < {ta.cols}; _pto_c++)"):
                out(f"{dst}[_pto_r][_pto_c] = "
                    f"{self.convert_expr(ta.dtype, td.dtype, f'{a}[_pto_r][_pto_c]')};")


    # ---------------------------------------------------------------- layout ops
    #: kernel status when a window's offsets, known only at run time, put it outside its source
    WINDOW_STATUS = 3

    def layout_checks(self, fn: Function, s: Instr) -> list[str]:
        """The C statements that fail the task before layout op ``s`` would read outside its
        source or write outside its destination (TEXTRACT and TINSERT offsets held in
        scalars; literal offsets the verifier checked)."""
        if s.opdef.layout in ("scatter", "gatherb"):
            return [self.index_check(fn, s)]
        if s.opdef.layout not in ("window", "insert"):
            return []
        ops = s.named_operands()
        small, large = window_tiles(s.opdef)
        td, ta = fn.type_of(ops[small]), fn.type_of(ops[large])
        what = "destination" if large == "dst" else "source"
        out = []
        for v, room in ((ops["row"], ta.rows - td.rows), (ops["col"], ta.cols - td.cols)):
            if isinstance(v, str):
                err = self.scalar_error(fn, s, f"the window leaves its {what}",
                                        self.WINDOW_STATUS, v)
                out.append(f"if ((int64_t)({v}) < 0 || (int64_t)({v}) > {room}) {err}")
        return out

    def layout_assignments(self, fn: Function, s: Instr, r: str, c: str) -> list[str]:
        """The C statements that write element ``[r][c]`` of every tile layout op ``s``
        writes (dst, then a second output: TPARTARGMAX's indices, TINTERLEAVE's dst1, each of
        dst's shape and no input of the op, so the order of the writes does not matter)."""
        ops = s.named_operands()
        return [f"{ops[n]}[{r}][{c}] = {self.layout_source(fn, s, r, c, n)};"
                for n in s.opdef.tile_outputs]

    def layout_source(self, fn: Function, s: Instr, r: str, c: str, out: str = "dst") -> str:
        """The C expression of the source element of ``dst[r][c]`` of layout op ``s`` (the
        row's map in :data:`~pto_core.ir.ops.LAYOUTS`; tiles are ``[rows][cols]`` arrays), or
        of its second output ``out``. A gather index outside its source reads nothing and
        gives 0."""
        if s.opdef.category is Category.MASK:
            return self.mask_source(fn, s, r, c)
        if s.opdef.layout in PART_ARGS or s.opdef.layout in INTERLEAVES:
            return self.two_output_source(fn, s, r, c, out)
        ops = s.named_operands()
        a, td, ta = ops["a"], fn.type_of(ops["dst"]), fn.type_of(ops["a"])
        lay = s.opdef.layout
        if lay == "window":
            return f"{a}[{self.index(ops['row'])} + {r}][{self.index(ops['col'])} + {c}]"
        if lay == "concat":
            return f"({c} < {ta.cols} ? {a}[{r}][{c}] : {ops['b']}[{r}][{c} - {ta.cols}])"
        if lay == "reshape":
            flat = f"({r} * {td.cols} + {c})"
            return f"{a}[{flat} / {ta.cols}][{flat} % {ta.cols}]"
        if lay == "gather":
            x = f"{ops['idx']}[{r}][{c}]"
            zero = self.from_compute(ta.dtype, self._cast(ta.dtype, "0"))
            return (f"(({x}) >= 0 && ({x}) < {ta.rows * ta.cols} ? "
                    f"{a}[({x}) / {ta.cols}][({x}) % {ta.cols}] : {zero})")
        if lay == "pad":
            return (f"({r} < {ta.rows} && {c} < {ta.cols} ? {a}[{r}][{c}] : "
                    f"{self.pad_value(ta.dtype, s.attr('pad'))})")
        if lay == "gatherb":       # element c % B of the block at byte offset idx[r][c / B]
            per = BLOCK_BYTES // ta.dtype.itemsize
            e = (f"((int64_t)(uint32_t){ops['idx']}[{r}][({c}) / {per}] / "
                 f"{ta.dtype.itemsize} + ({c}) % {per})")
            return f"{a}[{e} / {ta.cols}][{e} % {ta.cols}]"
        if lay == "scatter":       # zeros; the writes follow (layout_writes)
            return self.from_compute(td.dtype, self._cast(td.dtype, "0"))
        if lay == "insert":        # dst keeps its value outside a's window
            i, j = f"({r} - ({self.index(ops['row'])}))", f"({c} - ({self.index(ops['col'])}))"
            return (f"({i} >= 0 && {i} < {ta.rows} && {j} >= 0 && {j} < {ta.cols} ? "
                    f"{a}[{i}][{j}] : {ops['dst']}[{r}][{c}])")
        if lay in ("quant", "quant_asym"):   # rounded after the clamp: the same, no overflow
            x = f"({a}[{r}][{c}] * {ops['scale']}[{r}][0])"
            lo, hi, ct = "-128.0f", "127.0f", "int8_t"
            if lay == "quant_asym":         # (the product rounded before the sum: no FMA)
                x = self.BINARY_F32["add"].format(
                    self.BINARY_F32["mul"].format(f"{a}[{r}][{c}]", f"{ops['scale']}[{r}][0]"),
                    f"{ops['offset']}[{r}][0]")
                lo, hi, ct = "0.0f", "255.0f", "uint8_t"
            return (f"({ct})({x} != {x} ? 0.0f : "
                    f"rintf({x} < {lo} ? {lo} : {x} > {hi} ? {hi} : {x}))")
        if lay == "dequant":
            return (f"(((float){a}[{r}][{c}] - {ops['offset']}[{r}][0]) * "
                    f"{ops['scale']}[{r}][0])")
        if lay in ("partial", "pair"):
            return self.combined_source(fn, s, r, c)
        raise PTOBackendError(f"no C template for the {lay} layout", function=fn.name,
                              instruction=str(s))

    def combined_source(self, fn: Function, s: Instr, r: str, c: str) -> str:
        """``dst[r][c]`` of a layout row with an expression: the expression of the elements
        its map names (TPARTADD: a's and b's where both hold (r, c), else the one that does,
        which the verifier makes the tile of dst's shape; TPairReduceSum: a pair of a's row,
        a missing odd element +0, and 0 past the pairs)."""
        ops = s.named_operands()
        a, ta = ops["a"], fn.type_of(ops["a"])
        dt = ta.dtype
        ct = self.compute_type(dt)

        def combine(x: str, y: str) -> str:
            env = {"a": self.to_compute(dt, x), "b": self.to_compute(dt, y)}
            return self.from_compute(dt, self.expr(s.opdef.expr, env, ct))

        zero = self.from_compute(dt, self._cast(dt, "0"))
        if s.opdef.layout == "pair":
            odd = f"(2 * {c} + 1 < {ta.cols} ? {a}[{r}][2 * {c} + 1] : {zero})"
            return f"({c} < {(ta.cols + 1) // 2} ? {combine(f'{a}[{r}][2 * {c}]', odd)} : {zero})"
        x, y = f"{a}[{r}][{c}]", f"{ops['b']}[{r}][{c}]"
        return self.partial_pick(fn, s, r, c, combine(x, y), x, y)

    def partial_pick(self, fn: Function, s: Instr, r: str, c: str, both: str, x: str,
                     y: str) -> str:
        """``dst[r][c]`` of a partial op: ``both`` where a and b both hold (r, c), else ``x``
        (a's) or ``y`` (b's), whichever's tile has dst's shape (the other is read only inside
        itself)."""
        ops = s.named_operands()
        ta, tb, td = (fn.type_of(ops[n]) for n in ("a", "b", "dst"))

        def inside(t: TileType) -> str:
            conds = [f"{i} < {n}" for i, n, full in ((r, t.rows, td.rows), (c, t.cols, td.cols))
                     if n < full]
            return " && ".join(conds) or "1"

        if ta.shape == td.shape:
            return f"({inside(tb)} ? {both} : {x})"
        return f"({inside(ta)} ? {both} : {y})"

    def two_output_source(self, fn: Function, s: Instr, r: str, c: str, out: str) -> str:
        """Element ``[r][c]`` of output ``out`` of a two-output layout op: TPARTARGMAX's and
        TPARTARGMIN's value (dst) or index (dst_idx), a's pair where the comparison picks it
        (computed in the compute type; NaN and ties take b's); TINTERLEAVE's and
        TDEINTERLEAVE's element of dst or dst1."""
        ops = s.named_operands()
        a, b, ta = ops["a"], ops["b"], fn.type_of(ops["a"])
        if s.opdef.layout in PART_ARGS:
            dt = ta.dtype
            x, y = (f"{a}[{r}][{c}]", f"{b}[{r}][{c}]")
            pick = (f"{self.to_compute(dt, x)} {PART_ARGS[s.opdef.layout].symbol} "
                    f"{self.to_compute(dt, y)}")
            if out != "dst":
                x, y = f"{ops['a_idx']}[{r}][{c}]", f"{ops['b_idx']}[{r}][{c}]"
            return self.partial_pick(fn, s, r, c, f"({pick} ? {x} : {y})", x, y)
        half = ta.cols // 2
        if s.opdef.layout == "interleave":          # dst1: the second half of the stream
            k = f"({c}) / 2" + (f" + {half}" if out != "dst" else "")
            return f"(({c}) % 2 == 0 ? {a}[{r}][{k}] : {b}[{r}][{k}])"
        j = f"(2 * ({c}) + {int(out != 'dst')})"      # the even (dst) or odd (dst1) element
        return f"({j} < {ta.cols} ? {a}[{r}][{j}] : {b}[{r}][{j} - {ta.cols}])"

    def element_of(self, dtype: ElementType, text: str) -> str:
        """A scalar's C value ``text`` as a stored element of ``dtype`` (integers wrap: C's
        conversion to a narrower type; floats round)."""
        if dtype.is_int:
            return f"({self.ctype(dtype)})({text})"
        return self.from_compute(dtype, self._cast(dtype, text))

    def mask_source(self, fn: Function, s: Instr, r: str, c: str) -> str:
        """The C expression of ``dst[r][c]`` of MASK op ``s`` (its rule in
        :data:`~pto_core.ir.ops.LAYOUTS`): a compare packs eight columns into byte ``c`` of
        its mask (columns past the tile read nothing and give 0 bits), a select reads the bit
        of its element, TCI counts from its start (integers wrap: computed unsigned), TTRI
        compares in 64 bits."""
        ops = s.named_operands()
        lay = s.opdef.layout
        dst = fn.type_of(ops["dst"])
        data = fn.type_of(ops["a"]) if "a" in ops else dst
        dt = data.dtype
        scalar = (self.element_of(dt, self.scalar_value(fn, ops["s"])) if "s" in ops else None)
        if lay == "compare":
            sym = COMPARES[s.attr("cmp")].symbol
            terms = []
            for k in range(8):
                j = f"(8 * {c} + {k})"
                y = (self.to_compute(dt, f"{ops['b']}[{r}][{j}]") if "b" in ops
                     else self.to_compute(dt, scalar))
                x = self.to_compute(dt, f"{ops['a']}[{r}][{j}]")
                if dt.is_int and ops.get("b") == ops["a"]:
                    # an integer compared with itself is a constant ("x <= x" is a
                    # self-comparison that -Werror refuses)
                    x = y = "0"
                terms.append(f"({j} < {data.cols} && {x} {sym} {y} ? {1 << k} : 0)")
            return f"(uint8_t)({' | '.join(terms)})"
        if lay == "select":
            other = f"{ops['b']}[{r}][{c}]" if "b" in ops else scalar
            return (f"((({ops['mask']}[{r}][({c}) >> 3] >> (({c}) & 7)) & 1) ? "
                    f"{ops['a']}[{r}][{c}] : {other})")
        if lay == "ci":
            sign = "-" if s.attr("descending") == "true" else "+"
            if dt.is_int:
                return (f"({self.ctype(dt)})((uint64_t)(int64_t){scalar} {sign} "
                        f"(uint64_t)({c}))")
            ct = self.compute_type(dt)
            return self.from_compute(dt, f"({self.to_compute(dt, scalar)} {sign} ({ct})({c}))")
        if lay == "tri":
            diag = f"(int64_t)({self.scalar_value(fn, ops['diag'])})"
            rel = ">=" if s.attr("upper") == "true" else "<="
            return (f"((int64_t)({c}) {rel} (int64_t)({r}) + {diag} ? "
                    f"{self.element_of(dt, '1')} : {self.element_of(dt, '0')})")
        if lay == "random":
            return self.random_source(ops, dst, r, c, int(s.attr("rounds")))
        raise PTOBackendError(f"no C template for the {lay} rule", function=fn.name,
                              instruction=str(s))

    def random_source(self, ops: dict, dst: TileType, r: str, c: str, rounds: int) -> str:
        """TRANDOM's ``dst[r][c]`` (ops.LAYOUTS["random"]): a word of the generator's rounds
        (RANDOM_HELPER) of the counter advanced by the element's step."""
        words = [f"(uint32_t){ops[name]}[0][{i}]" for name, n in RANDOM_WORDS.items()
                 for i in range(n)]
        blocks = -(-dst.cols // RANDOM_BLOCK)
        col = f"(uint64_t)({c})"
        step = (f"((uint64_t)({r}) * {blocks} + {col} / {RANDOM_BLOCK}) * "
                f"{random_stride(dst.cols)} + {col} % 64")
        return (f"(int32_t)_pto_random({', '.join(words)}, {step}, {rounds}, "
                f"(int)({col} % {RANDOM_BLOCK} / 64))")

    def pad_value(self, dtype: ElementType, pad: str) -> str:
        """TFILLPAD's value as a stored element: 0, -inf/+inf, the integer extremes."""
        if dtype.is_int:
            return "0" if pad == "zero" else self.INT_LIMITS[dtype][pad == "max"]
        value = "0.0f" if pad == "zero" else "INFINITY" if pad == "max" else "-INFINITY"
        return self.from_compute(dtype, self._cast(dtype, value))

    # ---------------------------------------------------------------- sorts
    #: C: does f32 value x come before y in the sort order (NaN first, then descending)? are
    #: they equal there (-0 == +0, NaN == NaN)?
    SORT_BEFORE = "({x} != {x} ? {y} == {y} : {x} > {y})"
    SORT_EQUAL = "({x} == {y} || ({x} != {x} && {y} != {y}))"

    def item_count(self, fn: Function, s: Instr) -> int:
        """How many independent work items op ``s`` of :data:`~pto_core.ir.ops.ITEM_LAYOUTS`
        is (each :meth:`render_item`, ``_pto_e`` naming it): TSORT32 one per element (its rank
        in its block), TMRGSORT one per group of 4 blocks, THISTOGRAM one per row."""
        ta = fn.type_of(s.named_operands()["a"])
        if s.opdef.layout == "sort32":
            return ta.rows * ta.cols
        if s.opdef.layout == "histogram":
            return ta.rows
        return ta.cols // (4 * int(s.named_operands()["block"]))

    def render_item(self, out: _Out, fn: Function, s: Instr) -> None:
        """Work item ``_pto_e`` of a sort (see ops.SORT_ORDER) or histogram. TSORT32: element
        (r, c) goes to its rank among the pairs of its 32-column block. TMRGSORT: group e's 4
        blocks are merged, taking the first head no other head comes before. Pairs move as
        bits. THISTOGRAM: row e's 256 bins counted."""
        ops = s.named_operands()
        dst, a, ta = ops["dst"], ops["a"], fn.type_of(ops["a"])
        before = lambda x, y: self.SORT_BEFORE.format(x=x, y=y)  # noqa: E731
        if s.opdef.layout == "histogram":
            byte, wide = int(s.attr("byte")), ta.dtype.itemsize == 4
            out(f"for (int _pto_c = 0; _pto_c < 256; _pto_c++) {dst}[_pto_e][_pto_c] = 0;")
            with out.block(f"for (int _pto_j = 0; _pto_j < {ta.cols}; _pto_j++)"):
                out(f"const uint32_t _pto_u = (uint32_t)({'uint32_t' if wide else 'uint16_t'})"
                    f"{a}[_pto_e][_pto_j];")
                keep = [f"((_pto_u >> {8 * u}) & 0xFFu) == {ops['idx']}"
                        f"[{m if wide else '_pto_e'}][0]"
                        for m, u in enumerate(range(ta.dtype.itemsize - 1, byte, -1))]
                out(f"if ({' && '.join(keep) or '1'}) {dst}[_pto_e][(_pto_u >> {8 * byte}) & 0xFFu]++;")
            return
        if s.opdef.layout == "sort32":
            idx, C = ops["idx"], ta.cols
            out(f"const int _pto_r = _pto_e / {C}, _pto_c = _pto_e % {C}, "
                f"_pto_b = _pto_c - _pto_c % 32;")
            out(f"const int _pto_n = {C} - _pto_b < 32 ? {C} - _pto_b : 32;")
            out(f"const float _pto_v = {a}[_pto_r][_pto_c];")
            out(f"uint32_t _pto_i; memcpy(&_pto_i, &{idx}[_pto_r][_pto_c], 4);")
            out("int _pto_k = 0;")
            with out.block("for (int _pto_j = _pto_b; _pto_j < _pto_b + _pto_n; _pto_j++)"):
                out(f"const float _pto_w = {a}[_pto_r][_pto_j];")
                out(f"uint32_t _pto_x; memcpy(&_pto_x, &{idx}[_pto_r][_pto_j], 4);")
                eq = self.SORT_EQUAL.format(x="_pto_w", y="_pto_v")
                out(f"if ({before('_pto_w', '_pto_v')} || ({eq} && (_pto_x < _pto_i || "
                    f"(_pto_x == _pto_i && _pto_j < _pto_c)))) _pto_k++;")
            out(f"memcpy(&{dst}[_pto_r][2 * (_pto_b + _pto_k)], &{a}[_pto_r][_pto_c], 4);")
            out(f"memcpy(&{dst}[_pto_r][2 * (_pto_b + _pto_k) + 1], &{idx}[_pto_r][_pto_c], 4);")
            return
        n = int(ops["block"]) // 2                         # pairs per block
        out(f"const int _pto_g = _pto_e * {4 * n};")
        out(f"int _pto_h[4] = {{_pto_g, _pto_g + {n}, _pto_g + {2 * n}, _pto_g + {3 * n}}};")
        with out.block(f"for (int _pto_o = _pto_g; _pto_o < _pto_g + {4 * n}; _pto_o++)"):
            out("int _pto_p = -1;")
            with out.block("for (int _pto_q = 0; _pto_q < 4; _pto_q++)"):
                out(f"if (_pto_h[_pto_q] >= _pto_g + (_pto_q + 1) * {n}) continue;")
                out(f"if (_pto_p < 0 || {before(f'{a}[0][2 * _pto_h[_pto_q]]', f'{a}[0][2 * _pto_h[_pto_p]]')}) "
                    f"_pto_p = _pto_q;")
            out(f"memcpy(&{dst}[0][2 * _pto_o], &{a}[0][2 * _pto_h[_pto_p]], 8);")
            out("_pto_h[_pto_p]++;")

    def index_check(self, fn: Function, s: Instr) -> str:
        """The C loop that fails the task before ``s`` would touch memory outside a tile:
        every index is read (:meth:`index_element`) and checked: a TSCATTER index against
        dst's element count, a TGATHERB byte offset (unsigned) for a whole 32-byte block of a."""
        ops = s.named_operands()
        ti = fn.type_of(ops["idx"])
        x = self.index_element(fn, ops["idx"], "_pto_k")
        if s.opdef.layout == "scatter":
            td = fn.type_of(ops["dst"])
            bad, what = f"(int64_t)({x}) < 0 || (int64_t)({x}) >= {td.rows * td.cols}", \
                "a scatter index leaves its destination"
        else:
            ta = fn.type_of(ops["a"])
            o = f"(int64_t)(uint32_t)({x})"
            bad = (f"{o} % {BLOCK_BYTES} != 0 || "
                   f"{o} + {BLOCK_BYTES} > {ta.rows * ta.cols * ta.dtype.itemsize}")
            what = "a block offset leaves its source"
        err = self.scalar_error(fn, s, what, self.WINDOW_STATUS, x)
        return f"for (int _pto_k = 0; _pto_k < {ti.rows * ti.cols}; _pto_k++) if ({bad}) {err}"

    def index_element(self, fn: Function, tile: str, k: str) -> str:
        """*template* The C expression of element ``k`` (row-major) of index tile ``tile``."""
        t = fn.type_of(tile)
        return f"{tile}[({k}) / {t.cols}][({k}) % {t.cols}]"

    def layout_writes(self, fn: Function, s: Instr) -> list[str]:
        """The C statements run once, in order, after the element copy of layout op ``s``:
        TSCATTER's writes (the last write of a position wins), which the checks of
        :meth:`layout_checks` keep inside dst."""
        if s.opdef.layout != "scatter":
            return []
        ops = s.named_operands()
        a, td, ta = ops["a"], fn.type_of(ops["dst"]), fn.type_of(ops["a"])
        x = f"(int64_t){ops['idx']}[_pto_r][_pto_c]"
        return [f"for (int _pto_r = 0; _pto_r < {ta.rows}; _pto_r++) "
                f"for (int _pto_c = 0; _pto_c < {ta.cols}; _pto_c++) "
                f"{ops['dst']}[({x}) / {td.cols}][({x}) % {td.cols}] = {a}[_pto_r][_pto_c];"]

    def render_layout(self, out: _Out, fn: Function, s: Instr) -> None:
        """A layout op: one copy per element of dst, from the element its map names (then
        the op's ordered writes, :meth:`layout_writes`)."""
        td = fn.type_of(s.operands[0])
        if s.opdef.layout in ITEM_LAYOUTS:
            out.comment(str(s))
            with out.block(f"for (int _pto_e = 0; _pto_e < {self.item_count(fn, s)}; _pto_e++)"):
                self.render_item(out, fn, s)
            return
        out.comment(str(s))
        for check in self.layout_checks(fn, s):
            out(check)
        with out.block(f"for (int _pto_r = 0; _pto_r < {td.rows}; _pto_r++)"):
            with out.block(f"for (int _pto_c = 0; _pto_c < {td.cols}; _pto_c++)"):
                for line in self.layout_assignments(fn, s, "_pto_r", "_pto_c"):
                    out(line)
        for line in self.layout_writes(fn, s):
            out(line)


    # ---------------------------------------------------------------- global gathers/scatters
    def indexed_check(self, fn: Function, s: Instr) -> str:
        """The C loop that fails the task before MGATHER/MSCATTER ``s`` would touch memory
        outside its table: every index is read (:meth:`index_element`) and must name a row
        (coalesce=row) or an element (elem) of the declared table."""
        ops = s.named_operands()
        table = fn.type_of(ops[indexed_tables(s.opdef)[0]])
        ti = fn.type_of(ops["idx"])
        x = self.index_element(fn, ops["idx"], "_pto_k")
        room = index_capacity(table.shape, s.attr("coalesce"))
        err = self.scalar_error(fn, s, "an index leaves its table", self.WINDOW_STATUS, x)
        return (f"for (int _pto_k = 0; _pto_k < {ti.rows * ti.cols}; _pto_k++) "
                f"if ((int64_t)({x}) < 0 || (int64_t)({x}) >= {room}) {err}")

    def indexed_move(self, fn: Function, s: Instr, r: str, c: str) -> str:
        """The C statement of MGATHER/MSCATTER ``s`` for element (r, c) of its tile: the
        table is the memref's pointer and row stride (``_pto_ld_``), its element the row
        idx[0][r] (row) or the row-major position idx[r][c] (elem) names."""
        ops = s.named_operands()
        mem, tile = indexed_tables(s.opdef)
        t, cols = ops[mem], fn.type_of(ops[mem]).shape[1]
        idx = ops["idx"]
        if s.attr("coalesce") == "row":
            at = f"(int64_t){idx}[0][{r}] * _pto_ld_{t} + {c}"
        else:
            x = f"(int64_t){idx}[{r}][{c}]"
            at = f"({x} / {cols}) * _pto_ld_{t} + {x} % {cols}"
        if mem == "src":
            return f"{ops[tile]}[{r}][{c}] = {t}[{at}];"
        return f"{t}[{at}] = {ops[tile]}[{r}][{c}];"

    def render_indexed(self, out: _Out, fn: Function, s: Instr) -> None:
        """MGATHER/MSCATTER: every index checked, then one move per element of the tile in
        row-major order (a scatter's later write of a position wins)."""
        t = fn.type_of(s.operand(indexed_tables(s.opdef)[1]))
        out.comment(str(s))
        out(self.indexed_check(fn, s))
        with out.block(f"for (int _pto_r = 0; _pto_r < {t.rows}; _pto_r++)"):
            with out.block(f"for (int _pto_c = 0; _pto_c < {t.cols}; _pto_c++)"):
                out(self.indexed_move(fn, s, "_pto_r", "_pto_c"))


    # ---------------------------------------------------------------- prefetch
    #: the bytes one prefetch asks for (a cache line)
    PREFETCH_LINE = 64

    def prefetch(self, pointer: str) -> str:
        """*template* The C statement that asks the memory system for the line holding
        ``pointer`` ahead of a load (a hint: no value changes): GCC's and clang's builtin,
        ``prfm pldl1keep`` on AArch64, ``prefetcht0`` on x86."""
        return f"__builtin_prefetch({pointer}, 0, 3);"

    def prefetch_rows(self, fn: Function, s: Instr) -> tuple[int, str, str]:
        """TPREFETCH ``s``: the rows of its window, the C loop over the lines of row
        ``_pto_r`` and the address of line ``_pto_b`` (a byte offset)."""
        ops = s.named_operands()
        t, mem = fn.type_of(ops["dst"]), ops["src"]
        start = (f"(const char*)({mem} + ((int64_t)({self.index(ops['row'])}) * {t.rows} + "
                 f"_pto_r) * _pto_ld_{mem} + (int64_t)({self.index(ops['col'])}) * {t.cols})")
        return (t.rows, f"for (int _pto_b = 0; _pto_b < {t.cols * t.dtype.itemsize}; "
                        f"_pto_b += {self.PREFETCH_LINE})", f"{start} + _pto_b")

    def render_prefetch(self, out: _Out, fn: Function, s: Instr) -> None:
        """TPREFETCH: a prefetch of every line of its window, row by row; its staging tile
        is not touched (nothing reads it)."""
        rows, lines, at = self.prefetch_rows(fn, s)
        out.comment(str(s))
        with out.block(f"for (int _pto_r = 0; _pto_r < {rows}; _pto_r++)"):
            out(f"{lines} {self.prefetch(at)}")


    # ---------------------------------------------------------------- print
    def print_lines(self, fn: Function, s: Instr) -> list[str]:
        """TPRINT ``s`` as C statements that print its tile with ``printf`` in the row's format
        (ops.PRINT_FORMATS: a float widened to double as %W.Pf, an integer as %Wd), a line
        per row after the 'TPRINT RxC' line."""
        src = s.operand("src")
        t = fn.type_of(src)
        width, precision = PRINT_FORMATS[s.attr("format")]
        x = self.to_compute(t.dtype, f"{src}[_pto_r][_pto_c]")
        spec, arg = ((f"%{width}.{precision}f", f"(double)({x})") if t.dtype.is_float
                     else (f"%{width}d", f"(int)({x})"))
        return [f'printf("TPRINT {t.rows}x{t.cols}\\n");',
                f"for (int _pto_r = 0; _pto_r < {t.rows}; _pto_r++) {{",
                f"    for (int _pto_c = 0; _pto_c < {t.cols}; _pto_c++) "
                f'printf(_pto_c ? " {spec}" : "{spec}", {arg});',
                '    printf("\\n");', "}"]

    def render_print(self, out: _Out, fn: Function, s: Instr) -> None:
        """TPRINT: the tile's text on stdout, held under stdout's lock so that the lines of
        kernels running on other workers do not interleave with it, then flushed."""
        out.comment(str(s))
        out("flockfile(stdout);")
        for line in self.print_lines(fn, s):
            out(line)
        out("fflush(stdout);")
        out("funlockfile(stdout);")


def count_loop_nests(source: str) -> int:
    """Top-level element loop nests in portable code (tests compare fused and unfused)."""
    return source.count("for (int _pto_r")
