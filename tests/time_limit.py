"""A hang guard for the tests of hostile input: ``with time_limit(5): parse(text)`` raises
:class:`TimeLimit` when the block is still running after 5 s (a guard, not a measurement: what
it guards ends in milliseconds). Tests import it from beside them (``sys.path``), as the suite
imports test files by path."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator


class TimeLimit(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in PTO hides it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def on_alarm(signum, frame):
        raise TimeLimit(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
