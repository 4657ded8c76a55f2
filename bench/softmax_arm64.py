"""Fused softmax f32 on the arm64 backend (portable C on this x86 host) vs numpy, same arrays.

    python bench/softmax_arm64.py [--workers 2] [--rounds 5] [--repeat 10] [--sizes 8192,65536]
                                  [--opt native|release]

PTO variants per size: a single fused kernel per 64-row tile (load, row max, subtract, exp,
row sum, divide, store: one task per tile, the element loops fused by the emitter) and the
five-kernel example (examples/fused_softmax.py: row max, subtract, exp, row sum, divide as five
tasks per tile, with 8-row tiles as written and with 64-row tiles). Each is built with range
tasks (the default: the tile loop is one range per kernel, which the runtime splits into chunks
per worker) and, as its "no ranges" twin, without (one task per tile; ``--no-range-twins``
leaves the twins out).

numpy does the same math in f32 on the same input: ``e = exp(x - max); e / sum(e)``, once as
written (allocating its temporaries and result on every call, as numpy code usually does) and
once into preallocated ``out=`` buffers (numpy's best case: no allocation, no page faults).
PTO writes into preallocated outputs; every contender runs once before timing.

Peers a CPU user would pick, when importable (else named as skipped): ``torch.softmax(out=)``
with 2 threads (``torch.set_num_threads(2)``) and with 1 (torch's OpenMP threads spin and suffer
badly when the machine is oversubscribed; the 1-thread figure shows how much), and a numba
``@njit(parallel=True, fastmath=True)`` row softmax over 2 threads. They are optional: the
project's set-up does not install them.

All contenders are timed in the same run, in interleaved rounds (see :func:`time_in_rounds`);
the table shows the median time of a call, the CPU time of a call (all threads: work plus
spinning, which the machine's load distorts least), the minor page faults per call (first
touches of freshly mapped memory), the context switches per call (threads that waited or were
preempted: what a busy machine makes expensive) and each reference's time over the contender's (> 1: the
contender is faster): numpy as written, numpy ``out=``, and each peer present.
Goals with 2 workers, fused kernel: >= 3x numpy, and at least torch's speed (2 threads).
Figures and what they mean under load: bench/README.md.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from pto_core import PTOModule  # noqa: E402
from pto_core.driver import build_module, build_root  # noqa: E402
from pto_core.abi import PTOTensor  # noqa: E402
from pto_core.options import RANGE_TASKS_OPTION, CompileOptions  # noqa: E402
from pto_core.codegen.orchestration import c_module_name  # noqa: E402
from _softmax import fused_softmax_module as shared_fused_softmax  # noqa: E402

COLS = 128
#: the reference columns of the table besides numpy's: label prefix -> column name
REF_NAMES = {"torch.softmax (2": "torch2", "torch.softmax (1": "torch1", "numba": "numba"}


def fused_softmax_module(tile_rows: int = 64) -> PTOModule:
    """One InCore kernel per tile of ``tile_rows`` rows does the whole softmax."""
    return shared_fused_softmax(COLS, tile_rows, "softmax_fused", "softmax_rows")


def numpy_softmax(x: np.ndarray) -> np.ndarray:
    """The textbook f32 softmax over rows, allocating as numpy code does."""
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class NumpyInto:
    """The same math into preallocated buffers (``out=``): numpy without allocations."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x
        self.e = np.empty_like(x)
        self.y = np.empty_like(x)
        self.m = np.empty((x.shape[0], 1), x.dtype)
        self.s = np.empty((x.shape[0], 1), x.dtype)

    def __call__(self) -> np.ndarray:
        np.max(self.x, axis=1, keepdims=True, out=self.m)
        np.subtract(self.x, self.m, out=self.e)
        np.exp(self.e, out=self.e)
        np.sum(self.e, axis=1, keepdims=True, out=self.s)
        return np.divide(self.e, self.s, out=self.y)


class TorchInto:
    """``torch.softmax`` over rows into a preallocated tensor, on ``threads`` threads (set when a
    block of calls starts: torch's thread count is process-wide)."""

    def __init__(self, torch, x: np.ndarray, threads: int) -> None:
        self.torch, self.threads = torch, threads
        self.x = torch.from_numpy(x)
        self.y = torch.empty_like(self.x)

    def enter(self) -> None:
        self.torch.set_num_threads(self.threads)

    def __call__(self) -> np.ndarray:
        self.torch.softmax(self.x, 1, out=self.y)
        return self.y.numpy()


