"""Types of the PTO IR: element types, memory spaces, tiles, memrefs and scalars."""

from __future__ import annotations

import enum
from dataclasses import dataclass


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
        return self in (ElementType.F32, ElementType.F16, ElementType.BF16, ElementType.F64)

    @property
    def is_int(self) -> bool:
        return not self.is_float

    @property
    def numpy_name(self) -> str:
        """The numpy dtype name (bf16 is ml_dtypes' ``bfloat16``)."""
        return {"bf16": "bfloat16"}.get(self.value, {
            "f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64",
            "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8"}.get(self.value, ""))

    @classmethod
    def parse(cls, text: str) -> "ElementType":
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown element type '{text}' (expected one of "
                             f"{', '.join(e.value for e in cls)})") from None

    def __repr__(self) -> str:
        return f"ElementType.{self.name}"


_ITEMSIZE = {ElementType.F32: 4, ElementType.F16: 2, ElementType.BF16: 2, ElementType.F64: 8,
             ElementType.I64: 8, ElementType.I32: 4, ElementType.I16: 2, ElementType.I8: 1,
             ElementType.U8: 1}


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
