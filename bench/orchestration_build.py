"""Task-graph build time and memory of the LLaMA-7B layer, beside the seed's published figures.

For each row of seed 000 section 4.4 (32 ... 512 tiles of 32 rows) this compiles the layer of
``examples/llama7b_layer.py`` at LLaMA-7B dimensions with ``-O2`` (binary expansion + 64-row
adaptive tiles), emits its orchestration C (``pto_core.codegen.orchestration``), builds it with the C
runtime (``runtime/``) and a small harness (:func:`pto_core.driver.build_c_sources`), and times the orchestration function building the
graph in the runtime's dry-run mode (tasks are created, dependencies resolved and retired; no
kernel runs). Tensors are placeholders: the runtime keys its tensor map on their base pointer
and checks regions against their shapes, but never touches their memory in dry-run mode.

    python bench/orchestration_build.py [--tiles 32,64,128] [--repeat 5] [--rectangles]
                                        [--callgrind]

``--rectangles`` emits the orchestration without tile arguments (every region a rectangle, the
``tile_args`` option off): the same graph, for a before/after. ``--callgrind`` also counts, with
valgrind's callgrind, the instructions of one build (the orchestration function) per task.

Memory: the seed keeps every task of the graph alive (2,864 B per task), so its memory grows
with the task count; our runtime retires tasks through a bounded window, so the figure printed
is the runtime's peak bytes (``peak_runtime_bytes``), which stays flat. Not a test: timings vary.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pto_core.codegen.orchestration import c_module_name, emit_orchestration, kernel_order  # noqa: E402
from pto_core.driver import build_c_sources                 # noqa: E402
from pto_core.ir import MemRefType                          # noqa: E402
from pto_core.options import CompileOptions                 # noqa: E402
from pto_core.passes import function_buffer_bytes, run_pipeline   # noqa: E402
from pto_core.shapes import derive_shapes                   # noqa: E402

#: seed 000 section 4.4: tiles -> (tasks, build ms, memory MB)
SEED = {32: (1_024, 0.144, 2.81), 64: (3_584, 0.444, 9.81), 128: (13_312, 1.696, 36.4),
        256: (51_200, 8.503, 140.0), 512: (200_704, 34.2, 548.0)}

#: the harness: the orchestration C is included above it (its entry is file-local)
HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "pto_runtime.h"

const PTOKernelFunc pto_kernels_%(mod)s[%(nk)d];   /* dry run: no kernel is called */
void pto_binding_setup_%(mod)s(PTORuntime* rt) { (void)rt; }

static double now_ms(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
    int64_t n = atoll(argv[1]);
    int repeat = atoi(argv[2]);
    static const int64_t shapes[][2] = { %(shapes)s };
    static const char* names[] = { %(names)s };
    PTOTensor t[%(nt)d];
    for (int i = 0; i < %(nt)d; i++) {
        t[i].data = (void*)(uintptr_t)((uint64_t)(i + 1) << 40);   /* never dereferenced */
        t[i].rows = shapes[i][0]; t[i].cols = shapes[i][1]; t[i].ld = shapes[i][1];
        t[i].elem_size = 4; t[i].name = names[i];
    }
    double best = 1e30;
    PTORuntimeStats st;
    for (int r = 0; r < repeat; r++) {
        PTORuntimeConfig cfg;
        pto_runtime_config_default(&cfg);
        cfg.num_workers = 0;
        cfg.dry_run = 1;
        PTORuntime* rt = pto_runtime_create(&cfg);
        if (!rt) { fprintf(stderr, "runtime create failed\n"); return 1; }
        int64_t scalars[1] = { n };
        double t0 = now_ms();
        const int built = pto_module_build_%(mod)s(rt, t, %(nt)d, scalars, 1);
        int rc = pto_runtime_run(rt);
        if (rc == 0 && built < 0) rc = built;
        double ms = now_ms() - t0;
        if (rc != 0) { fprintf(stderr, "run failed: %%d\n", rc); return 1; }
        pto_runtime_get_stats(rt, &st);
        pto_runtime_destroy(rt);
        if (ms < best) best = ms;
    }
    printf("%%lld %%.4f %%lld\n", (long long)st.tasks_submitted, best,
           (long long)st.peak_runtime_bytes);
    return 0;
}
"""


def _load_example():
    spec = importlib.util.spec_from_file_location("llama7b_layer",
                                                  ROOT / "examples" / "llama7b_layer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _build_instructions(exe: Path, n: int, mod: str) -> int:
    """Instructions of one build (the orchestration function `_pto_orch_<mod>`, inclusive) under
    callgrind."""
    out = exe.parent / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    f"--toggle-collect=_pto_orch_{mod}*", str(exe), str(n), "1"],
                   check=True, capture_output=True)
    summary = next(line for line in out.read_text().splitlines()
                   if line.startswith(("summary:", "totals:")))
    return int(summary.split()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default="32,64,128,256,512")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rectangles", action="store_true",
                    help="no tile arguments: every region passed as its rectangle")
    ap.add_argument("--callgrind", action="store_true",
                    help="also count the instructions per task of one build under callgrind")
    args = ap.parse_args()
    L = _load_example()
    opts = CompileOptions(opt_level=2)
    module = run_pipeline(L.build_module(**L.LLAMA7B), opts)
    entry = module.functions[module.entry]
    mems = [p.name for p in entry.params if isinstance(p.type, MemRefType)]
    mod = c_module_name(module)
    c_src = emit_orchestration(module, lambda f: function_buffer_bytes(f, opts),
                               tile_args=not args.rectangles)

    print(f"LLaMA-7B layer (hidden {L.LLAMA7B['hidden']}, {L.LLAMA7B['tile_rows']}-row tiles, "
          f"64-row adaptive blocks), orchestration built in dry-run mode, best of {args.repeat}")
    hdr = ("tiles", "tasks", "seed tasks", "build ms", "seed ms", "tasks/ms", "seed tasks/ms",
           "peak MB", "seed MB") + (("instr/task",) if args.callgrind else ())
    print(" | ".join(hdr))
    print(" | ".join("---" for _ in hdr))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for n in (int(x) for x in args.tiles.split(",")):
            shapes = derive_shapes(module, {"num_tiles": n})
            harness = HARNESS % dict(
                mod=mod, nk=max(1, len(kernel_order(module))),
                shapes=", ".join(f"{{{shapes[m][0]}, {shapes[m][1]}}}" for m in mems),
                names=", ".join(f'"{m}"' for m in mems), nt=len(mems))
            build_c_sources("bench", {"bench_host.c": c_src + harness}, tmp)
            out = subprocess.run([str(tmp / "bench_host"), str(n), str(args.repeat)], check=True,
                                 capture_output=True, text=True).stdout.split()
            tasks, ms, peak = int(out[0]), float(out[1]), int(out[2])
            s_tasks, s_ms, s_mb = SEED.get(n, (None, None, None))
            fmt = lambda v, f: "-" if v is None else f.format(v)
            row = [str(n), f"{tasks:,}", fmt(s_tasks, "{:,}"), f"{ms:.3f}", fmt(s_ms, "{:.3f}"),
                   f"{tasks / ms:,.0f}", fmt(s_tasks and s_tasks / s_ms, "{:,.0f}"),
                   f"{peak / 2**20:.2f}", fmt(s_mb, "{:.2f}")]
            if args.callgrind:
                row.append(f"{_build_instructions(tmp / 'bench_host', n, mod) / tasks:,.0f}")
            print(" | ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
