"""Running Slurm's commands as the calling user: here, or on a login node over SSH.

gputui adds no privilege: every command runs as whoever runs gputui, so Slurm's own
permissions decide (a user cannot cancel another's job through gputui any more than
with ``scancel``). Over SSH the command line is OpenSSH's ``ssh -o BatchMode=yes``
to ``slurm.login`` with the argv quoted for the remote shell, as ``turm --remote``
does. What a command prints is capped (``parse.MAX_OUTPUT``) and bounded in time;
what it says on failure becomes one line (``said``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gputui.common.printable import shown
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm.parse import MAX_OUTPUT

VERSION_MIN: Final = (22, 5)


@dataclass(frozen=True)
class Done:
    """A command's exit status and what it printed."""

    code: int
    out: str
    err: str


class Runner:
    """Runs Slurm's commands where ``login`` says (``local``, or ``[user@]host[:port]``)."""

    def __init__(
        self, login: str = "local", *, timeout_s: float = 30.0, ssh_config: str | None = None
    ) -> None:
        self.login = login
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
                "unreachable", f"Slurm's {what} is not installed here (slurm.login: {self.login})"
            ) from None
        except OSError as exc:
            raise HeadError("unreachable", f"cannot run {argv[0]}: {exc.strerror or exc}") from None

    def finish(
        self,
        proc: subprocess.Popen[bytes],
        command: str,
        *,
        input: str | None = None,
        timeout_s: float | None = None,
    ) -> Done:
        """What a started command printed, once it ends (within ``timeout_s``)."""
        limit = timeout_s
        try:
            out, err = proc.communicate(
                input.encode() if input is not None else None, timeout=limit
            )
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise HeadError(
                "timeout", f"{command} gave no answer within {limit or 0:g} s (is slurmctld up?)"
            ) from None
        return Done(
            proc.returncode,
            out[:MAX_OUTPUT].decode("utf-8", "replace"),
            err[:65536].decode("utf-8", "replace"),
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
                    f"Slurm {self._version[0]}.{self._version[1]:02d} is older than 22.05",
                )
        return self._version


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
