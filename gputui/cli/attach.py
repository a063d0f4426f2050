"""``gputui attach JOB`` and ``gputui run --pty``: this terminal on an interactive job's.

The job's terminal is kept on its GPU host by its supervisor, like a tmux session:
leaving (the detach key, a closed window, a dropped connection) leaves the job
running, and ``gputui attach JOB`` shows its recent output again and carries on.
Loaded only when it runs (``verbs.handler``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import select
import signal
import sys
import time
from collections.abc import Mapping
from typing import Any

from gputui.cli.args import EXIT_REFUSED, EXIT_UNREACHABLE, command_of
from gputui.common.i18n import N_, _
from gputui.common.job_words import reason_text, state_text
from gputui.scheduler.client.backend import SessionBackend
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.session import HeadSession
from gputui.scheduler.client.terminal import TerminalLink, output_of

ESCAPE = b"\x1d"
"""Ctrl-]: the detach key's first half (as telnet's)."""
DETACH = b"d"
KEYS_HELP = N_("Ctrl-] d detaches (the job goes on), Ctrl-] Ctrl-] types Ctrl-]")
FINAL = frozenset({"completed", "failed", "timeout", "killed", "cancelled"})
POLL_S = 0.25
_SIGNALS = {name: int(getattr(signal, f"SIG{name}")) for name in ("HUP", "INT", "TERM", "KILL")}


def run(backend: SessionBackend, a: argparse.Namespace) -> int:
    """``gputui attach JOB``."""
    return attach(backend, int(a.job))


def run_pty(backend: SessionBackend, a: argparse.Namespace) -> int:
    """``gputui run --pty``: queue CMD as an interactive job, wait for it, attach."""
    if not isinstance(backend, HeadSession):  # pragma: no cover (verbs requires attach)
        raise HeadError("unsupported", _("only gputui's own head keeps terminals to attach to"))
    session = backend
    command = command_of(a)
    job = session.submit_interactive(
        argv=command,
        gpus=a.gpus,
        cwd=os.getcwd(),
        pool=a.pool,
        host=a.host,
        time_limit_s=a.time,
        env=terminal_env(os.environ),
    )["job"]
    job_id = int(job["id"])
    told = False
    try:
        while job["state"] not in ("running", *FINAL):
            if not told:
                reason = reason_text(str(job.get("reason") or "")) or _("waiting")
                _say(
                    _("job {id} queued ({reason}); Ctrl+C cancels it").format(
                        id=job_id, reason=reason
                    )
                )
                told = True
            time.sleep(POLL_S)
            job = session.show(job_id)["job"]
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with contextlib.suppress(HeadError):
            session.cancel(job_id)
        _say(_("interrupted; job {id} cancelled").format(id=job_id))
        return 130
    if job["state"] in FINAL:
        _say(
            _("job {id} {state} before it could be attached ({reason})").format(
                id=job_id,
                state=state_text(str(job["state"])),
                reason=reason_text(str(job.get("reason"))),
            )
        )
        return EXIT_REFUSED
    return attach(session, job_id)


TERM_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}")


def terminal_env(environ: Mapping[str, str]) -> dict[str, str]:
    """What the job's terminal is, as this one's (``TERM``: vim and less need it),
    when it reads as a terminal type; else nothing (the host's default)."""
    term = environ.get("TERM", "")
    return {"TERM": term} if TERM_RE.fullmatch(term) else {}


def attach(backend: SessionBackend, job_id: int) -> int:
    rows, cols = _size()
    link = backend.attach(job_id, rows=rows, cols=cols)
    _say(
        _("attached to job {id} on {host}; {keys}").format(
            id=job_id, host=link.host, keys=_(KEYS_HELP)
        )
    )
    with _raw_terminal() as raw:
        outcome = Attachment(link, job_id, raw).run()
    code, text = outcome
    _say(text)
    return code


def _say(text: str) -> None:
    print(f"gputui: {text}", file=sys.stderr, flush=True)


def _size() -> tuple[int, int]:
    try:
        size = os.get_terminal_size(sys.stdout.fileno())
    except OSError:
        return 24, 80
    return max(1, min(size.lines, 10000)), max(1, min(size.columns, 10000))


@contextlib.contextmanager
def _raw_terminal() -> Any:
    """This terminal in raw mode (keys go to the job as typed), restored however we
    leave; not a terminal: as it is."""
    fd = sys.stdin.fileno()
    if not os.isatty(fd):
        yield False
        return
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        # Not TCSAFLUSH (setraw's default): keys typed ahead, before the job's
        # terminal was there, go to the job rather than nowhere.
        tty.setraw(fd, termios.TCSADRAIN)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class Left(Exception):
    """This client was told to end (SIGHUP, SIGTERM): it detaches, the job goes on."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.code = 128 + signum
        self.why = signal.Signals(signum).name


def _leave(signum: int, _frame: object) -> None:
    raise Left(signum)


class Attachment:
    """The loop: keys to the job, its output here, the window's size when it changes."""

    def __init__(self, link: TerminalLink, job_id: int, raw: bool) -> None:
        self.link = link
        self.job_id = job_id
        self.raw = raw
        self.escaped = False
        self.stdin: int | None = sys.stdin.fileno()
        self.stdout = sys.stdout.fileno()

    def run(self) -> tuple[int, str]:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous = {
            signal.SIGWINCH: signal.signal(signal.SIGWINCH, lambda *_: None),
            # Ended from outside (the window closed: SIGHUP): the terminal is put back.
            signal.SIGHUP: signal.signal(signal.SIGHUP, _leave),
            signal.SIGTERM: signal.signal(signal.SIGTERM, _leave),
        }
        old_fd = signal.set_wakeup_fd(wake_w)
        try:
            return self._loop(wake_r)
        except HeadError as exc:
            return EXIT_UNREACHABLE, _("{why}; job {id} goes on: gputui attach {id}").format(
                why=exc.message, id=self.job_id
            )
        except Left as left:
            return left.code, _("detached from job {id} ({signal}); it goes on").format(
                id=self.job_id, signal=left.why
            )
        finally:
            signal.set_wakeup_fd(old_fd)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            os.close(wake_r)
            os.close(wake_w)

    def _loop(self, wake_r: int) -> tuple[int, str]:
        while True:
            for message in self.link.messages():
                ended = self._on_message(message)
                if ended is not None:
                    return ended
            waits: list[int] = [self.link.fileno(), wake_r]
            if self.stdin is not None:
                waits.append(self.stdin)
            try:
                ready = select.select(waits, [], [])[0]
            except InterruptedError:
                continue
            if wake_r in ready:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 512)
                self.link.resize(*_size())
            if self.stdin is not None and self.stdin in ready:
                data = os.read(self.stdin, 4096)
                if not data:
                    self.stdin = None  # input closed: the output is still shown
                    continue
                if self._keys(data):
                    self.link.detach()
                    return 0, _("detached from job {id}; gputui attach {id}").format(id=self.job_id)

    def _keys(self, data: bytes) -> bool:
        """Send ``data`` to the job, but for the detach key; True: detach now."""
        out = bytearray()
        for byte in data:
            key = bytes((byte,))
            if self.escaped:
                self.escaped = False
                if key == DETACH:
                    if out:
                        self.link.send_input(bytes(out))
                    return True
                out += ESCAPE if key == ESCAPE else ESCAPE + key
            elif key == ESCAPE:
                self.escaped = True
            else:
                out += key
        if out:
            self.link.send_input(bytes(out))
        return False

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.stdout, view) :]

    def _on_message(self, message: dict[str, Any]) -> tuple[int, str] | None:
        if message.get("push") != "pty":
            if message.get("ok") is False:  # a keystroke refused: the terminal is gone
                error = message.get("error") or {}
                return EXIT_REFUSED, str(error.get("message") or _("refused"))
            return None
        kind = message.get("kind")
        if kind == "out":
            end, data = output_of(message)
            if message.get("skipped"):
                told = _("[gputui: {count} bytes not shown]").format(count=message["skipped"])
                self._write(f"\r\n{told}\r\n".encode())
            self._write(data)
            self.link.ack(end)
            return None
        if kind == "end":
            return _ended(self.job_id, message)
        why = str(message.get("why") or _("detached"))[:80]
        return EXIT_UNREACHABLE, _(
            "job {id}'s terminal was let go ({why}); it goes on: gputui attach {id}"
        ).format(id=self.job_id, why=why)


def _ended(job_id: int, message: dict[str, Any]) -> tuple[int, str]:
    """The job ended: its exit status is ours."""
    code = message.get("exit_code")
    name = str(message.get("signal") or "")
    why = message.get("why")
    number = _SIGNALS.get(name, 0)
    exited = isinstance(code, int)
    status = int(code) if isinstance(code, int) else 128 + number if number else 1
    said = _ENDED[(str(why) if why in ("time", "idle") else "", exited)]
    return status, _(said).format(id=job_id, code=code, signal=f"SIG{name or '?'}")


_ENDED = {
    ("", True): N_("job {id} ended with exit code {code}"),
    ("", False): N_("job {id} ended, killed by {signal}"),
    ("time", True): N_("job {id} ended at its time limit with exit code {code}"),
    ("time", False): N_("job {id} ended at its time limit, killed by {signal}"),
    ("idle", True): N_(
        "job {id} ended at its idle limit (no input or output) with exit code {code}"
    ),
    ("idle", False): N_(
        "job {id} ended at its idle limit (no input or output), killed by {signal}"
    ),
}
"""What ``_ended`` says, by why the job ended and whether it exited (else a signal)."""
