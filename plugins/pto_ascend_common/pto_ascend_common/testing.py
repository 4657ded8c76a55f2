"""Helpers the Ascend plugins' test suites share: run a program through the CPU check and
through the reference interpreter on the same seeded inputs; check an installed backend.

>>> sorted(p.name for p in example_programs())[:1]
['bgemm.py']
"""

from __future__ import annotations

from pathlib import Path
import numpy as np

from pto_core.checking import example_programs, program_inputs
from pto_core.program import load_program
from pto_core.reference import run_module

from . import cpu_check
from .arch import AscendArch


def repo_root() -> Path:
    import pto_core
    return Path(pto_core.__file__).resolve().parent.parent


def check_program(arch: AscendArch, path: Path, build_dir: Path, rtol: float = 1e-5,
                  atol: float = 1e-5, run=None) -> dict[str, float]:
    """Run ``path`` on the CPU check of ``arch`` (or through ``run``, with the signature of
    :func:`pto_ascend_common.cpu_check.run`) and on the reference interpreter; assert every
    tensor agrees; return the max abs error per tensor."""
    p = load_program(path)
    ins, _ = program_inputs(p)
    ref = run_module(p.module, ins, p.defaults)
    out = (run or cpu_check.run)(arch, p.module, build_dir, ins, p.defaults)
    return assert_agrees(ref, out, p.module.uses_matmul, f"{path.name} on {arch.name}",
                         rtol, atol)


def assert_agrees(want: dict[str, np.ndarray], got: dict[str, np.ndarray], matmul: bool,
                  what: str, rtol: float = 1e-5, atol: float = 1e-5) -> dict[str, float]:
    """Assert every tensor of ``want`` agrees with ``got``; return the max abs error per
    tensor. Programs that multiply matrices get tolerances scaled by the result's magnitude
    (accumulation order differs)."""
    errs = {}
    for name, w in want.items():
        g = got[name].astype(np.float64)
        w = w.astype(np.float64)
        scale = max(1.0, float(np.max(np.abs(w)))) if matmul else 1.0
        tol_r, tol_a = (1e-4, 1e-4 * scale) if matmul else (rtol, atol)
        np.testing.assert_allclose(g, w, rtol=tol_r, atol=tol_a,
                                   err_msg=f"{what}: tensor '{name}'")
        errs[name] = float(np.max(np.abs(g - w))) if g.size else 0.0
    return errs


#: ops whose operands must be positive in :func:`op_check_module`'s inputs
POSITIVE_OPS = ("log", "sqrt", "rsqrt")
#: (element type name, op) kernels the official CPU simulator cannot compile, which
#: :func:`op_check_module` leaves out: its TPRINT of a half tile (``_Float16`` under
#: ``__CPU_SIM`` is no ``std::is_floating_point`` and reaches an ambiguous ``operator<<``;
#: docs/ascend-fidelity.md, TPRINT)
OFFICIAL_UNBUILT = {("f16", "TPRINT")}


def op_check_module(arch: AscendArch, dtype, seed: int = 0):
    """The one-instruction kernels of every tile op on ``dtype`` tiles (24 x 40; matmul
    32 x 48 x 64; TCVT to f16, or f32 from other types) that ``arch`` generates, in one module
    (:mod:`pto_core.opcheck`), and seeded inputs: standard normal values, uniform in
    [0.25, 2) for log/sqrt/rsqrt, zeros for outputs that are not also read (TMATMUL_ACC's
    accumulator, a read-write dst); without the kernels of :data:`OFFICIAL_UNBUILT`. Returns
    (kernels, refused kernels with the backend's reasons, module, inputs)."""
    from pto_core.ir import ElementType as E
    from pto_core.ir.ops import MASK_TYPE
    from pto_core.opcheck import backend_support, build_op_module, index_inputs, mask_bits, op_kernels
    from pto_core.reference import numpy_dtype
    from pto_core.shapes import derive_shapes
    kernels = op_kernels(dtype, shape=(24, 40), matmul=(32, 48, 64),
                         convert_to=[E.F16 if dtype is E.F32 else E.F32])
    kernels, refused = backend_support(arch.name, kernels)
    kernels = [k for k in kernels if (dtype.value, k.op.name) not in OFFICIAL_UNBUILT]
    module = build_op_module(f"ops_{dtype.value}", kernels)
    fn = module.functions[module.entry]
    shapes = derive_shapes(module, {})
    rng = np.random.default_rng(seed)
    inputs = {}
    read = {k.tensor(p) for k in kernels for p, *_ in k.inputs}
    for name, t in fn.memrefs.items():
        dt = numpy_dtype(t.dtype)
        if name not in read:
            inputs[name] = np.zeros(shapes[name], dt)
            continue
        if t.dtype is MASK_TYPE and name.endswith("_mask"):      # a select's mask bits
            inputs[name] = mask_bits(*shapes[name])
            continue
        x = rng.uniform(0.25, 2.0, shapes[name]) if name.split("_")[0] in POSITIVE_OPS \
            else rng.standard_normal(shapes[name])
        inputs[name] = x.astype(np.float32).astype(dt)
    inputs.update(index_inputs(kernels))       # indices inside dst
    return kernels, refused, module, inputs


def check_installed_backend(arch: AscendArch, target: str) -> None:
    """Assert that the backend registered for ``arch`` (through its package's entry point)
    reports ``arch``'s UB and L0C capacities, ``.cpp`` kernels and the ccec ``target``."""
    from pto_core import plugins
    info = plugins.get_backend(arch.name)
    assert info.capacities["UB"] == arch.capacities["UB"], f"{arch.name}: UB capacity"
    assert info.capacities["L0C"] == arch.capacities["L0C"], f"{arch.name}: L0C capacity"
    assert info.kernel_suffix == ".cpp", f"{arch.name}: kernel suffix {info.kernel_suffix!r}"
    assert target in info.targets, f"{arch.name}: {target} not in {info.targets}"