def numba_softmax(threads: int) -> Callable[[np.ndarray, np.ndarray], None]:
    """A compiled row softmax in numba, parallel over rows on ``threads`` threads."""
    import numba

    numba.set_num_threads(threads)

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def softmax_rows(x: np.ndarray, y: np.ndarray) -> None:  # pragma: no cover - numba
        for r in numba.prange(x.shape[0]):
            m = x[r, 0]
            for c in range(1, x.shape[1]):
                m = max(m, x[r, c])
            s = np.float32(0.0)
            for c in range(x.shape[1]):
                e = np.exp(x[r, c] - m)
                y[r, c] = e
                s += e
            for c in range(x.shape[1]):
                y[r, c] /= s

    return softmax_rows


def peers(x: np.ndarray, threads: int) -> tuple[dict[str, Callable[[], object]],
                                                 dict[str, np.ndarray], list[str]]:
    """torch and numba contenders on ``x`` (those importable), their outputs, and a line for
    each peer skipped."""
    found: dict[str, Callable[[], object]] = {}
    outputs: dict[str, np.ndarray] = {}
    skipped: list[str] = []
    try:
        import torch
    except ImportError as e:
        skipped.append(f"torch skipped: {e}")
    else:
        for n in sorted({threads, 1}, reverse=True):
            t = TorchInto(torch, x, n)
            found[f"torch.softmax ({n} thread{'s' * (n > 1)})"] = t
            outputs[f"torch.softmax ({n} thread{'s' * (n > 1)})"] = t.y.numpy()
    try:
        fn = numba_softmax(threads)
    except ImportError as e:
        skipped.append(f"numba skipped: {e}")
    else:
        y = np.empty_like(x)
        label = f"numba parallel ({threads} threads)"
        found[label] = lambda: fn(x, y)
        outputs[label] = y
    return found, outputs, skipped


class Runner:
    """The built module's entry with preallocated tensors (no copies in the timed call)."""

    def __init__(self, module: PTOModule, arrays: dict[str, np.ndarray], scalars: list[int],
                 workers: int, build_dir: Path, opt: str = "native",
                 lib: Path | None = None, ranges: bool = True) -> None:
        # opt=native: -march=native; release: the host's x86-64 level (see bench/README.md).
        # One build dir per variant: two variants of one module name must not share (or
        # dlopen) one library. ``lib``: a library of the same module built before (another
        # commit), loaded instead of building. ``ranges=False``: built without range tasks
        # (one task per tile).
        name = c_module_name(module)
        if lib is None:
            opts = CompileOptions(extra=(("build_opt", opt), (RANGE_TASKS_OPTION, ranges)))
            lib = build_module("arm64", module, opts, build_dir=build_dir) / f"lib{name}.so"
        self.lib = ctypes.CDLL(str(lib))
        self.fn = getattr(self.lib, f"pto_module_run_{name}")
        fn = module.functions[module.entry]
        order = [p.name for p in fn.params if p.name in arrays]
        self.arrays = arrays
        self.t = (PTOTensor * len(order))(*[
            PTOTensor(arrays[n].ctypes.data, *arrays[n].shape, arrays[n].shape[1], 4,
                       n.encode()) for n in order])
        self.n = len(order)
        self.s = (ctypes.c_int64 * len(scalars))(*scalars)
        self.ns = len(scalars)
        self.workers = workers

    def __call__(self) -> None:
        rc = self.fn(self.t, self.n, self.s, self.ns, self.workers, 0)
        assert rc == 0, rc


