"""Checking a run against the reference: the seeded inputs every run and test uses, the
tolerance policy, the comparison, and running a built host program on ``.npy`` files.

``pto run --check``, ``scons check``, the tests, the benches and the plugins all take their
inputs and their verdict from here, so a tolerance or a seed changes in one place. The host
program runs natively or under ``qemu-aarch64`` when it was cross-compiled.

>>> import numpy as np
>>> compare("y", np.array([1.0, np.nan]), np.array([1.0 + 1e-7, np.nan]), 1e-5, 1e-6).ok
True
>>> run_host_and_compare(program, "build/arm64/rowmax/rowmax_host")   # doctest: +SKIP
(True, '...')
"""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import PTOError
from .ir import ElementType, Function, Module, ScalarType
from .program import Program, is_program
from .reference import derive_shapes, numpy_dtype, run_module, trace_calls

QEMU = {"aarch64": "qemu-aarch64"}


# --------------------------------------------------------------------------------------------
# Seeded inputs
# --------------------------------------------------------------------------------------------

def resolve_scalars(fn: Function, defaults: Mapping[str, Any],
                    sets: Mapping[str, Any]) -> dict[str, Any]:
    """The entry function's scalar parameters: DEFAULTS updated by --set; all must be known."""
    params = [p.name for p in fn.params if isinstance(p.type, ScalarType)]
    unknown = [n for n in sets if n not in params]
    if unknown:
        raise PTOError(f"--set {unknown[0]}: '{fn.name}' has no scalar parameter named "
                       f"{', '.join(unknown)} (its scalars: {', '.join(params) or 'none'})")
    values = {k: v for k, v in defaults.items() if k in params}
    values.update(sets)
    missing = [n for n in params if n not in values]
    if missing:
        raise PTOError(f"no value for scalar parameter(s) {', '.join(missing)} of '{fn.name}'; "
                       f"add " + " ".join(f"--set {n}=VALUE" for n in missing))
    return values


def random_inputs(fn: Function, shapes: Mapping[str, tuple[int, int]],
                  inputs: tuple[str, ...] | None, seed: int) -> dict[str, np.ndarray]:
    """Seeded random values for the inputs, zeros for the other tensors."""
    memrefs = fn.memrefs
    if inputs is not None:
        bad = [n for n in inputs if n not in memrefs]
        if bad:
            raise PTOError(f"INPUTS names {', '.join(bad)}, which '{fn.name}' does not have")
    rng = np.random.default_rng(seed)
    out = {}
    for name, t in memrefs.items():
        dt = numpy_dtype(t.dtype)
        shape = shapes[name]
        if inputs is not None and name not in inputs:
            out[name] = np.zeros(shape, dt)
        elif t.dtype.is_float:
            out[name] = rng.standard_normal(shape, dtype=np.float32).astype(dt)
        else:
            out[name] = rng.integers(-8, 9, size=shape).astype(dt)
    return out


