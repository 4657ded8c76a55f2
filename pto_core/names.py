"""Identifier rules for every name that can reach generated code.

A name must match ``[A-Za-z_][A-Za-z0-9_]*``, must not be a C, C++ or CUDA keyword (nor a
common builtin type such as ``int32_t``), and must not start with ``_pto``/``__`` (reserved for
generated code).

>>> check_identifier("tile_i")
>>> check_identifier("float")
Traceback (most recent call last):
...
ValueError: 'float' is a C/C++/CUDA keyword and cannot be used as a name
"""

from __future__ import annotations

import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union unsigned
void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
_Static_assert _Thread_local
""".split())

CXX_KEYWORDS = frozenset("""
alignas alignof and and_eq asm bitand bitor bool catch char8_t char16_t char32_t class compl
concept consteval constexpr constinit const_cast co_await co_return co_yield decltype delete
dynamic_cast explicit export false friend mutable namespace new noexcept not not_eq nullptr
operator or or_eq private protected public reinterpret_cast requires static_assert static_cast
template this thread_local throw true try typeid typename using virtual wchar_t xor xor_eq
""".split())

CUDA_KEYWORDS = frozenset("""
__global__ __device__ __host__ __shared__ __constant__ __managed__ __restrict__ __noinline__
__forceinline__ threadIdx blockIdx blockDim gridDim warpSize __syncthreads
""".split())

#: Names of types and macros that generated code relies on.
RESERVED_NAMES = frozenset("""
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t ptrdiff_t intptr_t
half bfloat16_t float16_t NULL main args rt PTORuntime PTOTensor
""".split())

KEYWORDS = C_KEYWORDS | CXX_KEYWORDS | CUDA_KEYWORDS


def check_identifier(name: object) -> None:
    """Raise ``ValueError`` unless ``name`` may be used as a PTO name."""
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"{name!r} is not a valid identifier")
    if name in KEYWORDS:
        raise ValueError(f"'{name}' is a C/C++/CUDA keyword and cannot be used as a name")
    if name in RESERVED_NAMES:
        raise ValueError(f"'{name}' is reserved in generated code and cannot be used as a name")
    if name.startswith("_pto") or name.startswith("__"):
        raise ValueError(f"'{name}' starts with a prefix reserved for generated code")


def is_identifier(name: object) -> bool:
    try:
        check_identifier(name)
    except ValueError:
        return False
    return True
