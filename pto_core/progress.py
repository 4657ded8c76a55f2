"""Terminal progress for long jobs (compiling many functions, SCons builds).

It draws one self-overwriting line on a terminal and prints nothing at all otherwise: when the
stream is not a TTY, when ``CI`` is set, when ``TERM=dumb``, or when ``PTO_PROGRESS=0``
(``PTO_PROGRESS=1`` forces it on). Logs and CI output therefore stay clean.

>>> import io
>>> with Progress(3, "compile", stream=io.StringIO()) as p:   # not a TTY: silent
...     p.advance(item="rowmax")
>>> p.done, p.enabled
(1, False)
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, TextIO

__all__ = ["progress_enabled", "Progress", "scons_progress_callback", "install_scons_progress"]


def progress_enabled(stream: TextIO | None = None) -> bool:
    """Whether progress should be drawn on ``stream`` (default stderr)."""
    force = os.environ.get("PTO_PROGRESS", "").strip().lower()
    if force in ("0", "no", "off", "false"):
        return False
    if force in ("1", "yes", "on", "true"):
        return True
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:        # closed stream
        return False


class Progress:
    """``[ 3/40] label: item`` on one line, redrawn at most every ``interval`` seconds.
    ``total=0`` means unknown (a counter without a bar)."""

    def __init__(self, total: int, label: str = "", *, stream: TextIO | None = None,
                 enabled: bool | None = None, interval: float = 0.1) -> None:
        self.total, self.label, self.done = int(total), label, 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.interval = interval
        self._last = 0.0
        self._width = 0

    def advance(self, n: int = 1, item: str = "") -> None:
        """Count ``n`` more units done; ``item`` names what is being worked on."""
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self.interval and self.done != self.total:
            return
        self._last = now
        if self.total:
            w = len(str(self.total))
            bar = f"[{self.done:>{w}}/{self.total}]"
        else:
            bar = f"[{self.done}]"
        text = f"{bar} {self.label}{': ' if self.label and item else ''}{item}"
        # pad with spaces so a shorter line fully covers the previous one
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        """Clear the line (only if something was drawn)."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def scons_progress_callback(stream: TextIO | None = None) -> Callable[[Any], None] | None:
    """A function for SCons ``Progress(fn)`` that shows the node being evaluated, or ``None``
    when progress should stay quiet (not a TTY, CI)."""
    stream = stream if stream is not None else sys.stderr
    if not progress_enabled(stream):
        return None
    p = Progress(0, "scons", stream=stream, enabled=True)

    def show(node: Any) -> None:
        p.advance(item=str(node)[-60:])
    show.progress = p           # type: ignore[attr-defined]  (lets a caller close the line)
    return show


def install_scons_progress(stream: TextIO | None = None) -> bool:
    """Call from an SConstruct: registers :func:`scons_progress_callback` with SCons when on a
    terminal. Returns whether it did."""
    cb = scons_progress_callback(stream)
    if cb is None:
        return False
    from SCons.Script import Progress as SConsProgress   # only importable inside SCons
    SConsProgress(cb, interval=1)
    return True
