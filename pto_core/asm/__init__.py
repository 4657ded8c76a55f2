"""`.pto` assembly both ways: print a module, parse text back, and generate builder Python.

>>> from pto_core.asm import parse, print_module
>>> text = '''// PTO Module: demo
... // Function Type: InCore
... func @f(%a: !pto.memref<gm,f32>) {
...   %x = alloc_tile : !pto.tile<8x8xf32>
...   %x = tload %a[0, 0] : !pto.memref<gm,f32> -> !pto.tile<8x8xf32>
... }
... '''
>>> print_module(parse(text)).splitlines()[4]
'func @f(%a: !pto.memref<gm,f32>) {'
"""

from .parser import parse, parse_device_program, parse_file
from .printer import format_instr, print_function, print_module
from .pygen import generate_builder

__all__ = ["format_instr", "generate_builder", "parse", "parse_device_program", "parse_file",
           "print_function", "print_module"]
