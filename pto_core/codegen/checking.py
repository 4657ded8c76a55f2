"""Running a built host program on `.npy` files and comparing with the reference interpreter.

Used by ``scons check`` and the backend tests. Inputs are the same seeded random tensors as
``pto run`` (the program's DEFAULTS give the scalars); the host program runs natively or under
``qemu-aarch64`` when it was cross-compiled.

>>> run_host_and_compare(program, "build/arm64/rowmax/rowmax_host")   # doctest: +SKIP
(True, '...')
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..program import Program

QEMU = {"aarch64": "qemu-aarch64"}


def program_inputs(program: Program, scalars: Mapping[str, Any] | None = None,
                   seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The tensors and scalars ``pto run`` would use for ``program``."""
    from ..commands.run import random_inputs, resolve_scalars
    from ..shapes import derive_shapes
    module = program.module
    fn = module.functions[module.entry]
    sc = resolve_scalars(fn, program.defaults, dict(scalars or {}))
    shapes = derive_shapes(module, sc, {}, entry=fn.name)
    return random_inputs(fn, shapes, program.inputs, seed), sc


def run_host(exe: str | Path, tensors: Mapping[str, np.ndarray], scalars: Mapping[str, Any],
             work_dir: Path, *, cross: str = "", workers: int = 2,
             threshold: int = 0) -> dict[str, np.ndarray]:
    """Write ``tensors`` as ``work_dir/in/<name>.npy``, run the host program, read
    ``work_dir/out/<name>.npy``."""
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
        from ..errors import PTOError
        raise PTOError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return {name: np.load(work_dir / "out" / f"{name}.npy") for name in tensors}


def compare_with_reference(program: Program, inputs: Mapping[str, np.ndarray],
                           scalars: Mapping[str, Any],
                           outputs: Mapping[str, np.ndarray]) -> tuple[bool, str]:
    """Compare the written tensors with the reference interpreter, at ``pto run``'s default
    tolerances (f32 rtol 1e-5 / atol 1e-6, 1e-4 / 1e-4 with matmul)."""
    from ..commands.run import compare, default_tolerance, tensor_modes
    from ..reference import run_module
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
    """Program files of ``directory`` (default the checkout's ``examples/``): ``.pto`` files and
    Python files defining ``build_module``."""
    d = Path(directory) if directory is not None else _checkout() / "examples"
    return [p for p in sorted(d.glob("*"))
            if p.suffix == ".pto" or (p.suffix == ".py" and "def build_module" in p.read_text())]


def run_scons(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run SCons on the checkout's SConstruct with this interpreter (``-Q -j2`` added)."""
    import sys
    cmd = [sys.executable, "-c", "import SCons.Script; SCons.Script.main()", "-C", str(_checkout()),
           "-Q", "-j2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _checkout() -> Path:
    from ..errors import PTOError
    from ..resources import checkout_root
    root = checkout_root()
    if root is None:
        raise PTOError("the examples and the repository's SConstruct are in a source checkout; "
                       "this pto_core is an installed package")
    return root
