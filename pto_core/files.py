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
from typing import BinaryIO


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words."""
    return ("a regular file" if stat.S_ISREG(mode) else "a directory" if stat.S_ISDIR(mode)
            else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode)
            else "a pipe" if stat.S_ISFIFO(mode) else "a socket")


def open_regular(path: str | Path) -> BinaryIO:
    """The regular file ``path``, open for reading in binary; an :class:`OSError` (its
    ``strerror`` says why) where it cannot be opened or is no regular file."""
    # O_NONBLOCK: opening a pipe must not wait for a writer before it is refused
    f = open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
    mode = os.fstat(f.fileno()).st_mode
    if not stat.S_ISREG(mode):
        f.close()
        raise OSError(errno.EINVAL, f"not a regular file ({file_kind(mode)})")
    return f


def read_regular(path: str | Path) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`)."""
    with open_regular(path) as f:
        return f.read()