def time_in_rounds(contenders: dict[str, Callable[[], object]], rounds: int,
                   repeat: int) -> dict[str, tuple[float, float, float, float]]:
    """Median seconds, minor page faults, context switches (voluntary: a thread waited;
    involuntary: it was preempted) and CPU seconds (user + system, every thread) per call of
    each contender, counted over the process. CPU time is what a loaded machine distorts
    least: it counts the work (and the spinning) of a call, not the waits.

    Each round runs every contender in turn: one untimed call (its own caches, threads and
    memory come back), then ``repeat`` timed calls. Blocks, not single calls, are interleaved:
    each contender is measured in its steady state, as when called in a loop, while a change of
    machine load during the run hits all contenders alike. The order is shuffled each round
    (seeded, so runs repeat), so no contender always follows the same one: torch's and numba's
    threads spin for a while after their calls, taking a core from whatever runs next. (A
    rotation would not do: it keeps every contender's predecessor.) A contender's
    ``enter()``, if it has one, runs before its block (untimed).
    """
    times: dict[str, list[float]] = {k: [] for k in contenders}
    faults: dict[str, int] = {k: 0 for k in contenders}
    switches: dict[str, int] = {k: 0 for k in contenders}
    cpu: dict[str, float] = {k: 0.0 for k in contenders}
    names = list(contenders)
    for i in range(rounds):
        order = list(names)
        random.Random(i).shuffle(order)
        for k in order:
            f = contenders[k]
            enter = getattr(f, "enter", None)
            if enter is not None:
                enter()
            f()
            u0 = resource.getrusage(resource.RUSAGE_SELF)
            for _ in range(repeat):
                t0 = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t0)
            u1 = resource.getrusage(resource.RUSAGE_SELF)
            faults[k] += u1.ru_minflt - u0.ru_minflt
            switches[k] += u1.ru_nvcsw + u1.ru_nivcsw - u0.ru_nvcsw - u0.ru_nivcsw
            cpu[k] += u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime
    n = rounds * repeat
    return {k: (statistics.median(times[k]), faults[k] / n, switches[k] / n, cpu[k] / n)
            for k in contenders}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10, help="timed calls per round")
    ap.add_argument("--tile-rows", type=int, default=64)
    ap.add_argument("--sizes", default="8192,65536", help="row counts, comma-separated")
    ap.add_argument("--opt", default="native", choices=("native", "release"),
                    help="build flavour of the PTO modules (default native: -march=native)")
    ap.add_argument("--baseline", type=Path, metavar="LIB",
                    help="also time this libsoftmax_fused.so (the fused kernel's library as an "
                         "earlier commit built it) as 'PTO fused, baseline': before/after in "
                         "one run")
    ap.add_argument("--no-range-twins", dest="range_twins", action="store_false",
                    help="leave out the twin of each PTO variant built without range tasks "
                         "(one task per tile; the variants use range tasks, the default)")
    args = ap.parse_args()
    import fused_softmax
    rng = np.random.default_rng(0)
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"{args.workers} workers, opt={args.opt}, median of {args.rounds} x {args.repeat} calls")
    first = True
    for rows in (int(r) for r in args.sizes.split(",")):
        x = rng.standard_normal((rows, COLS), dtype=np.float32)
        want = numpy_softmax(x)
        z = lambda c: np.zeros((rows, c), np.float32)  # noqa: E731
        tr = args.tile_rows
        variants = [
            (f"PTO fused kernel ({tr}-row)", fused_softmax_module(tr), {"x": x, "y": z(COLS)},
             [rows // tr], "y"),
            ("PTO 5-kernel example (8-row)", fused_softmax.build_module(8),
             {"input": x, "output": z(COLS), "temp_max": z(1), "temp_shifted": z(COLS),
              "temp_exp": z(COLS), "temp_sum": z(1)}, [rows // 8], "output"),
            (f"PTO 5-kernel example ({tr}-row)", fused_softmax.build_module(tr),
             {"input": x, "output": z(COLS), "temp_max": z(1), "temp_shifted": z(COLS),
              "temp_exp": z(COLS), "temp_sum": z(1)}, [rows // tr], "output"),
        ]
        contenders: dict[str, Callable[[], object]] = {
            "numpy (allocating)": lambda: numpy_softmax(x), "numpy (out= buffers)": NumpyInto(x)}
        found, outputs, skipped = peers(x, args.workers)
        contenders.update(found)
        for k, (label, module, arrays, scalars, out) in enumerate(variants):
            bdir = (build_root() / "arm64" / "bench_softmax" / args.opt
                    / f"{c_module_name(module)}_{k}")
            contenders[label] = Runner(module, arrays, scalars, args.workers, bdir, args.opt)
            outputs[label] = arrays[out]
            if args.range_twins:
                twin = {**arrays, out: z(COLS)}
                contenders[label + ", no ranges"] = Runner(
                    module, twin, scalars, args.workers, bdir.with_name(bdir.name + "_noranges"),
                    args.opt, ranges=False)
                outputs[label + ", no ranges"] = twin[out]
        if args.baseline:
            label, module, arrays, scalars, out = variants[0]
            arrays = {**arrays, out: z(COLS)}
            contenders["PTO fused, baseline"] = Runner(module, arrays, scalars, args.workers,
                                                       Path(), lib=args.baseline)
            outputs["PTO fused, baseline"] = arrays[out]
        res = time_in_rounds(contenders, args.rounds, args.repeat)
        for label, y in outputs.items():
            np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6, err_msg=label)
        refs = {"numpy/": "numpy (allocating)", "np-out/": "numpy (out= buffers)"}
        refs.update({short + "/": label for label in found
                     for key, short in REF_NAMES.items() if label.startswith(key)
                     and ("(1 thread)" not in label or short == "torch1")})
        if first:
            for line in skipped:
                print(f"# {line}")
            print(f"{'rows':>7}  {'contender':<44}{'ms':>8}{'cpu ms':>8}{'faults':>8}{'csw':>7}"
                  + "".join(f"{h:>9}" for h in refs))
            first = False
        for label, (t, faults, csw, cpu) in res.items():
            print(f"{rows:>7}  {label:<44}{t * 1e3:>8.3f}{cpu * 1e3:>8.3f}{faults:>8.0f}{csw:>7.1f}"
                  + "".join(f"{res[r][0] / t:>8.2f}x" for r in refs.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
