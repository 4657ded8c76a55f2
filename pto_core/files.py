"""Reading the files a user names (programs, `pto.toml`, ``--input`` arrays): regular files only.

A pipe would make the read wait for a writer for ever, and a device such as ``/dev/zero``
never ends; each is refused by its kind before anything is read.

>>> read_regular("/dev/zero")
Traceback (most recent call last):
...
OSError: [Errno 22] not a regular file (a character device)
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words."""
    return ("a regular file" if stat.S_ISREG(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode)
            else "a pipe" if stat.S_ISFIFO(mode) else "a socket")


def read_regular(path: str | Path) -> bytes:
    """The bytes of the regular file ``path``; an :class:`OSError` (its ``strerror`` says why)
    where it cannot be opened or read, or is no regular file."""
    # O_NONBLOCK: opening a pipe must not wait for a writer before it is refused
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"not a regular file ({file_kind(mode)})")
        return f.read()
