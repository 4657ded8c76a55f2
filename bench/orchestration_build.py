"""Task-graph build time and memory of the LLaMA-7B layer, beside the seed's published figures.

For each row of seed 000 section 4.4 (32 ... 512 tiles of 32 rows) this compiles the layer of
``examples/llama7b_layer.py`` at LLaMA-7B dimensions with ``-O2`` (binary expansion + 64-row
adaptive tiles), emits its orchestration C (``pto_core.codegen.orchestration``), links it with the C
runtime (``runtime/``) and a small harness, and times the orchestration function building the
graph in the runtime's dry-run mode (tasks are created, dependencies resolved and retired; no
kernel runs). Tensors are placeholders: the runtime keys its tensor map on their base pointer
and checks regions against their shapes, but never touches their memory in dry-run mode.

    python bench/orchestration_build.py [--tiles 32,64,128] [--repeat 5]

Memory: the seed keeps every task of the graph alive (2,864 B per task), so its memory grows
with the task count; our runtime retires tasks through a bounded window, so the figure printed
is the runtime's peak bytes (``peak_runtime_bytes``), which stays flat. Not a test: timings vary.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pto_core.ir import MemRefType                          # noqa: E402
from pto_core.options import CompileOptions                 # noqa: E402
from pto_core.passes import function_buffer_bytes, run_pipeline   # noqa: E402
from pto_core.shapes import derive_shapes                   # noqa: E402

#: seed 000 section 4.4: tiles -> (tasks, build ms, memory MB)
SEED = {32: (1_024, 0.144, 2.81), 64: (3_584, 0.444, 9.81), 128: (13_312, 1.696, 36.4),
        256: (51_200, 8.503, 140.0), 512: (200_704, 34.2, 548.0)}

HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "pto_runtime.h"

const PTOKernelFunc pto_kernels_%(mod)s[%(nk)d];   /* dry run: no kernel is called */
void pto_binding_setup_%(mod)s(PTORuntime* rt) { (void)rt; }
void %(entry)s(%(proto)s);

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
        double t0 = now_ms();
        %(entry)s(rt, %(args)s, n);
        int rc = pto_runtime_run(rt);
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiles", default="32,64,128,256,512")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    try:
        from pto_core.codegen.orchestration import c_module_name, emit_orchestration, kernel_order
        from pto_core.runtime import library_path
    except ImportError as e:
        print(f"orchestration_build: needs pto_core.codegen.orchestration and the runtime binding ({e})")
        return 2
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        print("orchestration_build: no C compiler (gcc/cc) on PATH")
        return 2
    lib = Path(library_path())
    L = _load_example()
    opts = CompileOptions(opt_level=2)
    module = run_pipeline(L.build_module(**L.LLAMA7B), opts)
    entry = module.functions[module.entry]
    mems = [p.name for p in entry.params if isinstance(p.type, MemRefType)]
    mod = c_module_name(module)
    c_src = emit_orchestration(module, lambda f: function_buffer_bytes(f, opts))

    print(f"LLaMA-7B layer (hidden {L.LLAMA7B['hidden']}, {L.LLAMA7B['tile_rows']}-row tiles, "
          f"64-row adaptive blocks), orchestration built in dry-run mode, best of {args.repeat}")
    hdr = ("tiles", "tasks", "seed tasks", "build ms", "seed ms", "tasks/ms", "seed tasks/ms",
           "peak MB", "seed MB")
    print(" | ".join(hdr))
    print(" | ".join("---" for _ in hdr))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "orch.c").write_text(c_src)
        for n in (int(x) for x in args.tiles.split(",")):
            shapes = derive_shapes(module, {"num_tiles": n})
            harness = HARNESS % dict(
                mod=mod, nk=max(1, len(kernel_order(module))), entry=entry.name,
                proto="PTORuntime*, " + ", ".join("PTOTensor*" for _ in mems) + ", int64_t",
                shapes=", ".join(f"{{{shapes[m][0]}, {shapes[m][1]}}}" for m in mems),
                names=", ".join(f'"{m}"' for m in mems), nt=len(mems),
                args=", ".join(f"&t[{i}]" for i in range(len(mems))))
            (tmp / "main.c").write_text(harness)
            exe = tmp / "bench"
            subprocess.run([cc, "-O2", "-o", str(exe), str(tmp / "orch.c"), str(tmp / "main.c"),
                            f"-I{ROOT / 'runtime' / 'include'}", str(lib),
                            f"-Wl,-rpath,{lib.parent}", "-lpthread"], check=True)
            out = subprocess.run([str(exe), str(n), str(args.repeat)], check=True,
                                 capture_output=True, text=True).stdout.split()
            tasks, ms, peak = int(out[0]), float(out[1]), int(out[2])
            s_tasks, s_ms, s_mb = SEED.get(n, (None, None, None))
            fmt = lambda v, f: "-" if v is None else f.format(v)
            print(" | ".join([str(n), f"{tasks:,}", fmt(s_tasks, "{:,}"), f"{ms:.3f}",
                              fmt(s_ms, "{:.3f}"), f"{tasks / ms:,.0f}",
                              fmt(s_tasks and s_tasks / s_ms, "{:,.0f}"),
                              f"{peak / 2**20:.2f}", fmt(s_mb, "{:.2f}")]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
