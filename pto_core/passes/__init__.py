"""The pass pipeline: ``-O0/-O1/-O2`` and per-pass switches over the IR.

Passes run in this order, each only when ``options.enabled(name)`` (see
:data:`pto_core.options.PASS_LEVELS`), each returning a new module (IR nodes are frozen; the
input module is never changed), and the verifier runs after each one:

==================  ============================================================================
``inline``          InCore calls inside InCore functions are replaced by the callee's body
``const_fold``      scalar ops on constants, IF on a constant, FOR over a constant empty range
``dce``             instructions whose results nothing reads (TSTORE and CALL always stay)
``binary_expansion`` dynamic orchestration loops with ``max_range`` become power-of-two blocks
``adaptive_tiles``  applied inside ``binary_expansion`` (it needs the blocks): blocks with bigger
                    ``tile_levels`` rows call derived kernel variants; the entry here only
                    marks the point for ``--print-after``. Without ``binary_expansion`` it has
                    nothing to act on.
``fuse_loops``      numbers the loop nest of each element-wise instruction (``Instr.nest``), which
                    C-style renderers follow
``buffer_reuse``    an analysis (:func:`plan_buffers`) the emitters and the orchestration use
                    for tile offsets and ``buffer_bytes``; here it checks ``capacity`` if given
==================  ============================================================================

``binary_expansion`` runs after ``dce`` so the kernels it derives variants from are already
inlined and clean; ``const_fold`` and ``dce`` run once more after it when enabled (the
expansion's scalar code folds away when a bound is a literal); those reruns are not reported
to ``on_after``.

>>> from pto_core.options import CompileOptions
>>> from pto_core import PTOModule
>>> seen = []
>>> _ = run_pipeline(PTOModule("m"), CompileOptions(opt_level=0),
...                  on_after=lambda name, mod: seen.append(name))
>>> seen
['binary_expansion', 'adaptive_tiles']
"""

from __future__ import annotations

from typing import Callable

from ..errors import PTOError
from ..ir import Module
from ..options import CompileOptions
from ..verify import verify_module
from .adaptive_tiles import VariantFactory, derive_variant
from .binary_expansion import expand_module
from .buffer_reuse import (BufferPlan, buffer_report, check_capacity, function_buffer_bytes,
                           live_intervals, plan_buffers)
from .const_fold import const_fold_module, fold_scalar
from .dce import dce_module
from .fuse_loops import fuse_loops_module
from .inline import inline_module
from ._rewrite import replace_functions

#: pass names in pipeline order
PIPELINE = ("inline", "const_fold", "dce", "binary_expansion", "adaptive_tiles", "fuse_loops",
            "buffer_reuse")


def _check(name: str, module: Module) -> None:
    try:
        # binary expansion nests loops deeper than its input: only the front ends' depth
        # bounds are for the program as written
        verify_module(module, depth_limits=False)
    except PTOError as e:
        raise PTOError(f"internal error: pass '{name}' produced invalid IR: {e}",
                       function=e.function) from e


def run_pipeline(module: Module, options: CompileOptions, *,
                 on_after: Callable[[str, Module], None] | None = None,
                 capacity: tuple[str, int] | None = None) -> Module:
    """Run the enabled passes over ``module`` and return the new module.

    ``on_after(name, module)`` is called after each pass that ran (``pto compile
    --print-after``). ``capacity=(name, bytes)`` checks every InCore function's on-chip buffer
    (after reuse, when enabled) against a backend's limit and raises :class:`PTOError` naming
    the function and its largest tiles.
    """
    def step(name: str, fn: Callable[[Module], Module]) -> None:
        nonlocal module
        module = fn(module)
        _check(name, module)
        if on_after is not None:
            on_after(name, module)

    module = replace_functions(module, list(module.functions.values()))   # never the input
    on = options.enabled
    if on("inline"):
        step("inline", inline_module)
    if on("const_fold"):
        step("const_fold", const_fold_module)
    if on("dce"):
        step("dce", dce_module)
    if on("binary_expansion"):
        expanded = expand_module(module, adaptive=on("adaptive_tiles"))
        changed = expanded != module
        step("binary_expansion", lambda m: expanded)
        if on("adaptive_tiles"):
            step("adaptive_tiles", lambda m: m)
        if changed and on("const_fold"):
            module = const_fold_module(module)
            _check("const_fold", module)
        if changed and on("dce"):
            module = dce_module(module)
            _check("dce", module)
    elif on("adaptive_tiles"):
        step("adaptive_tiles", lambda m: m)
    if on("fuse_loops"):
        step("fuse_loops", fuse_loops_module)
    if on("buffer_reuse"):
        step("buffer_reuse", lambda m: m)
    if capacity is not None:
        check_capacity(module, capacity[0], capacity[1], options)
    return module


__all__ = ["BufferPlan", "PIPELINE", "VariantFactory", "buffer_report", "check_capacity",
           "const_fold_module", "dce_module", "derive_variant", "expand_module", "fold_scalar",
           "fuse_loops_module",
           "function_buffer_bytes", "inline_module", "live_intervals", "plan_buffers",
           "run_pipeline"]
