"""How PTO-AS spells things: directive names of the instruction table, element types, worker
types. Parser, printer and the ``PTO`` front end all ask here, so a new row of
:data:`pto_core.ir.ops.OPS` needs no change in this package.

A tile op is written ``tile_`` + its builder method (``tile_add``, ``tile_rowmax``,
``tile_load``); the two matrix products take the names seed 003 gives them (``gemm``,
``gemm_acc``); scalar ops keep their builder names (``scalar_add``).

>>> from pto_core.ir import OPS
>>> directive(OPS["TADD"]), directive(OPS["TMATMUL"]), directive(OPS["SADD"])
('tile_add', 'gemm', 'scalar_add')
>>> OPS_BY_DIRECTIVE["gemm_acc"].name
'TMATMUL_ACC'
"""

from __future__ import annotations

from ..ir.ops import OPS, Category, OpDef
from ..ir.types import ElementType

#: ops whose PTO-AS name is not derived by rule (seed 003 names the matrix product ``gemm``)
_NAMED = {"TMATMUL": "gemm", "TMATMUL_ACC": "gemm_acc"}


def directive(op: OpDef) -> str:
    """The PTO-AS directive (without its ``.``) and ``PTO`` method name of ``op``."""
    if op.name in _NAMED:
        return _NAMED[op.name]
    if op.category is Category.SCALAR:
        return op.method
    return "tile_" + op.method


OPS_BY_DIRECTIVE: dict[str, OpDef] = {directive(op): op for op in OPS.values()}

#: element types by their PTO-AS spelling (numpy's names: ``float32``, ``int32``, ``bfloat16``)
DTYPES: dict[str, ElementType] = {t.numpy_name: t for t in ElementType}


def dtype_name(t: ElementType) -> str:
    return t.numpy_name


#: worker types of ``.function ..., worker=`` and their runtime constants (``PTO_WORKER_*``)
WORKERS: dict[str, str] = {"cube": "PTO_WORKER_CUBE", "vector": "PTO_WORKER_VECTOR",
                           "ai_cpu": "PTO_WORKER_AI_CPU", "accelerator": "PTO_WORKER_ACCELERATOR"}

#: directives that declare names, and those that shape the text around statements
DECLARATIONS = ("tensor_view", "tile", "scalar")
CONTROL = ("for", "endfor", "if", "else", "endif", "while", "endwhile", "break", "continue",
           "call", "return")
FRAME = ("module", "entry", "function", "prologue", "epilogue")

assert not set(OPS_BY_DIRECTIVE) & set(DECLARATIONS + CONTROL + FRAME)


def implicit_tile(view: str) -> str:
    """The tile that holds tensor view ``view`` when an instruction names the view where it
    reads or writes a tile (``.gemm %C, %A, %B`` on views): ``A`` -> ``A_tile``."""
    return view + "_tile"
