"""Hostile names in every role, on every backend that builds here.

A name that C, libc, libm, CUDA, the PTO-ISA headers or the runtime also define (``exit``,
``errno``, ``INFINITY``, ``PTO_OK``, ``TLOAD``...) is a valid PTO name: generated code gives it
a prefix of its own (:mod:`pto_core.codegen.cnames`), so programs using such names build and
compute what the reference interpreter computes. What cannot be a name (keywords, the reserved
prefixes, comment terminators, path separators, over-long names) is rejected when the program
is built, with a PTOError naming the function.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from pto_core import ElementType as T
from pto_core import MemorySpace as M
from pto_core import PTOError, PTOFunctionBuilder, PTOModule, plugins
from pto_core import driver
from pto_core.names import MAX_NAME_LENGTH
from pto_core.reference import run_module

pytestmark = pytest.mark.slow     # compiles and runs generated code: the full suite's part

#: valid names that collide with something in C, libc, libm, CUDA, PTO-ISA, the runtime or
#: the generated code's own helpers
HOSTILE = [
    "exit", "errno", "stdout", "stderr", "sqrtf", "expf", "malloc", "free", "printf", "memcpy",
    "INFINITY", "NAN", "PTO_ARG_INPUT", "PTO_OK", "PTO_EINVAL", "a", "user", "typeof",
    "_Float16", "assert", "abs", "fmaxf", "isnan", "offsetof", "EOF", "INT64_MAX", "y0",
    "index", "TLOAD", "TASSIGN", "Tile", "std", "dim3", "cudaMalloc", "AICORE", "tensors",
    "scalars", "PTOTaskArg", "pto", "PTO", "i", "x" * MAX_NAME_LENGTH,
]

#: what cannot be a name, and a word the error must contain
REJECTED = [
    ("float", "keyword"), ("threadIdx", "keyword"), ("template", "keyword"),
    ("NULL", "reserved"), ("main", "reserved"), ("int32_t", "reserved"),
    ("pto_task_submit", "prefix"), ("_pto_ld_x", "prefix"), ("__x", "prefix"),
    ("x */ int y; /*", "identifier"), ("a/b", "identifier"), ("../x", "identifier"),
    ("a b", "identifier"), ("", "identifier"), ("1x", "identifier"), ("\u00e9t\u00e9", "identifier"),
    ("x\n", "identifier"), ("x" * (MAX_NAME_LENGTH + 1), "characters long"),
]

ROLES_PER_KERNEL = 13
ROWS, COLS = 4, 8


#: the names nvcc sees in CUDA's own headers, for the compile-only check (a whole rotation of
#: HOSTILE is 84 kernels: cuda_sim already runs the same sources)
CUDA_HOSTILE = ["dim3", "cudaMalloc", "exit", "errno", "INFINITY", "NAN", "std", "expf",
                "PTO_OK", "printf", "abs", "typeof", "Tile", "_Float16"]


def hostile_module(kernels_hostile: bool, names: list[str] = HOSTILE) -> PTOModule:
    """One kernel and one orchestration function per hostile name, the names rotated over
    every role: kernel function, its two memrefs, scalar parameter, two tiles and scalar
    local; orchestration function, its two memrefs, loop bound, scale, loop variable and
    scalar local. Kernel or orchestration functions take the hostile names (function names
    share one namespace); the other kind gets plain ones."""
    def _name(k: int, role: int) -> str:
        return names[(k + role) % len(names)]

    m = PTOModule("hostile-names.v1")
    n = len(names)
    entry = PTOFunctionBuilder("entry", module=m).not_in_core()
    for k in range(n):
        entry.memref(f"in{k}", M.GLOBAL, T.F32).memref(f"out{k}", M.GLOBAL, T.F32)
    entry.scalar("tiles", T.I64)
    for k in range(n):
        kern = _name(k, 0) if kernels_hostile else f"kern{k}"
        orch = f"orch{k}" if kernels_hostile else _name(k, 7)
        src, dst, s, t1, t2, loc = (_name(k, r) for r in range(1, 7))
        (PTOFunctionBuilder(kern, module=m).in_core()
            .memref(src, M.GLOBAL, T.F32).memref(dst, M.GLOBAL, T.F32)
            .scalar(s, T.F32, param=True).tile(t1, ROWS, COLS, T.F32)
            .tile(t2, ROWS, COLS, T.F32).scalar(loc, T.F32)
            .scalar_mul(loc, s, 2.0)
            .load(t1, src).adds(t2, t1, s).muls(t2, t2, loc).exp(t2, t2).store(dst, t2)
            .build())
        a, b, bound, alpha, var, off = (_name(k, r) for r in range(8, 14))
        (PTOFunctionBuilder(orch, module=m).not_in_core()
            .memref(a, M.GLOBAL, T.F32).memref(b, M.GLOBAL, T.F32)
            .scalar(bound, T.I64, param=True).scalar(alpha, T.F32, param=True)
            .scalar(off, T.I64)
            .for_loop(var, 0, bound, 1)
                .scalar_add(off, var, 0)
                .call(kern, {src: (a, off, 0), dst: (b, off, 0), s: alpha})
            .end_for()
            .build())
        entry.call(orch, {a: f"in{k}", b: f"out{k}", bound: "tiles", alpha: 0.01 * (k + 1)})
    entry.build()
    m.set_entry("entry")
    return m


def _inputs(m: PTOModule, tiles: int = 3) -> tuple[dict, dict]:
    rng = np.random.default_rng(7)
    tensors = {}
    for k in range(len(HOSTILE)):
        tensors[f"in{k}"] = rng.standard_normal((ROWS * tiles, COLS)).astype(np.float32)
        tensors[f"out{k}"] = np.zeros((ROWS * tiles, COLS), np.float32)
    return tensors, {"tiles": tiles}


def _runnable() -> list[str]:
    names = {b.name for b in plugins.list_backends() if b.driver.can_run()[0]}
    return [t for t in ("arm64", "cuda_sim", "ascend_a2a3", "ascend_a5") if t in names]


@pytest.mark.parametrize("kernels_hostile", [True, False], ids=["kernels", "orchestration"])
@pytest.mark.parametrize("target", _runnable())
def test_hostile_names_build_and_match_the_reference(tmp_path, target, kernels_hostile):
    m = hostile_module(kernels_hostile)
    tensors, scalars = _inputs(m)
    want = run_module(m, tensors, scalars)
    got = driver.launch(target, m, tensors, scalars, build_dir=tmp_path / "b")
    for k in range(len(HOSTILE)):
        np.testing.assert_allclose(got[f"out{k}"], want[f"out{k}"], rtol=1e-5, atol=1e-6,
                                   err_msg=f"kernel {k} on {target}")
    assert all(np.any(want[f"out{k}"] != 0) for k in range(len(HOSTILE)))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_hostile_names_compile_with_nvcc(tmp_path):
    if "cuda" not in {b.name for b in plugins.list_backends()}:
        pytest.skip("the pto-cuda plugin is not installed")
    bdir = driver.build_module("cuda", hostile_module(True, CUDA_HOSTILE), build_dir=tmp_path)
    assert (bdir / "libhostile_names_v1.so").is_file()


@pytest.mark.parametrize("target", ["arm64", "cuda_sim", "ascend_a5"])
def test_user_names_reach_generated_code_only_inside_prefixed_symbols(target):
    """The sources generated with hostile names equal those generated with plain marker
    names once each ``<prefix><hostile>`` is read as ``<prefix><marker>`` (comments and
    string literals, which show the user's names, left out): so a user name never stands
    in the code by itself, where a macro or library symbol of the same name would take it."""
    import re
    if target not in {b.name for b in plugins.list_backends()}:
        pytest.skip(f"backend {target} is not installed")
    markers = [f"zz{k}" for k in range(len(HOSTILE))]
    prefixes = ("pto_v_", "pto_kernel_", "pto_orch_", "_pto_body_", "pto_aicore_")

    def renamed(word: str, rename: dict) -> str:
        """``word`` with the user name it starts with (``exit`` of ``exit_block``) renamed."""
        if word in rename:
            return rename[word]
        for h in sorted(rename, key=len, reverse=True):
            if word.startswith(h + "_"):
                return rename[h] + word[len(h):]
        return word

    def plain(file: str, rename: dict) -> str:
        """``file`` of the hostile module named as the markers' module names it: its user name
        renamed, without the number a name that equals another but for case gets (PTO.1.c
        beside pto.c); the markers never clash."""
        head, *rest = file.split(".")
        if len(rest) >= 2 and rest[0].isdigit():
            rest = rest[1:]
        return ".".join([rename.get(head, head), *rest])

    def code(texts: dict, rename: dict | None) -> list[str]:
        out = []
        for name in sorted(texts):
            t = re.sub(r"/\*.*?\*/|//[^\n]*|\"(\\.|[^\"\\])*\"", "", texts[name], flags=re.S)
            if rename:
                t = re.sub(r"(" + "|".join(prefixes) + r")(\w+)\b",
                           lambda mo: mo.group(1) + renamed(mo.group(2), rename), t)
            out.append(t)
        return out

    for hostile in (True, False):
        opts = driver.CompileOptions()
        b = driver.generate(target, hostile_module(hostile, markers), opts)
        rename = dict(zip(HOSTILE, markers))
        files_a = {plain(n, rename): t
                   for n, t in driver.generate(target, hostile_module(hostile), opts).items()}
        assert sorted(files_a) == sorted(b)
        assert code(files_a, rename) == code(b, None)


def test_hostile_entry_names_through_the_host_program(tmp_path):
    """The entry's tensors and scalars name `.npy` files and command-line values of the host
    program: hostile names work there too."""
    import subprocess
    m = PTOModule("m")
    (PTOFunctionBuilder("exit", module=m).in_core()
        .memref("errno", M.GLOBAL, T.F32).memref("stdout", M.GLOBAL, T.F32)
        .scalar("INFINITY", T.F32, param=True).tile("NAN", ROWS, COLS, T.F32)
        .load("NAN", "errno").muls("NAN", "NAN", "INFINITY").store("stdout", "NAN").build())
    bdir = driver.build_module("arm64", m, build_dir=tmp_path / "b")
    x = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS)
    np.save(tmp_path / "errno.npy", x)
    np.save(tmp_path / "stdout.npy", np.zeros_like(x))
    r = subprocess.run([str(bdir / "m_host"), "-i", str(tmp_path), "-o", str(tmp_path),
                        "INFINITY=2.5"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "stdout.npy"), x * np.float32(2.5))


ROLES = ["incore function", "orchestration function", "memref", "scalar parameter", "tile",
         "scalar local", "loop variable"]


def _program_with(role: str, name: str) -> PTOModule:
    """A small program with ``name`` in ``role`` and plain names elsewhere."""
    def nm(r: str, plain: str) -> str:
        return name if r == role else plain
    m = PTOModule("m")
    (PTOFunctionBuilder(nm("incore function", "k"), module=m).in_core()
        .memref(nm("memref", "src"), M.GLOBAL, T.F32).memref("dst", M.GLOBAL, T.F32)
        .scalar(nm("scalar parameter", "s"), T.F32, param=True)
        .tile(nm("tile", "t"), ROWS, COLS, T.F32)
        .load(nm("tile", "t"), nm("memref", "src"))
        .muls(nm("tile", "t"), nm("tile", "t"), nm("scalar parameter", "s"))
        .store("dst", nm("tile", "t")).build())
    (PTOFunctionBuilder(nm("orchestration function", "orch"), module=m).not_in_core()
        .memref("a", M.GLOBAL, T.F32).memref("b", M.GLOBAL, T.F32)
        .scalar("n", T.I64, param=True).scalar(nm("scalar local", "o"), T.I64)
        .for_loop(nm("loop variable", "i"), 0, "n", 1)
            .scalar_add(nm("scalar local", "o"), nm("loop variable", "i"), 0)
            .call(nm("incore function", "k"), {nm("memref", "src"): ("a", nm("scalar local", "o"), 0),
                                                "dst": ("b", nm("scalar local", "o"), 0),
                                                nm("scalar parameter", "s"): 2.0})
        .end_for().build())
    return m


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name,why", REJECTED, ids=[repr(n[:12]) for n, _ in REJECTED])
def test_names_that_cannot_be_names_are_rejected_when_built(role, name, why):
    with pytest.raises(PTOError) as e:
        _program_with(role, name)
    assert why in str(e.value)
    if role in ("incore function", "orchestration function"):
        return
    fn = "k" if role in ("memref", "scalar parameter", "tile") else "orch"
    assert f"'{fn}'" in str(e.value)


@pytest.mark.parametrize("name", ["m */ int injected; /*", "../../escaped", "a/b", "..", "",
                                  "x" * (MAX_NAME_LENGTH + 1), "m\n#include <stdio.h>", 7])
def test_module_names_that_could_reach_a_path_or_a_comment_are_rejected(name):
    with pytest.raises(PTOError, match="module name"):
        PTOModule(name)


def test_module_names_with_dots_and_dashes_build(tmp_path):
    m = _program_with("tile", "t")
    m2 = PTOModule("softmax-v2.1")
    for f in m.functions.values():
        m2.add_function(f)
    out = driver.launch("arm64", m2, {"a": np.ones((ROWS, COLS), np.float32),
                                      "b": np.zeros((ROWS, COLS), np.float32)}, {"n": 1},
                        build_dir=tmp_path / "b")
    np.testing.assert_array_equal(out["b"], np.full((ROWS, COLS), 2.0, np.float32))


def test_injected_module_name_cannot_run_code(tmp_path, capsys):
    """The reproducer of the injection: the name is refused before anything is generated."""
    with pytest.raises(PTOError):
        PTOModule('m */ __attribute__((constructor)) static void pto_injected(void) '
                  '{ puts("INJECTED CODE RAN"); } /*')
    assert "INJECTED" not in capsys.readouterr().out
