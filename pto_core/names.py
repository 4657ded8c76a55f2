"""Identifier rules for every name that can reach generated code.

A name must match ``[A-Za-z_][A-Za-z0-9_]*``, be at most :data:`MAX_NAME_LENGTH` characters,
must not be a C, C++ or CUDA keyword (nor a common builtin type such as ``int32_t``), and must
not start with ``pto_``, ``_pto`` or ``__`` (the namespace of generated code).

Keywords are rejected because the `.pto` text and the reference interpreter use names as they
are; generated C never does: :mod:`pto_core.codegen.cnames` gives every user name a prefix in
that namespace, so a name such as ``exit``, ``errno`` or ``INFINITY`` cannot meet a C, libc,
libm, CUDA or runtime symbol.

Module names may also hold ``.`` and ``-`` (``softmax-v2``): they name files and directories, so
they are checked by :func:`check_module_name`.

>>> check_identifier("tile_i")
>>> check_identifier("float")
Traceback (most recent call last):
...
ValueError: 'float' is a C/C++/CUDA keyword and cannot be used as a name
"""

from __future__ import annotations

import re

from .errors import short_repr

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")

#: longest name accepted: names become file names (kernel sources, objects) and path parts
MAX_NAME_LENGTH = 128

#: prefixes of generated names; no user name may start with one
RESERVED_PREFIXES = ("pto_", "_pto", "__")

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


def _describe(name: str) -> str:
    return repr(name if len(name) <= 40 else name[:37] + "...")


def _check_form(name: object, pattern: re.Pattern, what: str, rule: str) -> None:
    """``name`` is a string matching ``pattern`` of at most :data:`MAX_NAME_LENGTH`
    characters, else ValueError: ``<what><name> <rule>``."""
    if not isinstance(name, str) or not pattern.match(name):
        shown = _describe(name) if isinstance(name, str) else short_repr(name)
        raise ValueError(f"{what}{shown} {rule}")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"{what}{_describe(name)} is {len(name)} characters long; names may "
                         f"have at most {MAX_NAME_LENGTH}")


def check_identifier_form(name: object) -> None:
    """Raise ``ValueError`` unless ``name`` has an identifier's form (what the ``.pto`` text
    reads after ``@`` or ``%``), reserved words allowed: for a name that stays in the text,
    such as a device program's (``device @main``)."""
    _check_form(name, _IDENT, "", "is not a valid identifier (letters, digits and '_', not "
                "starting with a digit)")


def check_identifier(name: object) -> None:
    """Raise ``ValueError`` unless ``name`` may be used as a PTO name."""
    check_identifier_form(name)
    if name in KEYWORDS:
        raise ValueError(f"'{name}' is a C/C++/CUDA keyword and cannot be used as a name")
    if name in RESERVED_NAMES:
        raise ValueError(f"'{name}' is reserved in generated code and cannot be used as a name")
    if name.startswith(RESERVED_PREFIXES):
        raise ValueError(f"'{name}' starts with a prefix reserved for generated code "
                         f"({', '.join(RESERVED_PREFIXES)})")


def check_module_name(name: object) -> None:
    """Raise ``ValueError`` unless ``name`` may name a module: letters, digits, ``_``, ``.``
    and ``-``, starting with a letter or ``_``, at most :data:`MAX_NAME_LENGTH` characters. No
    path separator, no ``..`` component, nothing a C comment or string could end on.

    >>> check_module_name("softmax-v2.1")
    >>> check_module_name("../escaped")
    Traceback (most recent call last):
    ...
    ValueError: module name '../escaped' may hold only letters, digits, '_', '.' and '-', starting with a letter or '_'
    """
    _check_form(name, _MODULE, "module name ", "may hold only letters, digits, '_', '.' and "
                "'-', starting with a letter or '_'")


def is_identifier(name: object) -> bool:
    try:
        check_identifier(name)
    except ValueError:
        return False
    return True
