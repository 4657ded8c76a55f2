"""A generated kernel's resources and machine code, read from the CUDA toolchain.

:func:`kernel_resources` compiles one generated ``.cu`` file for one architecture to a cubin
(``nvcc -cubin -arch=sm_XY -Xptxas -v``) and reads:

* from ptxas: registers per thread, spill stores and loads, stack frame, static shared memory
  and barriers of the kernel's ``__global__`` function;
* from the ``PTO_CUDA_KERNEL(name, args, threads, smem)`` line of the source (or
  ``PTO_CUDA_KERNEL_SM90(..., tensor-map operands, fallback)``): threads per block and dynamic
  shared memory per block (what the executor launches with);
* from ``cuobjdump -sass`` (the ``nvidia-cuda-cuobjdump`` wheel, or the toolkit's): every SASS
  instruction, counted by mnemonic (:func:`sass_counts`) and by class (:func:`sass_mix`), and how
  a thread loads global memory: the widest load and how many loads it issues before it waits
  for one (:func:`global_load_shape`).

What the toolchain printed is cached on disk (``<build root>/cuda/perf/``) keyed by the source,
the headers it includes, the architecture and the toolchain, so an unchanged kernel is compiled
once, whichever of its functions is asked for (an sm_90a kernel's file also holds its sm_80
fallback and its range grid).

>>> sass_counts(["LDG.E.128.CONSTANT", "STS.128", "LDG.E.128.CONSTANT", "BAR.SYNC"])
{'LDG': 2, 'STS': 1, 'BAR': 1}
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from pto_core.errors import PTOBackendError

from .. import scons_tool

#: SASS mnemonics by the class the card reports (Nsight's instruction-mix rows)
SASS_CLASSES: dict[str, tuple[str, ...]] = {
    "tensor": ("HMMA", "HGMMA", "IMMA", "IGMMA", "DMMA", "QMMA", "BMMA"),
    "async copy": ("LDGSTS", "UTMALDG", "UBLKCP", "UTMASTG", "UTMAPF", "LDGDEPBAR"),
    "ldmatrix": ("LDSM", "STSM"),
    "shared": ("LDS", "STS"),
    "global": ("LDG", "STG"),
    "generic": ("LD", "ST"),
    "barrier": ("BAR", "SYNCS", "WARPGROUP"),
    "local": ("LDL", "STL"),
    "fp32": ("FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSEL", "FSWZADD", "FCHK"),
    "sfu": ("MUFU",),
}
_CLASS_OF = {m: c for c, ms in SASS_CLASSES.items() for m in ms}
TENSOR_CORE = frozenset(SASS_CLASSES["tensor"])
ASYNC_COPY = frozenset(SASS_CLASSES["async copy"])
#: what ends a run of global loads: another memory access, a barrier, control flow
_WAIT_CLASSES = frozenset({"async copy", "ldmatrix", "shared", "global", "generic", "barrier",
                           "local"})
_CONTROL = frozenset({"BRA", "EXIT", "RET", "CALL", "WARPSYNC"})

_KERNEL_LINE = re.compile(r"PTO_CUDA_KERNEL(?:_SM90)?\(\s*(\w+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,"
                          r"\s*(\d+)\s*(?:,\s*(\d+)\s*,[^)]*)?\)")
_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


@dataclass(frozen=True)
class KernelResources:
    """What the toolchain says about one kernel for one architecture."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_bytes: int
    static_smem: int
    dynamic_smem: int
    threads: int
    args: int = 0                   # int64 argument slots per task (the kernel ABI)
    tma_operands: int = 0           # operands loaded through tensor maps (sm_90a main loop)
    barriers: int = 0
    sass: tuple[str, ...] = field(default=(), repr=False)  # opcodes in order (empty: no cuobjdump)
    sass_note: str = ""             # why there is no SASS, when there is none

    @property
    def smem_bytes(self) -> int:
        return self.static_smem + self.dynamic_smem

    @property
    def spill_bytes(self) -> int:
        return self.spill_stores + self.spill_loads


