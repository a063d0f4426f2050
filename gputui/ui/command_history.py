"""The ``:`` command line's history, kept per user in a small file of their own.

``$XDG_STATE_HOME/gputui/commands`` (default ``~/.local/state/gputui/commands``):
one command a line, the newest last, at most ``MAX_ENTRIES`` lines of at most
``commands.MAX_LINE`` characters. The directory is made private (0700) and the file
is written 0600 through a temporary file and a rename, so another user never reads
it and a crash never leaves half a file. A file that cannot be used (another
user's, too big, not text, unreadable) is ignored: the history starts empty and
``problem`` is the one line that says why; it is then not written over either.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from gputui.common.i18n import _
from gputui.ui.commands import MAX_LINE

MAX_ENTRIES = 200
MAX_BYTES = 64 * 1024
"""A file larger than this was not written by gputui: it is not read."""


def history_path(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """Where this user's history lives (``env``/``home``: for tests)."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME", "")
    root = Path(base) if base.startswith("/") else (home or Path.home()) / ".local" / "state"
    return root / "gputui" / "commands"


class CommandHistory:
    """The lines typed, oldest first; ``add`` appends and saves."""

    def __init__(self, path: Path | None) -> None:
        """``path`` None: a history kept in memory only."""
        self.path = path
        self.entries: list[str] = []
        self.problem: str | None = None
        """Why the file was not used (one line), or None."""
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return
        except OSError as exc:
            self._ignore(path, exc.strerror or _("cannot be read"))
            return
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_uid != os.getuid():
                self._ignore(path, _("it belongs to another user"))
                return
            if not stat.S_ISREG(st.st_mode):
                self._ignore(path, _("not a plain file"))
                return
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            self._ignore(path, _("larger than {size} KiB").format(size=MAX_BYTES // 1024))
            return
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self._ignore(path, _("not UTF-8 text"))
            return
        lines = text.splitlines()
        if any(len(line) > MAX_LINE or not line.isprintable() for line in lines):
            self._ignore(path, _("a line is too long or not printable"))
            return
        self.entries = [line for line in lines if line.strip()][-MAX_ENTRIES:]

    def _ignore(self, path: Path, why: str) -> None:
        self.problem = _("command history {path} ignored: {why}").format(path=path, why=why)
        self.path = None  # never written over: the user may want to look at it

    def add(self, line: str) -> None:
        """Remember ``line`` (once: an older copy moves to the end) and save."""
        line = line.strip()
        if not line or len(line) > MAX_LINE or not line.isprintable():
            return
        if line in self.entries:
            self.entries.remove(line)
        self.entries.append(line)
        del self.entries[:-MAX_ENTRIES]
        self._save()

    def _save(self) -> None:
        path = self.path
        if path is None:
            return
        with contextlib.suppress(OSError):  # a history that cannot be kept is no error
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            temporary = path.with_name(f".{path.name}.{os.getpid()}")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write("".join(f"{entry}\n" for entry in self.entries))
            os.replace(temporary, path)