def program_inputs(program: Program, scalars: Mapping[str, Any] | None = None,
                   seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The tensors and scalars ``pto run`` would use for ``program``."""
    module = program.module
    fn = module.functions[module.entry]
    sc = resolve_scalars(fn, program.defaults, dict(scalars or {}))
    shapes = derive_shapes(module, sc, {}, entry=fn.name)
    return random_inputs(fn, shapes, program.inputs, seed), sc


def tensor_modes(module: Module, scalars: Mapping[str, Any], entry: str) -> dict[str, str]:
    """How the run uses each tensor: ``in``, ``out``, ``inout`` (read and written) or ``unused``."""
    read: set[str] = set()
    written: set[str] = set()
    for tc in trace_calls(module, scalars, entry):
        for r in tc.regions:
            if r.mode != "out":
                read.add(r.tensor)
            if r.mode != "in":
                written.add(r.tensor)
    fn = module.functions[entry]
    return {n: ("inout" if n in read and n in written else "out" if n in written
                else "in" if n in read else "unused") for n in fn.memrefs}


def call_numpy_reference(program: Program, inputs: dict[str, np.ndarray],
                          scalars: dict[str, Any]) -> dict[str, np.ndarray]:
    """The program's ``numpy_reference`` on copies of ``inputs`` and the scalars it names."""
    ref = program.numpy_reference
    values = {**{n: a.copy() for n, a in inputs.items()}, **scalars}
    sig = inspect.signature(ref)
    if not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        values = {k: v for k, v in values.items() if k in sig.parameters}
    out = ref(**values)
    if not isinstance(out, Mapping):
        raise PTOError(f"{program.path}: numpy_reference must return a dict of tensors by name, "
                       f"got {type(out).__name__}")
    return dict(out)


# --------------------------------------------------------------------------------------------
# Tolerance policy
# --------------------------------------------------------------------------------------------

#: default (rtol, atol) by element type
TOLERANCES: dict[ElementType, tuple[float, float]] = {
    ElementType.F32: (1e-5, 1e-6),
    ElementType.F64: (1e-12, 1e-12),
    ElementType.F16: (1e-2, 1e-2),
    ElementType.BF16: (5e-2, 5e-2),
}
MATMUL_F32_TOLERANCE = (1e-4, 1e-4)


# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Comparison:
    """How far one tensor is from its expected value."""

    name: str
    max_abs_err: float
    max_rel_err: float
    rtol: float
    atol: float
    ok: bool
    note: str = ""

    def line(self) -> str:
        verdict = "ok" if self.ok else "MISMATCH"
        extra = f" {self.note}" if self.note else ""
        return (f"  {self.name:<16} max_abs_err={self.max_abs_err:.3g} "
                f"max_rel_err={self.max_rel_err:.3g}  {verdict} "
                f"(rtol {self.rtol:g}, atol {self.atol:g}){extra}")


def default_tolerance(dtype: ElementType, module: Module,
                      expected: np.ndarray | None = None) -> tuple[float, float]:
    """(rtol, atol) for a tensor of ``dtype`` whose expected value is ``expected``."""
    if dtype.is_int:
        return (0.0, 0.0)
    if dtype is ElementType.F32 and module.uses_matmul:
        rtol, atol = MATMUL_F32_TOLERANCE
        if expected is not None and np.size(expected):
            scale = float(np.nanmax(np.abs(np.asarray(expected, np.float64)), initial=0.0))
            atol *= max(1.0, scale if np.isfinite(scale) else 1.0)
        return rtol, atol
    return TOLERANCES[dtype]


def array_tolerance(expected: np.ndarray, module: Module | None = None) -> tuple[float, float]:
    """(rtol, atol) for an expected array known only by its numpy dtype (a workload's tensors):
    integers exact, each float type its element type's default (:func:`default_tolerance` with
    ``module``, so f32 with matmul in the kernels is looser); a float dtype no element type has
    counts as f32.

    >>> array_tolerance(np.zeros(2, np.float16))
    (0.01, 0.01)
    """
    dt = np.asarray(expected).dtype
    if np.issubdtype(dt, np.integer):
        return 0.0, 0.0
    dtype = next((t for t in ElementType if t.is_float and numpy_dtype(t) == dt), ElementType.F32)
    return TOLERANCES[dtype] if module is None else default_tolerance(dtype, module, expected)


def tolerance(program: Program | None, name: str, dtype: ElementType, module: Module,
              expected: np.ndarray | None = None) -> tuple[float, float]:
    """The program's ``TOLERANCE`` for tensor ``name`` if it sets one, else the default."""
    custom = getattr(program.python_module, "TOLERANCE", None) if program else None
    if isinstance(custom, Mapping):
        if "rtol" in custom or "atol" in custom:
            return float(custom.get("rtol", 0.0)), float(custom.get("atol", 0.0))
        if name in custom:
            r, a = custom[name]
            return float(r), float(a)
    return default_tolerance(dtype, module, expected)


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> Comparison:
    """Element-wise ``|got - want| <= atol + rtol * |want|``; NaN matches NaN and an infinity
    matches the same infinity."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return Comparison(name, float("inf"), float("inf"), rtol, atol, False,
                          f"shape {got.shape} != expected {want.shape}")
    g, w = got.astype(np.float64), want.astype(np.float64)
    same_special = (np.isnan(g) & np.isnan(w)) | (np.isinf(g) & (g == w))
    with np.errstate(invalid="ignore"):
        err = np.where(same_special, 0.0, np.abs(g - w))
    err = np.where(np.isnan(err), np.inf, err)
    ok = bool(np.all(err <= atol + rtol * np.abs(np.where(same_special, 0.0, np.nan_to_num(w)))))
    max_abs = float(err.max()) if err.size else 0.0
    nz = (np.abs(w) > 0) & ~same_special
    with np.errstate(invalid="ignore"):     # a finite value against an infinity: inf, not nan
        rel = np.nan_to_num(err[nz] / np.abs(w[nz]), nan=np.inf)
    max_rel = float(rel.max()) if rel.size else 0.0
    return Comparison(name, max_abs, max_rel, rtol, atol, ok)


# --------------------------------------------------------------------------------------------
# Host programs
# --------------------------------------------------------------------------------------------

def run_host(exe: str | Path, tensors: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
             work_dir: Path, *, cross: str = "", workers: int = 2,
             threshold: int = 0, echo: bool = False) -> dict[str, np.ndarray]:
    """Write ``tensors`` as ``work_dir/in/<name>.npy``, run the host program, read
    ``work_dir/out/<name>.npy``. ``echo``: the program's standard output (what TPRINT
    printed) is written to this process's."""
    work_dir = Path(work_dir)
    (work_dir / "in").mkdir(parents=True, exist_ok=True)
    (work_dir / "out").mkdir(parents=True, exist_ok=True)
    for name, a in tensors.items():
        np.save(work_dir / "in" / f"{name}.npy", np.ascontiguousarray(a))
    cmd = ([QEMU[cross]] if cross else []) + [str(exe), "-i", str(work_dir / "in"), "-o",
                                               str(work_dir / "out"), "-w", str(workers),
                                               "-t", str(threshold)]
    cmd += [f"{k}={v}" for k, v in scalars.items()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise PTOError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    if echo:
        sys.stdout.write(r.stdout)
        sys.stdout.flush()
    return {name: np.load(work_dir / "out" / f"{name}.npy") for name in tensors}


def report_comparisons(results: Sequence[Comparison]) -> bool:
    """Print each comparison's line, then the overall line (largest errors, OK or MISMATCH,
    how many tensors) that ``pto run --check`` ends with; True when every tensor is within."""
    for c in results:
        print(c.line())
    ok = all(c.ok for c in results)
    max_abs = max((c.max_abs_err for c in results), default=0.0)
    max_rel = max((c.max_rel_err for c in results), default=0.0)
    print(f"overall: max_abs_err={max_abs:.3g} max_rel_err={max_rel:.3g}  "
          f"{'OK' if ok else 'MISMATCH'} ({len(results)} tensors)")
    return ok


def compare_with_reference(program: Program, inputs: Mapping[str, np.ndarray],
                           scalars: Mapping[str, Any],
                           outputs: Mapping[str, np.ndarray]) -> tuple[bool, str]:
    """Compare the written tensors with the reference interpreter, at ``pto run``'s default
    tolerances (f32 rtol 1e-5 / atol 1e-6, 1e-4 / 1e-4 with matmul)."""
    module = program.module
    fn = module.functions[module.entry]
    modes = tensor_modes(module, scalars, fn.name)
    want = run_module(module, inputs, scalars, entry=fn.name)
    lines, ok = [], True
    for name, w in want.items():
        if modes[name] not in ("out", "inout"):
            continue
        rtol, atol = default_tolerance(fn.memrefs[name].dtype, module)
        c = compare(name, outputs[name], w, rtol, atol)
        ok &= c.ok
        lines.append(c.line())
    return ok, "\n".join(lines)


def run_host_and_compare(program: Program, exe: str | Path, *, cross: str = "",
                         workers: int = 2, work_dir: Path) -> tuple[bool, str]:
    inputs, scalars = program_inputs(program)
    outputs = run_host(exe, inputs, scalars, work_dir, cross=cross, workers=workers)
    ok, report = compare_with_reference(program, inputs, scalars, outputs)
    return ok, f"{program.path}: {'OK' if ok else 'MISMATCH'}\n{report}"


def example_programs(directory: str | Path | None = None) -> list[Path]:
    """Program files of ``directory`` (default the checkout's ``examples/``): ``.pto`` and
    ``.ptoas`` files, and Python files defining ``build_module``."""
    d = Path(directory) if directory is not None else _checkout() / "examples"
    return [p for p in sorted(d.glob("*")) if is_program(p)]


def run_scons(*args: str, timeout: float = 900, top: Path | None = None
              ) -> subprocess.CompletedProcess:
    """Run SCons on the checkout's SConstruct with this interpreter (``-Q -j2`` added), in the
    checkout or, with ``top``, in that folder: SCons then names what it builds there relative
    to it, so an SCons cache (``cache=``, keyed by each file's path) serves the same build made
    in another such folder. Relative paths in ``args`` are relative to where SCons runs."""
    import sys
    where = ["-C", str(top), "-f", str(_checkout() / "SConstruct")] if top else ["-C", str(_checkout())]
    cmd = [sys.executable, "-c", "import SCons.Script; SCons.Script.main()", *where,
           "-Q", "-j2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _checkout() -> Path:
    from .resources import checkout_root
    root = checkout_root()
    if root is None:
        raise PTOError("the examples and the repository's SConstruct are in a source checkout; "
                       "this pto_core is an installed package")
    return root
