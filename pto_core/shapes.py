"""Shapes of the entry function's tensors, derived from the program when not declared.

For each tensor parameter of the entry function, in this order of precedence:

1. the shape declared on the memref (``.memref(..., shape=(R, C))``);
2. the shape given by the caller (``pto run --shape name=RxC``);
3. otherwise the extent of all accesses for the given scalar values: every InCore call the
   orchestration makes (:func:`pto_core.reference.trace_calls`) touches an element box of the
   tensor; the derived shape is ``(max row end, max column end)``.

Rule 3 is refused, with an error that names the ``--shape`` to add, when

* no call touches the tensor (for these scalar values), or
* the width is ambiguous: the boxes together do not cover every column from 0 to the largest
  column end. Columns no access touches could be padding or belong to a wider row stride, and
  the program cannot tell which. (Rows are never ambiguous: rows past the last access do not
  change where any element lives.)

A declared or given shape smaller than the accesses is an error as well.

>>> from pathlib import Path
>>> from pto_core.program import load_program
>>> m = load_program(Path(__file__).parents[1] / "examples" / "fused_softmax.py").module
>>> derive_shapes(m, {"num_tiles": 2})["temp_max"]
(16, 1)
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .errors import PTOError
from .ir import MemRefType, Module
from .reference import trace_calls


def _fmt(shape: tuple[int, int]) -> str:
    return f"{shape[0]}x{shape[1]}"


def access_extents(module: Module, scalars: Mapping[str, Any],
                   entry: str | None = None) -> dict[str, tuple[int, set[tuple[int, int]]]]:
    """For each touched tensor: (largest row end, set of column intervals ``[c0, c1)``)."""
    rows: dict[str, int] = {}
    cols: dict[str, set[tuple[int, int]]] = {}
    for tc in trace_calls(module, scalars, entry):
        for r in tc.regions:
            end = r.row_off + r.rows
            if end > rows.get(r.tensor, -1):
                rows[r.tensor] = end
            cols.setdefault(r.tensor, set()).add((r.col_off, r.col_off + r.cols))
    return {t: (rows[t], cols[t]) for t in rows}


def _uncovered(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Gaps in ``[0, max end)`` that no interval covers."""
    gaps, reach = [], 0
    for c0, c1 in sorted(intervals):
        if c0 > reach:
            gaps.append((reach, c0))
        reach = max(reach, c1)
    return gaps


def derive_shapes(module: Module, scalars: Mapping[str, Any],
                  given: Mapping[str, tuple[int, int]] | None = None, *,
                  entry: str | None = None,
                  only: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
    """Shape of every tensor parameter of the entry function (see the module doc).
    ``only`` limits the result to some tensors (the others are still checked when given)."""
    given = dict(given or {})
    name = entry or module.entry
    if name not in module.functions:
        raise PTOError(f"module '{module.name}' has no function '{name}'")
    fn = module.functions[name]
    memrefs: dict[str, MemRefType] = fn.memrefs
    unknown = [n for n in given if n not in memrefs]
    if unknown:
        raise PTOError(f"--shape names {', '.join(unknown)}, but '{fn.name}' has no such tensor "
                       f"(it has {', '.join(memrefs) or 'none'})")
    extents = access_extents(module, scalars, fn.name)
    wanted = list(memrefs) if only is None else [n for n in memrefs if n in set(only)]
    out: dict[str, tuple[int, int]] = {}
    for n in memrefs:
        ext = extents.get(n)
        fixed = memrefs[n].shape or given.get(n)
        if fixed is not None:
            fixed = (int(fixed[0]), int(fixed[1]))
            if ext is not None:
                need = (ext[0], max(c1 for _, c1 in ext[1]))
                if need[0] > fixed[0] or need[1] > fixed[1]:
                    how = "declared" if memrefs[n].shape else "given"
                    raise PTOError(f"tensor '{n}' is {how} as {_fmt(fixed)}, but the program "
                                   f"accesses it up to {_fmt(need)}", function=fn.name)
            if n in wanted:
                out[n] = fixed
            continue
        if n not in wanted:
            continue
        if ext is None:
            raise PTOError(f"cannot derive the shape of tensor '{n}': no call touches it with "
                           f"these scalar values; add --shape {n}=RxC", function=fn.name)
        r, intervals = ext
        width = max(c1 for _, c1 in intervals)
        gaps = _uncovered(intervals)
        if gaps:
            g = ", ".join(f"[{a}, {b})" for a, b in gaps)
            raise PTOError(f"cannot derive the width of tensor '{n}': accesses reach column "
                           f"{width} but never touch columns {g}, so the width is ambiguous; "
                           f"add --shape {n}={r}x{width} (or its real width)", function=fn.name)
        out[n] = (r, width)
    return out
