"""Is everything PTO's scripts need installed in this Python? Exit 0 if so, else 1 after
naming what is missing, so ``scripts/setup.sh`` runs pip only when it has something to do.

Checked without running pip: pto-core (with its ``test`` and ``graph`` extras) and every plugin
of this checkout are installed editable from here, with metadata no older than their
``pyproject.toml``; every requirement they declare is installed in a version that satisfies it.

    python3 scripts/installed.py && echo "nothing to install"
"""

from __future__ import annotations

import json
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("test", "graph")
#: where installed distributions are (not a checkout's own *.egg-info on sys.path)
SITE = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})


def installed(name: str) -> metadata.Distribution | None:
    return next(iter(metadata.distributions(name=name, path=SITE)), None)


def projects() -> list[Path]:
    """pto-core and the plugins of this checkout (the example third-party backend is installed
    by its own test)."""
    return [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]


def problems() -> list[str]:
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return ["packaging (needed to check versions)"]
    found: list[str] = []
    for project in projects():
        pyproject = project / "pyproject.toml"
        spec = tomllib.loads(pyproject.read_text())["project"]
        name = spec["name"]
        dist = installed(name)
        if dist is None:
            found.append(f"{name} (not installed)")
            continue
        where = json.loads(dist.read_text("direct_url.json") or "{}")
        if not (where.get("dir_info", {}).get("editable")
                and where.get("url", "").rstrip("/") == project.as_uri()):
            found.append(f"{name} (not installed editable from {project})")
        meta = [Path(str(dist.locate_file(f))) for f in dist.files or []
                if f.name == "METADATA" and f.parent.name.endswith(".dist-info")]
        if not meta or meta[0].stat().st_mtime < pyproject.stat().st_mtime:
            found.append(f"{name} ({pyproject.relative_to(ROOT)} changed since it was installed)")
        wanted = list(spec.get("dependencies", []))
        if project == ROOT:
            for extra in EXTRAS:
                wanted += spec.get("optional-dependencies", {}).get(extra, [])
        for text in wanted:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate():
                continue
            dep = installed(req.name)
            if dep is None:
                found.append(f"{req} (for {name}: not installed)")
                continue
            version = dep.version
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                found.append(f"{req} (for {name}: {version} installed)")
    return found


if __name__ == "__main__":
    missing = problems()
    for line in missing:
        print(f"setup: {line}", file=sys.stderr)
    sys.exit(1 if missing else 0)
