"""``pto backends``: every installed backend plugin with its version, hooks and status.

    $ pto backends
    arm64  (pto-arm64 0.1.0)  ok
      backends: arm64 - ARM64 CPU: C kernels with NEON intrinsics (portable C elsewhere)
      hooks:    pto_register_backends

A plugin that failed to load is listed with its error; the others keep working. A backend name
two plugins provide is listed as a CONFLICT under both (neither is used).
``PTO_BACKENDS=a,b`` restricts which entry points are loaded.
"""

from __future__ import annotations

import argparse
import json

from .. import plugins


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser("backends", help="list installed backends",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def run(args: argparse.Namespace) -> int:
    records = plugins.plugin_records()
    if args.json:
        print(json.dumps([{
            "plugin": r.name, "distribution": r.distribution, "version": r.version,
            "status": "ok" if r.ok else "error", "error": r.error, "hooks": r.hooks,
            "conflicts": r.conflicts,
            "backends": [dict(zip(("name", "description", "can_run", "cannot_run_reason"),
                                  (b.name, b.description, *plugins.can_run(b))))
                         for b in r.backends]} for r in records], indent=2))
        return 0
    if not records:
        print("no backends installed (a backend is a package with a 'pto.backends' entry point)")
        return 0
    for r in records:
        dist = f"{r.distribution} {r.version}".strip() or "in-process"
        status = "ok" if r.ok else f"ERROR: {r.error}"
        print(f"{r.name}  ({dist})  {status}")
        for b in r.backends:
            ok, why = plugins.can_run(b)
            run_note = "" if ok else f"  [cannot run here: {why}]"
            print(f"  backend: {b.name} - {b.description}{run_note}")
        for c in r.conflicts:
            print(f"  CONFLICT: {c}")
        if r.hooks:
            print(f"  hooks:   {', '.join(r.hooks)}")
    return 0
