"""Copying a line to the terminal's clipboard, and saying truly what was done.

The console copies with OSC 52, an escape sequence the terminal acts on. Inside
tmux that sequence reaches the clipboard only when tmux lets it through: with
tmux's default ``set-clipboard external`` (and with ``off``) an application's
OSC 52 is dropped. So inside tmux (``TMUX`` is set) the console asks tmux
(``tmux show -gv set-clipboard``, a short timeout, never on the event loop's
time) and says what happened, and how to let it through when it did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from textual.app import App

from gputui.common.i18n import _
from gputui.common.tasks import within
from gputui.common.text import clean

ASK_TMUX_S = 1.0
"""Longest wait for tmux's answer; past it the setting counts as unknown."""
ENABLE = "tmux set -g set-clipboard on"


@dataclass(frozen=True, slots=True)
class Copied:
    """What came of a copy: whether it surely reached a clipboard, and in words."""

    sure: bool
    how: str


def outcome(in_tmux: bool, setting: str | None) -> Copied:
    """What a copy did, given whether the console runs inside tmux and tmux's
    ``set-clipboard`` (None: unknown)."""
    if not in_tmux:
        return Copied(True, _("sent to the terminal clipboard (OSC 52)"))
    if setting == "on":
        return Copied(True, _("sent to the clipboard through tmux (OSC 52)"))
    if setting in ("external", "off"):
        return Copied(False, _("tmux drops OSC 52: run `{command}`").format(command=ENABLE))
    return Copied(False, _("OSC 52 sent; tmux may drop it: `{command}`").format(command=ENABLE))


async def tmux_setting(env: Mapping[str, str], timeout: float | None = None) -> str | None:
    """tmux's global ``set-clipboard`` (``on``, ``external``, ``off``), or None when
    tmux is not on PATH, fails, answers something else or takes longer than
    ``timeout`` (None: ``ASK_TMUX_S``, read when asked)."""
    exe = shutil.which("tmux", path=env.get("PATH"))
    if exe is None:
        return None
    try:
        proc = await asyncio.create_subprocess_exec(
            exe,
            "show",
            "-gv",
            "set-clipboard",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=dict(env),
        )
    except OSError:
        return None
    try:
        out, _ = await within(proc.communicate(), ASK_TMUX_S if timeout is None else timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return None
    value = clean(out[:64], 16).strip().lower()
    return value if proc.returncode == 0 and value in ("on", "external", "off") else None


async def copy_line(app: App[None], line: str, env: Mapping[str, str] | None = None) -> Copied:
    """Copy ``line`` (OSC 52) and say what that did (asking tmux inside tmux)."""
    app.copy_to_clipboard(line)
    env = os.environ if env is None else env
    in_tmux = bool(env.get("TMUX"))
    return outcome(in_tmux, await tmux_setting(env) if in_tmux else None)
