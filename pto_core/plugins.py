"""Finding and loading backends.

Backends are entry points in the group ``pto.backends``. They are loaded once, lazily, on first
use, each through its one hook ``pto_register_backends`` that hands over
:class:`~pto_core.backend.Backend` objects. ``PTO_BACKENDS=a,b`` restricts loading to those
entry-point names (an allowlist; empty means all). A plugin that fails in any way while loading -
its import raises (even ``SystemExit``), a misspelt hook (caught by ``check_pending()``), its hook
raising or registering something that is not a well-formed backend - is recorded with its error
and unregistered whole; the other backends keep working. A compiler or driver method that
raises later becomes a :class:`PTOBackendError` naming the plugin and its distribution (a
:class:`PTOError` it raises on purpose passes as it is). Two plugins that provide a backend of
the same name are both reported, and that name can be used by neither until one is removed:
``get_backend`` raises, naming both distributions (an in-process :func:`register` of a taken
name is refused).

>>> pm = get_plugin_manager()
>>> isinstance(list_backends(), list)
True
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
import traceback
import dataclasses
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from . import hookspecs
from .backend import Backend, Compiler, Driver
from .errors import PTOBackendError, PTOError
from .options import CompileOptions, backend_settings

ENTRY_POINT_GROUP = "pto.backends"


@dataclass
class PluginRecord:
    """One entry point: what it is and whether it loaded. ``module`` is what the entry point
    loaded (a module, or an object such as a :class:`~pto_core.backend.Plugin`);
    ``entry_point`` is the entry point's value (``"pkg.mod:attr"``), empty for plugins
    registered in-process."""

    name: str
    distribution: str = ""
    version: str = ""
    module: ModuleType | Any | None = None
    error: str | None = None
    backends: list[Backend] = field(default_factory=list)
    hooks: list[str] = field(default_factory=list)
    entry_point: str = ""
    #: backend names another plugin provides too, each with who else does (unusable names)
    conflicts: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def who(self) -> str:
        """``plugin 'arm64' (pto-arm64 0.1.0)``: how errors name the plugin."""
        dist = f"{self.distribution} {self.version}".strip() or "registered in-process"
        return f"plugin '{self.name}' ({dist})"


_pm: pluggy.PluginManager | None = None
_records: list[PluginRecord] = []
#: backend name -> the plugins that all provide it (two or more): the name is unusable
_conflicts: dict[str, list[PluginRecord]] = {}
#: entry points that PTO_BACKENDS left out
_left_out: list[str] = []

#: what a backend name may be: it names build directories and appears in generated text
BACKEND_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


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
            _left_out.append(ep.name)
            continue
        rec = PluginRecord(ep.name, entry_point=ep.value)
        try:
            if ep.dist is not None:
                rec.distribution, rec.version = ep.dist.metadata["Name"], ep.dist.version
            _add(pm, ep.load(), ep.name, rec)
        except KeyboardInterrupt:
            raise           # the user stopping pto, not the plugin failing
        except BaseException as e:  # noqa: BLE001 - even sys.exit() at import must not end pto
            rec.error = _failure(e)
            if os.environ.get("PTO_DEBUG"):
                traceback.print_exc()
        _records.append(rec)
    _find_conflicts()


def _failure(e: BaseException) -> str:
    if isinstance(e, SystemExit):
        return f"SystemExit({e.code!r}): the plugin tried to end the program"
    return f"{type(e).__name__}: {e}"


def _add(pm: pluggy.PluginManager, plugin: Any, name: str, rec: PluginRecord) -> None:
    """Register ``plugin`` as ``name`` and fill ``rec``; on any failure nothing of it stays
    registered."""
    try:
        pm.register(plugin, name=name)
        pm.check_pending()
        rec.hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        rec.backends = [_guarded(b, rec) for b in _backends_of(plugin)]
        rec.module = plugin
    except BaseException:
        if pm.get_plugin(name) is plugin:    # not when the name was another plugin's already
            pm.unregister(name=name)
        raise


def _backends_of(plugin: Any) -> list[Backend]:
    """What ``plugin``'s ``pto_register_backends`` registers, checked: Backend objects with
    distinct names fit for file paths and generated text, a Compiler and a Driver each."""
    found: list[Any] = []
    impl = getattr(plugin, "pto_register_backends", None)
    if impl is not None:
        impl(register=found.append)
    names: set[str] = set()
    for b in found:
        if not isinstance(b, Backend):
            raise PTOBackendError(f"pto_register_backends registered {b!r:.60}: a "
                                  f"{type(b).__name__}, not a Backend")
        if not isinstance(b.name, str) or not BACKEND_NAME.fullmatch(b.name):
            raise PTOBackendError(f"pto_register_backends: backend name {b.name!r} is not a name "
                                  f"of letters, digits and '_' (at most 64, not starting with a "
                                  f"digit)")
        for part, kind in (("compiler", Compiler), ("driver", Driver)):
            if not isinstance(getattr(b, part), kind):
                raise PTOBackendError(f"pto_register_backends: backend '{b.name}' has a "
                                      f"{type(getattr(b, part)).__name__} as its {part}, not a "
                                      f"pto_core.backend.{kind.__name__}")
        if b.name in names:
            raise PTOBackendError(f"pto_register_backends: backend '{b.name}' registered twice")
        names.add(b.name)
    return found


class Guarded:
    """A backend's compiler or driver whose every method raises :class:`PTOBackendError`
    naming the plugin (a PTOError raised on purpose passes as it is; so does
    KeyboardInterrupt). ``wrapped`` is the plugin's own object."""

    def __init__(self, wrapped: Any, role: str, rec: PluginRecord) -> None:
        self.wrapped, self._role, self._rec = wrapped, role, rec

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self.wrapped, attr)
        if not callable(value):
            return value

        @functools.wraps(value)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except (PTOError, KeyboardInterrupt):
                raise
            except BaseException as e:  # noqa: BLE001 - SystemExit in a backend must not end pto
                raise PTOBackendError(f"{self._rec.who} failed in {self._role}.{attr}: "
                                      f"{_failure(e)}") from e
        return call


