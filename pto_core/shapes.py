"""Shapes of the entry function's tensors (:func:`derive_shapes`), for the modules that import
them from here; the derivation lives in :mod:`pto_core.reference` because the interpreter's trace
of the orchestration is what it reads."""

from .reference import access_extents, derive_shapes

__all__ = ["access_extents", "derive_shapes"]
