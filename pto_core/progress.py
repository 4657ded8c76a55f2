"""Terminal progress for long jobs (compiling many functions, SCons builds, runs).

Progress is drawn on a terminal and nothing at all is printed otherwise: when the stream is not
a TTY, when ``CI`` is set, when ``TERM=dumb``, or when ``PTO_PROGRESS=0`` (``PTO_PROGRESS=1``
forces it on; any other value is ignored with one warning). Logs and CI output therefore stay
clean.

* :class:`Phases` times the phases of one command (plugin load, codegen, build, run) and shows
  each as a rich progress bar: codegen per function, build per compiled file, run as a spinner.
* :class:`Progress` is one self-overwriting counter line (``pto compile`` of large modules).
* :func:`install_scons_progress` shows the node SCons is evaluating, and clears that line
  before SCons echoes a command, so the two never run into each other.

>>> import io
>>> with Progress(3, "compile", stream=io.StringIO()) as p:   # not a TTY: silent
...     p.advance(item="rowmax")
>>> p.done, p.enabled
(1, False)
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from typing import Any, Callable, Iterator, TextIO

__all__ = ["progress_enabled", "Phases", "Progress", "scons_progress_callback",
           "install_scons_progress", "scons_print_cmd_line"]


_OFF, _ON = ("0", "no", "off", "false"), ("1", "yes", "on", "true")
_WARNED: set[str] = set()


def progress_enabled(stream: TextIO | None = None) -> bool:
    """Whether progress should be drawn on ``stream`` (default stderr)."""
    force = os.environ.get("PTO_PROGRESS", "").strip().lower()
    if force in _OFF:
        return False
    if force in _ON:
        return True
    if force and force not in _WARNED:       # said once per value, then decided as if unset
        _WARNED.add(force)
        warnings.warn(f"PTO_PROGRESS={force!r} is none of {'/'.join(_OFF)} or "
                      f"{'/'.join(_ON)}: ignored (progress on a terminal only)",
                      RuntimeWarning, stacklevel=2)
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
    when progress should stay quiet (not a TTY, CI). Its ``print_cmd_line`` attribute is an
    SCons ``PRINT_CMD_LINE_FUNC`` that clears the progress line before echoing a command."""
    stream = stream if stream is not None else sys.stderr
    if not progress_enabled(stream):
        return None
    p = Progress(0, "scons", stream=stream, enabled=True)

    def show(node: Any) -> None:
        p.advance(item=str(node)[-60:])

    def print_cmd_line(text: str, target: Any, source: Any, env: Any) -> None:
        p.close()
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    show.progress = p                       # type: ignore[attr-defined]  (lets a caller close the line)
    show.print_cmd_line = print_cmd_line    # type: ignore[attr-defined]
    return show


_scons_callback: Callable[[Any], None] | None = None


def install_scons_progress(stream: TextIO | None = None) -> bool:
    """Call from an SConstruct: registers :func:`scons_progress_callback` with SCons when on a
    terminal (environments then take :func:`scons_print_cmd_line`). Returns whether it did."""
    global _scons_callback
    cb = scons_progress_callback(stream)
    if cb is None:
        return False
    from SCons.Script import Progress as SConsProgress   # only importable inside SCons
    SConsProgress(cb, interval=1)
    _scons_callback = cb
    return True


def scons_print_cmd_line() -> Callable[..., None] | None:
    """The ``PRINT_CMD_LINE_FUNC`` an SCons environment should use while the progress line of
    :func:`install_scons_progress` is drawn (it clears the line first), else None."""
    return getattr(_scons_callback, "print_cmd_line", None)


# --------------------------------------------------------------------------------------------
# Phases of a command
# --------------------------------------------------------------------------------------------

class Phases:
    """The timed phases of one command. On a terminal (:func:`progress_enabled`) each phase is
    a rich progress bar on ``stream`` (default stderr) while it runs; otherwise nothing is drawn.
    Either way the wall time of every phase is kept in :attr:`seconds`.

    >>> ph = Phases(enabled=False)
    >>> with ph.phase("codegen", total=2) as step:
    ...     step("rowmax"); step("softmax")
    >>> ph.skip("build", "cached")
    >>> list(ph.seconds), ph.notes
    (['codegen', 'build'], {'build': 'cached'})
    """

    def __init__(self, *, enabled: bool | None = None, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self.seconds: dict[str, float] = {}
        self.notes: dict[str, str] = {}
        self._bars: Any = None

    def _progress(self) -> Any:
        if self._bars is None:
            from rich.console import Console
            from rich.progress import (BarColumn, Progress, ProgressColumn, SpinnerColumn,
                                       TextColumn, TimeElapsedColumn)
            from rich.text import Text

            class Count(ProgressColumn):
                """``done/total`` for a counted phase, nothing for a spinner."""

                def render(self, task: Any) -> Text:
                    total = task.total
                    return Text(f"{int(task.completed)}/{int(total)}" if total else "")

            console = Console(file=self.stream, force_terminal=True)
            self._bars = Progress(SpinnerColumn(), TextColumn("{task.description:<16}"),
                                  BarColumn(), Count(), TimeElapsedColumn(),
                                  TextColumn("{task.fields[item]}"), console=console,
                                  transient=True)
            self._bars.start()
        return self._bars

    @contextlib.contextmanager
    def phase(self, name: str, total: int | None = None, label: str | None = None, *,
              show: bool = True) -> Iterator[Callable[[str], None]]:
        """Time the block as phase ``name``; the yielded ``step(item)`` counts one of ``total``
        units done (``total=None``: a spinner without a count). ``show=False`` only times it
        (for steps too short for a bar). A phase entered again adds to its time."""
        bars, task = None, None
        if self.enabled and show:
            bars = self._progress()
            task = bars.add_task(label or name, total=total, item="")
        done, limit = 0, total

        def step(item: str = "") -> None:
            nonlocal done, limit
            done += 1
            if bars is not None:
                grow = {}
                if limit is not None and done > limit:   # an estimate that was too low
                    limit = grow["total"] = done
                # drawn by rich's refresh thread; the last unit at once, so it is always seen
                bars.update(task, advance=1, item=item, refresh=done == limit, **grow)

        start = time.perf_counter()
        try:
            yield step
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
            if bars is not None:
                bars.remove_task(task)

    def skip(self, name: str, note: str) -> None:
        """Record phase ``name`` as not needed (e.g. ``"cached"``)."""
        self.seconds.setdefault(name, 0.0)
        self.notes[name] = note

    def summary(self) -> str:
        """``plugins 181 ms, codegen 95.2 ms, build 11.2 s, run 3.10 ms`` (notes in brackets)."""
        parts = []
        for name, s in self.seconds.items():
            note = self.notes.get(name)
            parts.append(f"{name} {_duration(s)}" + (f" ({note})" if note else ""))
        return ", ".join(parts)

    def close(self) -> None:
        """Stop drawing (the bars are removed from the terminal)."""
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def __enter__(self) -> "Phases":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _duration(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.3g} ms"
