"""Running Slurm's commands as the calling user: here, or on a login node over SSH.

gputui adds no privilege: every command runs as whoever runs gputui, so Slurm's own
permissions decide (a user cannot cancel another's job through gputui any more than
with ``scancel``). Over SSH the command line is OpenSSH's ``ssh -o BatchMode=yes``
to ``slurm.login`` with the argv quoted for the remote shell, as ``turm --remote``
does. What a command prints is capped while it is read (``fields.MAX_OUTPUT``: a
command that prints more is stopped there and killed, and says so in one line, so a
runaway listing never fills the memory) and bounded in time; what it says on failure
becomes one line (``said``).
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from gputui.common.i18n import _
from gputui.common.printable import shown
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm.fields import MAX_OUTPUT

VERSION_MIN: Final = (22, 5)
MAX_ERR: Final = 65536
"""What is kept of a command's stderr (more is read and dropped: it is only said)."""
_READ: Final = 65536


class Done(NamedTuple):
    """A command's exit status and what it printed."""

    code: int
    out: str
    err: str
    raw: bytes = b""
    """``out`` as printed, before decoding (a byte offset is counted in these)."""


class Runner:
    """Runs Slurm's commands where ``login`` says (``local``, or ``[user@]host[:port]``)."""

    def __init__(
        self,
        login: str = "local",
        *,
        timeout_s: float = 30.0,
        ssh_config: str | None = None,
        max_output: int = MAX_OUTPUT,
    ) -> None:
        """``max_output``: the most bytes a command may print before it is stopped."""
        self.login = login
        self.max_output = max_output
        self.ssh_config = ssh_config
        self.timeout_s = timeout_s
        self._version: tuple[int, int] | None = None

    def argv(self, argv: Sequence[str]) -> list[str]:
        if self.login == "local":
            return list(argv)
        dest, _, port = (
            self.login.rpartition(":") if _has_port(self.login) else (self.login, "", "")
        )
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]
        if self.ssh_config is not None:
            ssh += ["-F", os.path.expanduser(self.ssh_config)]
        if port:
            ssh += ["-p", port]
        return [*ssh, "--", dest, shlex.join(argv)]

    def run(self, *argv: str, input: str | None = None, timeout_s: float | None = -1.0) -> Done:
        """Run one command; ``HeadError`` when it cannot be run at all. ``timeout_s``:
        how long it may take (None: no bound, as a claim that waits for GPUs;
        default: ``self.timeout_s``)."""
        limit = self.timeout_s if timeout_s == -1.0 else timeout_s
        return self.finish(self.start(*argv, input=input), argv[0], input=input, timeout_s=limit)

    def start(self, *argv: str, input: str | None = None) -> subprocess.Popen[bytes]:
        """Start one command (``finish`` collects it): a listing can run while the rest
        of the verb loads."""
        try:
            return subprocess.Popen(
                self.argv(argv),
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=os.environ.copy(),
            )
        except FileNotFoundError:
            what = argv[0] if self.login == "local" else "ssh"
            raise HeadError(
                "unreachable",
                _("Slurm's {command} is not installed here (slurm.login: {login})").format(
                    command=what, login=self.login
                ),
            ) from None
        except OSError as exc:
            raise HeadError(
                "unreachable",
                _("cannot run {command}: {error}").format(
                    command=argv[0], error=exc.strerror or exc
                ),
            ) from None

    def finish(
        self,
        proc: subprocess.Popen[bytes],
        command: str,
        *,
        input: str | None = None,
        timeout_s: float | None = None,
    ) -> Done:
        """What a started command printed, once it ends (within ``timeout_s``). Its
        output is read as it comes, up to ``max_output`` bytes: past that the command
        is killed and the answer is one line saying so."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        feeder = None
        if input is not None and proc.stdin is not None:
            feeder = threading.Thread(target=_feed, args=(proc.stdin, input.encode()), daemon=True)
            feeder.start()
        assert proc.stdout is not None and proc.stderr is not None
        out, err = bytearray(), bytearray()
        over = False
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, out)
            sel.register(proc.stderr, selectors.EVENT_READ, err)
            while sel.get_map() and not over:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    _stop(proc)
                    raise _late(command, timeout_s)
                for key, _events in sel.select(left):
                    chunk = os.read(key.fd, _READ)
                    if not chunk:
                        sel.unregister(key.fileobj)
                    elif key.data is out:
                        out += chunk
                        over = len(out) > self.max_output
                    elif len(err) < MAX_ERR:
                        err += chunk[: MAX_ERR - len(err)]
        if over:
            _stop(proc)
            raise HeadError(
                "refused",
                _(
                    "{command} printed more than {size}: stopped reading it there"
                    " (is the listing that long?)"
                ).format(command=command, size=_size(self.max_output)),
            )
        try:
            proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise _late(command, timeout_s) from None
        finally:
            _close(proc)
        if feeder is not None:
            feeder.join()
        return Done(
            proc.returncode,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace"),
            bytes(out),
        )

    def ok(self, *argv: str, input: str | None = None) -> Done:
        """Run one command that must succeed; its failure is Slurm's one line."""
        done = self.run(*argv, input=input)
        if done.code != 0:
            raise HeadError(code_of(done.err), said(argv[0], done.err))
        return done

    def version(self) -> tuple[int, int]:
        """Slurm's (major, minor), asked once."""
        if self._version is None:
            done = self.ok("sinfo", "--version")
            m = re.search(r"(\d{2})\.(\d{2})\.\d+", done.out)
            if m is None:
                raise HeadError("unreachable", f"sinfo --version: {shown(done.out.strip(), 80)}")
            self._version = (int(m.group(1)), int(m.group(2)))
            if self._version < VERSION_MIN:
                raise HeadError(
                    "unsupported",
                    _("Slurm {version} is older than 22.05").format(
                        version=f"{self._version[0]}.{self._version[1]:02d}"
                    ),
                )
        return self._version


def _feed(stdin: Any, data: bytes) -> None:
    """Write a command's input and close it (a command that exits first: nothing)."""
    try:
        stdin.write(data)
        stdin.close()
    except OSError:  # BrokenPipeError: it did not read it all
        pass


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill a command gputui stopped waiting for, and reap it."""
    proc.kill()
    proc.wait()
    _close(proc)


def _close(proc: subprocess.Popen[bytes]) -> None:
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def _late(command: str, timeout_s: float | None) -> HeadError:
    return HeadError(
        "timeout",
        _("{command} gave no answer within {seconds} s (is slurmctld up?)").format(
            command=command, seconds=f"{timeout_s or 0:g}"
        ),
    )


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def _has_port(login: str) -> bool:
    host = login.rpartition("@")[2]
    return ":" in host and host.rpartition(":")[2].isdigit()


def said(command: str, err: str) -> str:
    """Slurm's reason for a failure, in one line: its last ``error:`` line, else its
    last line, without the command's name."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    line = (errors or lines or [f"{command} failed"])[-1]
    line = re.sub(rf"^{re.escape(command)}: (?:error: )?", "", line)
    line = re.sub(r"^error: ", "", line)
    return shown(line, 300)


def code_of(err: str) -> str:
    """The head's error code that a Slurm failure is closest to."""
    low = err.lower()
    if "access/permission denied" in low or "permission denied" in low or "not authorized" in low:
        return "denied"
    if "invalid job id" in low or "invalid job id specified" in low:
        return "unknown-job"
    if "unable to contact slurm controller" in low or "connection refused" in low:
        return "unreachable"
    return "refused"