def _guarded(b: Backend, rec: PluginRecord) -> Backend:
    return dataclasses.replace(b, compiler=Guarded(b.compiler, "compiler", rec),
                               driver=Guarded(b.driver, "driver", rec))


def _find_conflicts() -> None:
    """Record every backend name more than one loaded plugin provides."""
    by_name: dict[str, list[PluginRecord]] = {}
    for r in _records:
        r.conflicts = []
        if r.ok:
            for b in r.backends:
                by_name.setdefault(b.name, []).append(r)
    _conflicts.clear()
    for name, recs in by_name.items():
        if len(recs) > 1:
            _conflicts[name] = recs
            for r in recs:
                r.conflicts.append(f"backend '{name}' is also provided by "
                                   + ", ".join(o.who for o in recs if o is not r))


def _conflict_error(name: str) -> PTOBackendError:
    who = " and ".join(r.who for r in _conflicts[name])
    return PTOBackendError(f"backend '{name}' is provided by {who}: neither is used; uninstall "
                           f"one, or load one with PTO_BACKENDS=<entry point name>")


def register(plugin: Any, name: str | None = None) -> PluginRecord:
    """Register an in-process plugin object (tests, notebooks). Returns its record;
    :func:`unregister` removes it. A plugin that fails to register, or provides a backend name
    an installed plugin already has, raises and leaves nothing registered.

    >>> from pto_core.backend import Plugin
    >>> class Nop(Compiler):
    ...     def generate_kernel(self, function, module, options): ...
    ...     def runtime_binding(self, module, kernels, options): ...
    >>> rec = register(Plugin(Backend("tiny", Nop(), Driver())), name="tiny-plugin")
    >>> unregister(rec.module)
    """
    pm = get_plugin_manager()
    rec = PluginRecord(name or getattr(plugin, "__name__", repr(plugin)))
    _add(pm, plugin, rec.name, rec)
    taken = {b.name: r for r in _records if r.ok for b in r.backends}
    clash = [b.name for b in rec.backends if b.name in taken]
    if clash:
        pm.unregister(name=rec.name)
        raise PTOBackendError(f"backend '{clash[0]}' of {rec.who} is already provided by "
                              f"{taken[clash[0]].who}")
    _records.append(rec)
    return rec


