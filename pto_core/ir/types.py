"""Types of the PTO IR: element types, memory spaces, tiles, memrefs and scalars."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

#: largest tile or memref dimension, and most elements in one tile: generated code counts
#: rows, columns and a tile's elements with 32-bit ints
MAX_DIM = 2**31 - 1


class ElementType(enum.Enum):
    """Element types; the value is the name used in `.pto` text."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    F64 = "f64"
    I64 = "i64"
    I32 = "i32"
    I16 = "i16"
    I8 = "i8"
    U8 = "u8"

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self in _FLOATS         # a tuple: Enum hashing is slow, identity tests are not

    @property
    def is_int(self) -> bool:
        return self not in _FLOATS

    @property
    def numpy_name(self) -> str:
        """The numpy dtype name (bf16 is ml_dtypes' ``bfloat16``)."""
        return {"bf16": "bfloat16"}.get(self.value, {
            "f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64",
            "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8"}.get(self.value, ""))

    @property
    def compute_type(self) -> "ElementType":
        """The type arithmetic on this type is done in: f32 for the 16-bit floats (each result
        is rounded back), else the type itself."""
        return ElementType.F32 if self in _FLOATS[1:3] else self

    @property
    def limits(self) -> tuple[int | float, int | float]:
        """The smallest and largest finite value of the type.

        >>> ElementType.I8.limits, ElementType.F16.limits
        ((-128, 127), (-65504.0, 65504.0))
        """
        return _LIMITS[self._value_]

    def check_value(self, value: object) -> None:
        """Raise ``ValueError`` unless ``value`` (a Python number) is a value of this type: an
        integer within range for an integer type (a whole float such as ``2.0`` counts), a
        number no larger in magnitude than the largest finite value for a float type (``inf``
        and ``nan`` are values of float types).

        >>> ElementType.I32.check_value(2**31)
        Traceback (most recent call last):
        ...
        ValueError: 2147483648 is out of range for i32 (-2147483648 to 2147483647)
        """
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{value!r} is not a number")
        lo, hi = _LIMITS[self._value_]        # by name: Enum hashing is slow
        if self not in _FLOATS:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"{value!r} is not an integer, and {self.value} holds "
                                 f"integers")
            if not lo <= value <= hi:
                raise ValueError(f"{_short(value)} is out of range for {self.value} "
                                 f"({lo} to {hi})")
            return
        if isinstance(value, float) and not math.isfinite(value):
            return
        if not -hi <= value <= hi:
            raise ValueError(f"{_short(value)} is out of range for {self.value} "
                             f"(largest finite value {hi:g})")

    @classmethod
    def parse(cls, text: str) -> "ElementType":
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown element type '{text}' (expected one of "
                             f"{', '.join(e.value for e in cls)})") from None

    def __repr__(self) -> str:
        return f"ElementType.{self.name}"


def _short(value: int | float) -> str:
    """A number for an error message; a huge integer by its size (``str()`` of one is slow,
    and refused past 4300 digits)."""
    if isinstance(value, int) and value.bit_length() > 80:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"a {'negative ' if value < 0 else ''}{digits}-digit integer"
    return repr(value)


_FLOATS = (ElementType.F32, ElementType.F16, ElementType.BF16, ElementType.F64)
_ITEMSIZE = {ElementType.F32: 4, ElementType.F16: 2, ElementType.BF16: 2, ElementType.F64: 8,
             ElementType.I64: 8, ElementType.I32: 4, ElementType.I16: 2, ElementType.I8: 1,
             ElementType.U8: 1}
_F32_MAX = 3.4028234663852886e38
_LIMITS: dict[str, tuple[int | float, int | float]] = {
    "f32": (-_F32_MAX, _F32_MAX), "f16": (-65504.0, 65504.0),
    "bf16": (-3.3895313892515355e38, 3.3895313892515355e38),
    "f64": (-1.7976931348623157e308, 1.7976931348623157e308),
    "i64": (-2**63, 2**63 - 1), "i32": (-2**31, 2**31 - 1), "i16": (-2**15, 2**15 - 1),
    "i8": (-128, 127), "u8": (0, 255)}


class MemorySpace(enum.Enum):
    """Where a buffer lives. Memrefs of functions are GLOBAL; the rest name on-chip buffers."""

    GLOBAL = "gm"
    UB = "ub"      # unified/vector buffer
    L1 = "l1"
    L0A = "l0a"
    L0B = "l0b"
    L0C = "l0c"

    @classmethod
    def parse(cls, text: str) -> "MemorySpace":
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown memory space '{text}'") from None

    def __repr__(self) -> str:
        return f"MemorySpace.{self.name}"


@dataclass(frozen=True)
class TileType:
    """A rows x cols tile of one element type, held on chip."""

    rows: int
    cols: int
    dtype: ElementType

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * self.dtype.itemsize

    def __str__(self) -> str:
        return f"!pto.tile<{self.rows}x{self.cols}x{self.dtype.value}>"


@dataclass(frozen=True)
class MemRefType:
    """A 2-D row-major tensor in memory. ``shape`` is optional: usually derived from the program."""

    space: MemorySpace
    dtype: ElementType
    shape: tuple[int, int] | None = None

    def __str__(self) -> str:
        if self.shape is None:
            return f"!pto.memref<{self.space.value},{self.dtype.value}>"
        return f"!pto.memref<{self.space.value},{self.shape[0]}x{self.shape[1]}x{self.dtype.value}>"


@dataclass(frozen=True)
class ScalarType:
    """A scalar value (an integer or float register)."""

    dtype: ElementType

    def __str__(self) -> str:
        return self.dtype.value


Type = TileType | MemRefType | ScalarType
