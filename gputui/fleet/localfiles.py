"""Reading the local files that hosts.yaml and ssh_config name (keys, known_hosts).

They are read on the event loop, at every connection attempt: a FIFO there would
block ``open`` until something writes to it, and freeze every host with it; a device
would be read for ever. So only a regular file is read, opened without blocking, and
only up to a size no real key or known_hosts file comes near.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def read_regular_file(path: str | Path, limit: int) -> bytes:
    """The first ``limit`` bytes of ``path``; ``OSError`` when it is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO or device)", str(path))
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