def find_cuobjdump() -> str | None:
    """cuobjdump on PATH, in the ``nvidia-cuda-cuobjdump`` wheel, or in the CUDA toolkit."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import nvidia
        roots = [Path(p) for p in nvidia.__path__]
    except ImportError:
        roots = []
    for root in roots:
        for sub in ("cu13/bin", "cu12/bin", "cuda_cuobjdump/bin"):
            exe = root / sub / "cuobjdump"
            if exe.is_file() and os.access(exe, os.X_OK):
                return str(exe)
    home = scons_tool.cuda_home()
    if home is not None and (home / "bin" / "cuobjdump").is_file():
        return str(home / "bin" / "cuobjdump")
    return None


def parse_ptxas(text: str, symbol: str | None = None) -> dict[str, int]:
    """Registers, spills, stack, static shared memory and barriers of the ``__global__``
    function in ptxas' ``-v`` report whose name contains ``symbol`` (the first one if none
    does).

    >>> parse_ptxas("ptxas info    : Compiling entry function '_Z6k_gridv' for 'sm_90a'\\n"
    ...   "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\\n"
    ...   "ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem")["registers"]
    40
    """
    blocks: list[tuple[str, str]] = []
    for part in re.split(r"Compiling entry function '", text)[1:]:
        name, _, body = part.partition("'")
        blocks.append((name, body))
    if not blocks:
        raise PTOBackendError("ptxas reported no entry function (was -Xptxas -v given?)")
    chosen = next((b for b in blocks if symbol and symbol in b[0]), blocks[0])[1]

    def num(pattern: str) -> int:
        m = re.search(pattern, chosen)
        return int(m.group(1)) if m else 0
    return {"registers": num(r"Used (\d+) registers"),
            "spill_stores": num(r"(\d+) bytes spill stores"),
            "spill_loads": num(r"(\d+) bytes spill loads"),
            "stack_bytes": num(r"(\d+) bytes stack frame"),
            "static_smem": num(r"(\d+) bytes smem"),
            "barriers": num(r"used (\d+) barriers")}


def parse_sass(text: str, function: str | None = None) -> tuple[str, ...]:
    """The opcodes (with modifiers, without predicates and operands) of a ``cuobjdump -sass``
    listing, in order; with ``function``, only those of the functions whose (mangled) name
    contains it (an sm_90a kernel's file also holds its sm_80 fallback).

    >>> listing = ("Function : _Z6k_gridv\\n /*0000*/ HGMMA.64x128x16 ;\\n"
    ...            "Function : _ZN8pto_sm806k_sm80_gridEv\\n /*0000*/ HMMA.16816 ;\\n")
    >>> parse_sass(listing), parse_sass(listing, "k_grid")
    (('HGMMA.64', 'HMMA.16816'), ('HGMMA.64',))
    """
    if function is None:
        return tuple(m.group(1) for m in _SASS_LINE.finditer(text))
    return _opcodes_of(_sass_functions(text), function)


def _sass_functions(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """(mangled name, opcodes) of each function of a ``cuobjdump -sass`` listing, in order."""
    parts = re.split(r"Function\s*:\s*(\S+)", text)
    return [(name, tuple(m.group(1) for m in _SASS_LINE.finditer(body)))
            for name, body in zip(parts[1::2], parts[2::2])]


def _opcodes_of(functions: Iterable[tuple[str, Iterable[str]]], function: str) -> tuple[str, ...]:
    return tuple(op for name, ops in functions if function in name for op in ops)


def sass_counts(opcodes: Iterable[str]) -> dict[str, int]:
    """Static count of each mnemonic (the opcode before its first modifier)."""
    out: dict[str, int] = {}
    for op in opcodes:
        base = op.split(".", 1)[0]
        out[base] = out.get(base, 0) + 1
    return out


def sass_mix(counts: Mapping[str, int]) -> dict[str, int]:
    """Counts by class, in the order of :data:`SASS_CLASSES`."""
    mix = {c: 0 for c in SASS_CLASSES}
    for m, n in counts.items():
        if m in _CLASS_OF:
            mix[_CLASS_OF[m]] += n
    return mix


def global_load_shape(opcodes: Iterable[str]) -> tuple[int, int]:
    """(bytes of the widest global load, the longest run of global loads a thread issues
    before any other memory access, barrier or branch): how many bytes a thread has in flight
    in a load loop. ``(4, 1)`` when the kernel loads nothing from global memory.

    >>> global_load_shape(["LDG.E.128", "IMAD", "LDG.E.128", "STS.128", "BRA"])
    (16, 2)
    """
    width, best, run = 4, 1, 0
    for op in opcodes:
        base, _, mods = op.partition(".")
        if base == "LDG":
            run += 1
            best = max(best, run)
            for bits, nbytes in (("128", 16), ("64", 8)):
                if bits in mods.split("."):
                    width = max(width, nbytes)
        elif _CLASS_OF.get(base) in _WAIT_CLASSES or base in _CONTROL:
            run = 0
    return width, best


# --------------------------------------------------------------------------------------------
# Running the toolchain (cached)
# --------------------------------------------------------------------------------------------

def _cache_dir() -> Path:
    from pto_core.driver import build_root
    return build_root() / "cuda" / "perf"


def _toolchain_key(nvcc: str, cuobjdump: str | None) -> str:
    parts = []
    for exe in (nvcc, cuobjdump):
        if exe:
            st = Path(exe).resolve().stat()
            parts.append(f"{Path(exe).resolve()}:{st.st_size}:{st.st_mtime_ns}")
    for h in sorted(scons_tool.INCLUDE_DIR.iterdir()):
        parts.append(hashlib.sha256(h.read_bytes()).hexdigest())
    return "|".join(parts)


def kernel_resources(source: str, arch: str, symbol: str | None = None) -> KernelResources:
    """Resources and SASS of one generated kernel source compiled for ``arch`` (``sm_90a``)."""
    scons_tool.parse_arch(arch)
    m = _KERNEL_LINE.search(source)
    if m is None:
        raise PTOBackendError("the kernel source has no PTO_CUDA_KERNEL(...) line to read its "
                              "launch configuration from")
    symbol = symbol or f"{m.group(1)}_grid"
    threads, dynamic = int(m.group(3)), int(m.group(4))
    nvcc = scons_tool.find_nvcc()
    if nvcc is None:
        raise PTOBackendError("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda): the "
                              "performance card reads registers and spills from ptxas")
    ptxas, functions, note = _compiled(source, arch, symbol, nvcc, find_cuobjdump())
    return KernelResources(threads=threads, dynamic_smem=dynamic, args=int(m.group(2)),
                           sass=_opcodes_of(functions, symbol), sass_note=note,
                           tma_operands=int(m.group(5) or 0), **parse_ptxas(ptxas, symbol))


def _compiled(source: str, arch: str, symbol: str, nvcc: str, cuobjdump: str | None
              ) -> tuple[str, list[tuple[str, tuple[str, ...]]], str]:
    """(ptxas' report, the SASS functions, why there is no SASS) of ``source`` compiled to a
    cubin for ``arch``: read from the cache, else compiled (and cached when cuobjdump gave the
    SASS). ``symbol`` only names the kernel in an error."""
    key = hashlib.sha256("\0".join(("ptxas report and sass of a kernel source", source, arch,
                                     _toolchain_key(nvcc, cuobjdump))).encode())
    cached = _cache_dir() / f"{key.hexdigest()[:32]}.json"
    if cached.is_file():
        try:
            data = json.loads(cached.read_text())
            return (str(data["ptxas"]),
                    [(str(name), tuple(ops)) for name, ops in data["functions"]], "")
        except (ValueError, TypeError, KeyError):
            pass                        # a damaged cache entry: compile again
    with tempfile.TemporaryDirectory(prefix="pto-perf-") as tmp:
        src = Path(tmp) / "k.cu"
        src.write_text(source)
        cubin = Path(tmp) / "k.cubin"
        cmd = [nvcc, "-std=c++17", "-O3", "-cubin", f"-arch={arch}", "-Xptxas", "-v",
               *(f"-I{d}" for d in scons_tool.include_dirs()), "-o", str(cubin), str(src)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise PTOBackendError(f"nvcc -cubin -arch={arch} failed on kernel {symbol}:\n"
                                  f"{(r.stdout + r.stderr)[-3000:]}")
        ptxas = r.stdout + r.stderr
        functions: list[tuple[str, tuple[str, ...]]] = []
        note = ""
        if cuobjdump is None:
            note = "cuobjdump not found (pip install nvidia-cuda-cuobjdump)"
        else:
            d = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True)
            if d.returncode != 0:
                note = f"cuobjdump -sass failed: {d.stderr.strip()[-300:]}"
            else:
                functions = _sass_functions(d.stdout)
    if not note:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp_file = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp_file.write_text(json.dumps({"ptxas": ptxas, "functions": functions}))
        os.replace(tmp_file, cached)
    return ptxas, functions, note
