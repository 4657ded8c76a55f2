"""PTO-AS: the directive text of seed 003 (``.tensor_view``, ``.gemm``, ``.prologue`` ...),
read into the same IR as the builder and `.pto`, and printed back exactly.

>>> from pto_core.ptoas import read
>>> text = '''.prologue
... .tensor_view %A, arg=0, shape=(16, 16), dtype=float32
... .tensor_view %B, arg=1, shape=(16, 16), dtype=float32
... .tensor_view %C, arg=2, shape=(16, 16), dtype=float32
... # C = A @ B
... .gemm %C, %A, %B
... .epilogue
... '''
>>> listing = read(text, name="gemm_tile")
>>> listing.text() == text
True
>>> [str(s) for s in listing.module.functions["gemm_tile"].body][2]
'TMATMUL %C_tile, %A_tile, %B_tile'
"""

from ..ir import Module
from .parser import Listing, parse_kernel, parse_ptoas, parse_ptoas_file, read
from .printer import format_instruction, print_kernel, print_ptoas
from .syntax import DTYPES, OPS_BY_DIRECTIVE, WORKERS, directive

#: file suffix of PTO-AS files
SUFFIX = ".ptoas"


def is_ptoas_text(text: str) -> bool:
    r"""Whether ``text`` reads as PTO-AS rather than `.pto`: its first line that is neither
    blank nor a ``#`` comment is a directive (``.prologue``, ``.module`` ...).

    >>> is_ptoas_text("# a kernel\n.prologue\n"), is_ptoas_text("// PTO Module: m\nfunc @f() {")
    (True, False)
    """
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            return s.startswith(".")
    return False


def parse_program_file(path) -> Module:
    """A `.ptoas` file, or a `.pto` file whose text is PTO-AS, read as PTO-AS; any other
    `.pto` file read by :func:`pto_core.asm.parse_file`."""
    from pathlib import Path
    from ..asm import parse_file
    from ..asm.lexer import read_source
    path = Path(path)
    if path.suffix != SUFFIX and not is_ptoas_text(read_source(path)[:1 << 16]):
        return parse_file(path)
    return parse_ptoas_file(path)

__all__ = ["is_ptoas_text", "parse_program_file", "DTYPES", "Listing", "OPS_BY_DIRECTIVE", "SUFFIX", "WORKERS", "directive",
           "format_instruction", "parse_kernel", "parse_ptoas", "parse_ptoas_file",
           "print_kernel", "print_ptoas", "read"]
