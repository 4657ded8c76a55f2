"""Finding and loading backends.

Backends are entry points in the group ``pto.backends``. They are loaded once, lazily, on first
use. ``PTO_BACKENDS=a,b`` restricts loading to those entry-point names (an allowlist; empty means
all). A plugin that fails to import, or implements a misspelt hook (caught by
``check_pending()``), is recorded with its error and skipped; the other backends keep working.

>>> pm = get_plugin_manager()
>>> isinstance(list_backends(), list)
True
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from . import hookspecs
from .errors import PTOBackendError
from .hookspecs import BackendInfo

ENTRY_POINT_GROUP = "pto.backends"


@dataclass
class PluginRecord:
    """One entry point: what it is and whether it loaded. ``module`` is what the entry point
    loaded (a module, or an object such as a :class:`~pto_core.backend.BackendPlugin`
    instance); ``entry_point`` is the entry point's value (``"pkg.mod:attr"``), empty for
    plugins registered in-process."""

    name: str
    distribution: str = ""
    version: str = ""
    module: ModuleType | Any | None = None
    error: str | None = None
    backends: list[BackendInfo] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    entry_point: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


_pm: pluggy.PluginManager | None = None
_records: list[PluginRecord] = []


def _allowlist() -> set[str] | None:
    raw = os.environ.get("PTO_BACKENDS", "").strip()
    return {x.strip() for x in raw.split(",") if x.strip()} or None


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, loading entry points on first call."""
    global _pm
    if _pm is None:
        pm = pluggy.PluginManager("pto")
        pm.add_hookspecs(hookspecs)
        _pm = pm
        _load_entry_points(pm)
    return _pm


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    allowed = _allowlist()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if allowed is not None and ep.name not in allowed:
            continue
        rec = PluginRecord(ep.name, entry_point=ep.value)
        if ep.dist is not None:
            rec.distribution, rec.version = ep.dist.metadata["Name"], ep.dist.version
        try:
            mod = ep.load()
            pm.register(mod, name=ep.name)
            try:
                pm.check_pending()
            except pluggy.PluginValidationError:
                pm.unregister(mod)
                raise
            rec.module = mod
            rec.hooks = sorted(h.name for h in pm.get_hookcallers(mod) or [])
            rec.backends = list(_backends_of(pm, mod))
        except Exception as e:  # a broken plugin must not take the others down
            rec.error = f"{type(e).__name__}: {e}"
            rec.module = None
            if os.environ.get("PTO_DEBUG"):
                traceback.print_exc()
        _records.append(rec)


def _backends_of(pm: pluggy.PluginManager, mod: ModuleType) -> list[BackendInfo]:
    impl = getattr(mod, "pto_backends", None)
    if impl is None:
        return []
    result = impl()
    return list(result or [])


def register(plugin: Any, name: str | None = None) -> PluginRecord:
    """Register an in-process plugin object (tests, notebooks). Returns its record;
    :func:`unregister` removes it."""
    pm = get_plugin_manager()
    pm.register(plugin, name=name)
    pm.check_pending()
    rec = PluginRecord(name or getattr(plugin, "__name__", repr(plugin)), module=plugin,
                       hooks=sorted(h.name for h in pm.get_hookcallers(plugin) or []),
                       backends=_backends_of(pm, plugin))
    _records.append(rec)
    return rec


def unregister(plugin: Any) -> None:
    pm = get_plugin_manager()
    pm.unregister(plugin)
    _records[:] = [r for r in _records if r.module is not plugin]


def plugin_records() -> list[PluginRecord]:
    """Every entry point seen, loaded or not (for ``pto backends``)."""
    get_plugin_manager()
    return list(_records)


def _module_dir(name: str) -> Path | None:
    """The directory of module ``name``'s file (its package directory), or None for a module
    without a file, or one of the standard library or of pto_core."""
    top = name.partition(".")[0]
    if not name or top in ("pto_core", "builtins") or top in sys.stdlib_module_names:
        return None
    mod = sys.modules.get(name)
    if mod is None:
        try:
            mod = importlib.import_module(name)
        except Exception:   # noqa: BLE001 - an unimportable module has no sources to track
            return None
    file = getattr(mod, "__file__", None)
    return Path(file).resolve().parent if file else None


def plugin_source_dirs(rec: PluginRecord) -> list[Path]:
    """The package directories whose Python sources make up the plugin of ``rec`` (what must
    regenerate sources and invalidate launch builds when edited): for a module, its package;
    for an object, the packages of its class and of every base class outside pto_core (a
    plugin whose class comes from a package shared by several backends: that shared package
    and its own), plus the module the entry point names. A directory inside another listed one
    is left out.

    >>> import pto_core.backend as b
    >>> plugin_source_dirs(PluginRecord("x", module=b))    # pto_core is tracked on its own
    []
    """
    obj = rec.module
    names: list[str] = []
    if isinstance(obj, ModuleType):
        names.append(obj.__name__)
    elif obj is not None:
        names += [c.__module__ for c in type(obj).__mro__]
    if rec.entry_point:
        names.append(rec.entry_point.partition(":")[0].strip())
    dirs: list[Path] = []
    for name in names:
        d = _module_dir(name)
        if d is not None and d not in dirs:
            dirs.append(d)
    return [d for d in dirs if not any(o != d and o in d.parents for o in dirs)]


def list_backends() -> list[BackendInfo]:
    """Backends of all plugins that loaded."""
    return [b for r in plugin_records() if r.ok for b in r.backends]


def get_backend(name: str) -> BackendInfo:
    """The backend called ``name``; a clear error names the installed ones and broken plugins."""
    for b in list_backends():
        if b.name == name:
            return b
    broken = [f"{r.name} ({r.error})" for r in plugin_records() if not r.ok]
    have = ", ".join(sorted(b.name for b in list_backends())) or "none"
    msg = f"no backend named '{name}' (installed: {have})"
    if broken:
        msg += "; plugins that failed to load: " + "; ".join(broken)
    raise PTOBackendError(msg)


def hook() -> Any:
    """The hook relay: ``hook().pto_generate_kernel(backend=..., ...)``."""
    return get_plugin_manager().hook


def _reset_for_tests() -> None:
    """Forget loaded plugins so the next call reloads entry points (tests only)."""
    global _pm
    _pm = None
    _records.clear()
