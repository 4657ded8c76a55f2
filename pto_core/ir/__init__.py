"""The PTO IR: types, the instruction table, statements, functions and modules."""

from .module import (WHILE_LIMIT_STATUS, WHILE_MAX_ITERATIONS, Block, Break, Call, CallArg,
                     Continue, For, Function, FunctionKind, If, Index, Instr, Local, Module,
                     Param, Return, Stmt, Value, While, bodies, walk, walk_nested)
from .ops import CMP_OPS, OPS, OPS_BY_METHOD, OPS_BY_MNEMONIC, Category, Expr, OpDef, Operand
from .types import MAX_DIM, ElementType, MemorySpace, MemRefType, ScalarType, TileType, Type

__all__ = [
    "MAX_DIM", "WHILE_LIMIT_STATUS", "WHILE_MAX_ITERATIONS", "Block", "Break", "Continue",
    "While", "bodies", "Call", "CallArg", "Category", "CMP_OPS", "ElementType", "Expr", "For",
    "Function",
    "FunctionKind", "If", "Index", "Instr", "Local", "MemRefType", "MemorySpace", "Module", "OPS",
    "OPS_BY_METHOD", "OPS_BY_MNEMONIC", "OpDef", "Operand", "Param", "Return", "ScalarType", "Stmt",
    "TileType", "Type", "Value", "walk", "walk_nested",
]