def unregister(plugin: Any) -> None:
    pm = get_plugin_manager()
    pm.unregister(plugin)
    _records[:] = [r for r in _records if r.module is not plugin]
    _find_conflicts()


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
    regenerate sources and invalidate launch builds when edited): the package of the module the
    entry point names, and those of the classes of each backend's compiler and driver and of
    every base class outside pto_core (a backend built from a package shared by several: that
    shared package too). A directory inside another listed one is left out.

    >>> import pto_core.backend as b
    >>> plugin_source_dirs(PluginRecord("x", module=b))    # pto_core is tracked on its own
    []
    """
    obj = rec.module
    names: list[str] = [obj.__name__] if isinstance(obj, ModuleType) else []
    for b in rec.backends:
        for part in (b.compiler, b.driver):
            names += [c.__module__ for c in type(getattr(part, "wrapped", part)).__mro__]
    if rec.entry_point:
        names.append(rec.entry_point.partition(":")[0].strip())
    dirs: list[Path] = []
    for name in names:
        d = _module_dir(name)
        if d is not None and d not in dirs:
            dirs.append(d)
    return [d for d in dirs if not any(o != d and o in d.parents for o in dirs)]


def list_backends() -> list[Backend]:
    """Backends of all plugins that loaded (a name two plugins provide is left out)."""
    return [b for r in plugin_records() if r.ok for b in r.backends if b.name not in _conflicts]


def backend_options(name: str, options: CompileOptions) -> CompileOptions:
    """``options`` for backend ``name``: the passes it does not schedule
    (:attr:`Backend.unscheduled_passes`) switched off; an option the backend does not take
    (:attr:`Backend.options`) is a PTOError naming it and the backend."""
    info = get_backend(name)
    backend_settings(name, info.options, options)
    skip = frozenset(info.unscheduled_passes)
    return dataclasses.replace(options, disable=options.disable | skip) if skip else options


def get_backend(name: str) -> Backend:
    """The backend called ``name``; a clear error names the installed ones, broken plugins,
    and the plugins that both provide ``name``."""
    get_plugin_manager()
    if name in _conflicts:
        raise _conflict_error(name)
    for b in list_backends():
        if b.name == name:
            return b
    broken = [f"{r.name} ({r.error})" for r in plugin_records() if not r.ok]
    have = ", ".join(sorted(b.name for b in list_backends())) or "none"
    msg = f"no backend named '{name}' (installed: {have})"
    if broken:
        msg += "; plugins that failed to load: " + "; ".join(broken)
    allowed = _allowlist()
    if allowed is not None:
        raw = os.environ.get("PTO_BACKENDS", "")
        msg += f"; PTO_BACKENDS={raw!r} loads only the entry points named there"
        if not set(allowed) & {r.name for r in plugin_records()}:
            msg += (f", and no installed one is named {', '.join(sorted(allowed))} (installed: "
                    f"{', '.join(sorted(_left_out)) or 'none'})")
        elif _left_out:
            msg += f" (it left out: {', '.join(sorted(_left_out))})"
    raise PTOBackendError(msg)


def can_run(b: Backend) -> tuple[bool, str]:
    """``b.driver.can_run()``, where a driver that fails or answers anything but
    ``(bool, str)`` cannot run, saying so (the other backends are not concerned)."""
    try:
        answer = b.driver.can_run()
    except PTOError as e:
        return False, str(e)
    if (not isinstance(answer, tuple) or len(answer) != 2 or not isinstance(answer[0], bool)
            or not isinstance(answer[1], str)):
        return False, f"its driver's can_run() answered {answer!r:.80}, not (bool, str)"
    return answer


def runnable_backend(name: str) -> Backend:
    """:func:`get_backend`, or a PTOError saying why its driver cannot run it here."""
    b = get_backend(name)
    ok, why = can_run(b)
    if not ok:
        raise PTOError(f"cannot run on the {name} backend here: {why}")
    return b


def _reset_for_tests() -> None:
    """Forget loaded plugins so the next call reloads entry points (tests only)."""
    global _pm
    _pm = None
    _records.clear()
    _conflicts.clear()
    _left_out.clear()
