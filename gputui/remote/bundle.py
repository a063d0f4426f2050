"""Shipping the helper over an SSH channel with nothing installed on the host (client side).

The host runs a fixed command, ``python3 -u -c '<boot>'``; only the interpreter path
is interpolated. The first stdin line is the payload: base64 of zlib of JSON with the
helper's module sources, their sha256, the entry module and argv. The boot code checks
the digest, serves the sources from memory through an import hook (package
``gputui_remote``), and calls ``entry.main(argv)``. Data never enters the shell string.
The hook answers ``get_source`` like a file loader, so the helper can hand a module's
text (the job supervisor's) to a fresh interpreter. Subfolders ship as subpackages
(``remote/sim/device.py`` is ``gputui_remote.sim.device``): a name that other names
extend (``gputui_remote.sim``) is a package, its source its ``__init__.py``, so relative
imports resolve the same shipped as installed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import zlib
from pathlib import Path

from . import HELPER_VERSION

PACKAGE = "gputui_remote"
ENTRY = PACKAGE + ".helper"
_EXCLUDE = {"bundle.py"}
"""Files of the helper's folder that stay behind (relative paths)."""

# Python 3.8-compatible; only double quotes so shlex.quote keeps it one plain word.
# The import hook is a plain class with a ModuleSpec, not importlib.abc/util: those
# pull in importlib.resources, pathlib and tempfile, ~10 ms of every helper start.
BOOT = """import sys,base64,zlib,json,hashlib,importlib
from importlib.machinery import ModuleSpec
d=json.loads(zlib.decompress(base64.b64decode(sys.stdin.buffer.readline())).decode("utf-8"))
m=d["modules"]
h=hashlib.sha256()
for k in sorted(m):
    h.update(k.encode("utf-8")+b"\\0"+m[k].encode("utf-8")+b"\\0")
if h.hexdigest()!=d["sha256"]:
    sys.stderr.write("gputui helper: payload checksum mismatch\\n")
    sys.exit(3)
class F:
    def find_spec(self,name,path=None,target=None):
        if name in m:
            return ModuleSpec(name,self,is_package=any(k.startswith(name+".") for k in m))
        return None
    def create_module(self,spec):
        return None
    def exec_module(self,mod):
        exec(compile(m[mod.__name__],"<%s>"%mod.__name__,"exec"),mod.__dict__)
    def get_source(self,name):
        return m.get(name)
sys.meta_path.insert(0,F())
sys.exit(importlib.import_module(d["entry"]).main(d["argv"]))
"""


def module_sources(root: Path | None = None) -> dict[str, str]:
    """The helper's modules by their name in the shipped package, subpackages included
    (a package by its ``__init__.py``; a folder without one is not shipped)."""
    root = root or Path(__file__).resolve().parent
    sources: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        folders = relative.parents[:-1]  # between root and the file
        if relative.as_posix() in _EXCLUDE or any(
            not (root / folder / "__init__.py").is_file() for folder in folders
        ):
            continue
        parts = relative.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        sources[".".join((PACKAGE, *parts))] = path.read_text(encoding="utf-8")
    return sources


def modules_digest(sources: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for key in sorted(sources):
        digest.update(key.encode("utf-8") + b"\0" + sources[key].encode("utf-8") + b"\0")
    return digest.hexdigest()


_PREFIX: tuple[bytes, bytes, int] | None = None


def _prefix() -> tuple[bytes, bytes, int]:
    """Everything but argv, compressed once per process: the base64 of its whole
    3-byte groups, the bytes left over, and the Adler-32 of the text it holds.

    The compressed prefix ends in a sync flush (byte-aligned, its blocks not final),
    so a host's argv goes after it as a raw deflate stream of its own, then the
    Adler-32 of the whole text: one zlib stream, as ``zlib.decompress`` reads it."""
    global _PREFIX
    if _PREFIX is None:
        sources = module_sources()
        head = {
            "version": HELPER_VERSION,
            "sha256": modules_digest(sources),
            "entry": ENTRY,
            "modules": sources,
        }
        text = json.dumps(head, separators=(",", ":"))
        data = (text[:-1] + ',"argv":').encode("utf-8")
        compressor = zlib.compressobj(9)
        body = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
        whole = len(body) - len(body) % 3
        _PREFIX = (base64.b64encode(body[:whole]), body[whole:], zlib.adler32(data))
    return _PREFIX


def helper_payload(argv: list[str]) -> bytes:
    """The first stdin line for the helper: the modules plus this host's argv (a
    fleet's connect burst makes one per host: only the argv is compressed and
    encoded each time)."""
    encoded, left, checksum = _prefix()
    tail = (json.dumps([str(a) for a in argv]) + "}").encode("utf-8")
    compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS, 1)
    deflated = compressor.compress(tail) + compressor.flush()
    trailer = zlib.adler32(tail, checksum).to_bytes(4, "big")
    return encoded + base64.b64encode(left + deflated + trailer) + b"\n"


def helper_command(python: str = "python3") -> str:
    """The fixed shell command that starts the helper; only ``python`` is interpolated."""
    return f"{shlex.quote(python)} -u -c {shlex.quote(BOOT)}"
