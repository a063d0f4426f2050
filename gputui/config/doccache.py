"""hosts.yaml's document as the bounded YAML reader last read it, kept for the verbs.

Every ``gputui`` verb reads hosts.yaml (for ``head:`` or ``slurm:``), and loading a
YAML parser costs more than the rest of a short verb's start. So once the bounded
reader (``gputui.config.yamlbounds``) has read a file, its document is kept, beside
the file's exact bytes, in the user's own cache
(``$XDG_CACHE_HOME/gputui``, default ``~/.cache/gputui``), and the next verb that finds
the same bytes there takes the document without loading YAML at all. Any other bytes
(an edit, however small, or another file) are read again; nothing is ever taken on a
time stamp or a size.

The cache is this user's: a file there that another user owns, or that others may
write, is ignored, as is one that is not what this module writes. A document is kept
only when JSON gives back exactly what the reader made (a YAML ``.inf`` or ``.nan``,
or a key that is not a string, is not kept: the next verb reads it again). The
standard ``json`` module: it loads in a fraction of what a faster parser's import
costs, on a document of a few hundred bytes.
Nothing here is ever an error: a cache that cannot be read or written is a cache miss.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib
from typing import Any

MAX_BYTES = (1 << 20) * 3
"""The largest cache file read: a hosts file is at most 1 MiB, its document less."""
MISSING: Any = object()
"""What ``lookup`` gives when it has no document for those bytes."""


def _dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base.startswith("/"):  # unset or relative: the spec's default
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gputui")


def _file(path: str) -> str:
    name = zlib.crc32(path.encode("utf-8", "surrogateescape"))
    return os.path.join(_dir(), f"hosts-{name:08x}.json")


def lookup(path: str, raw: bytes) -> Any:
    """The document kept for hosts file ``path`` when it held exactly ``raw``;
    ``MISSING`` otherwise."""
    try:
        fd = os.open(_file(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, ValueError):
        return MISSING
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022 or st.st_size > MAX_BYTES:
            return MISSING
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return MISSING
    finally:
        os.close(fd)
    try:
        kept = json.loads(data)
    except (ValueError, RecursionError):
        return MISSING
    if not isinstance(kept, dict) or kept.get("path") != path:
        return MISSING
    if kept.get("raw") != raw.decode("latin-1"):
        return MISSING
    return kept.get("doc")


def store(path: str, raw: bytes, doc: Any) -> None:
    """Keep ``doc``, what the bounded reader made of ``raw`` (hosts file ``path``),
    where JSON gives it back unchanged; nothing when it cannot."""
    try:
        text = raw.decode("latin-1")
        data = json.dumps(
            {"path": path, "raw": text, "doc": doc}, allow_nan=False, separators=(",", ":")
        ).encode()
        if json.loads(data) != {"path": path, "raw": text, "doc": doc}:
            return  # a key that is not a string: read it again next time
    except (TypeError, ValueError, RecursionError):  # NaN or an infinity; too deep
        return
    if len(data) > MAX_BYTES:
        return
    target = _file(path)
    folder = os.path.dirname(target)
    partial = f"{target}.{os.getpid()}.partial"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.stat(folder).st_uid != os.geteuid():
            return  # another user's cache (root run with their HOME): not ours to write
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with open(fd, "wb") as out:
            out.write(data)
        os.replace(partial, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(partial)
