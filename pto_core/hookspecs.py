"""The hook of PTO backend plugins (pluggy project ``"pto"``).

A backend is a pip package with an entry point in the group ``pto.backends``::

    [project.entry-points."pto.backends"]
    mybackend = "my_backend_package.plugin"

whose module (or object) implements :func:`pto_register_backends` with ``@pto_core.hookimpl``.
Everything else a backend does is a method of the objects it registers
(:mod:`pto_core.backend`), so no call has to ask "is this name mine?".
"""

from __future__ import annotations

from typing import Any, Callable

import pluggy

hookspec = pluggy.HookspecMarker("pto")
hookimpl = pluggy.HookimplMarker("pto")


@hookspec
def pto_register_backends(register: Callable[[Any], None]) -> None:
    """Call ``register(backend)`` with each :class:`pto_core.backend.Backend` this plugin
    provides (one plugin may provide several, e.g. two NPU generations). Called once, when
    the plugin loads; a backend that is not a well-formed ``Backend`` fails the whole plugin.

    >>> from pto_core.backend import Backend
    >>> @hookimpl
    ... def pto_register_backends(register):
    ...     register(Backend("mycpu", MyCompiler(), MyDriver()))
    """
