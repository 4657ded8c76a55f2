"""Errors raised by PTO.

Every error a user can cause is a :class:`PTOError`. It carries where it happened: the function
and the instruction (for IR problems) and, for text input, the file, line and column.

>>> str(PTOError("shape mismatch", function="softmax", instruction="TADD %c, %a, %b"))
"in function 'softmax', instruction 'TADD %c, %a, %b': shape mismatch"
"""

from __future__ import annotations


def short_repr(value: object, limit: int = 40) -> str:
    """``repr(value)`` on one line and cut short: a str longer than ``limit`` as its first
    ``limit - 3`` characters and ``...``, any other repr longer than ``limit`` likewise."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit - 3]) + "..."
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def _quoted(name: object) -> str:
    """``name`` in quotes as the user wrote it, or - when it would break the one-line message
    (a newline, a control character, 10 kB) or is no str - escaped and cut short."""
    if isinstance(name, str) and name.isprintable() and len(name) <= 128:
        return f"'{name}'"
    return short_repr(name)


class PTOError(Exception):
    """A problem with a PTO program, its build, or its run."""

    def __init__(self, message: str, *, function: str | None = None,
                 instruction: str | None = None, file: str | None = None,
                 line: int | None = None, column: int | None = None) -> None:
        self.message = message
        self.function = function
        self.instruction = instruction
        self.file = file
        self.line = line
        self.column = column
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.file is not None or self.line is not None:
            loc = self.file or "<input>"
            if self.line is not None:
                loc += f":{self.line}"
                if self.column is not None:
                    loc += f":{self.column}"
            where.append(loc)
        ctx = []
        if self.function is not None:
            ctx.append(f"in function {_quoted(self.function)}")
        if self.instruction is not None:
            ctx.append(f"instruction '{self.instruction}'")
        head = ": ".join(where + ([", ".join(ctx)] if ctx else []))
        return f"{head}: {self.message}" if head else self.message

    def with_context(self, **kw) -> "PTOError":
        """A copy with missing context filled in (existing fields win)."""
        fields = dict(function=self.function, instruction=self.instruction, file=self.file,
                      line=self.line, column=self.column)
        for k, v in kw.items():
            if fields.get(k) is None:
                fields[k] = v
        err = type(self)(self.message, **fields)
        return err


class PTOSyntaxError(PTOError):
    """Malformed `.pto` text: always carries file, line and column."""


class PTOVerifyError(PTOError):
    """A program that is well-formed text but breaks a rule of the IR."""


class PTOBackendError(PTOError):
    """A backend could not be loaded, or failed to generate, build or launch."""
