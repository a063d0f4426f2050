"""A fake container runtime: ``docker``, ``podman`` and ``apptainer`` executables that
record how they were called and then run the command (no real runtime on the test
machines; GPUs are simulated).

``run`` (docker, podman) records its argv, its uid and gid and the environment it was
given, then starts the command as ``--user`` says (when it can: as root), *in a
session of its own*, as a real runtime's
container is not in the caller's process group, and waits for it, passing TERM and INT
on (``--sig-proxy``). Killing the ``run`` process therefore leaves the "container"
running, as it does with Docker: only ``rm --force NAME`` (recorded too) ends it.
``exec`` (apptainer) records and then becomes the command, as Apptainer's starter does.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

# Options of ``run`` that take a value (the rest are flags); the first word that is
# neither is the image, and what follows it is the command.
_VALUED = (
    "--name", "--label", "--user", "--gpus", "--env", "--device", "--mount", "--workdir",
    "--cidfile",
)  # fmt: skip

SYSTEM_PYTHON = "/usr/bin/python3"
"""The fake's interpreter: one every user can run (a test's own may be root's alone)."""

_SCRIPT = r"""#!{python}
import json, os, secrets, signal, sys, time
RECORD = {record!r}
BOXES = {boxes!r}
VALUED = {valued!r}
me = os.path.basename(sys.argv[0])
args = sys.argv[1:]

def note(**fields):
    fields.update(runtime=me, argv=sys.argv, uid=os.getuid(), gid=os.getgid())
    fd = os.open(RECORD, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    os.write(fd, (json.dumps(fields) + "\n").encode())
    os.close(fd)

if me == "apptainer" and args[:1] == ["exec"]:
    rest = [a for a in args[1:]]
    while rest and rest[0].startswith("-"):
        if rest.pop(0) in ("--bind", "-B"):  # these take a value
            rest.pop(0)
    note(op="exec", image=rest[0], command=rest[1:],
         nvidia=os.environ.get("NVIDIA_VISIBLE_DEVICES"))
    os.execvp(rest[1], rest[1:])

if args[:1] == ["run"]:
    opts, i = {{}}, 1
    while i < len(args) and args[i].startswith("-"):
        if args[i] in VALUED:
            opts.setdefault(args[i], []).append(args[i + 1])
            i += 2
        else:
            opts.setdefault(args[i], []).append(True)
            i += 1
    image, command = args[i], args[i + 1:]
    name = opts["--name"][0]
    passed = {{k: os.environ.get(k) for k in opts.get("--env", [])}}
    cid = secrets.token_hex(32)
    for path in opts.get("--cidfile", []):  # as docker: refused if it is there already
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        os.write(fd, cid.encode())
        os.close(fd)
    note(op="run", name=name, image=image, command=command, env=passed, cid=cid)
    # The command starts only once the container is on record and signals are
    # passed on, so whatever the test sees running can be stopped and removed.
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.close(go_w)
        os.read(go_r, 1)
        uid, gid = (int(x) for x in opts["--user"][0].split(":"))
        if os.getuid() == 0 and (uid, gid) != (0, 0):  # the user the container runs as
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        os.chdir(opts["--workdir"][0])
        os.execvp(command[0], command)
    os.close(go_r)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: os.kill(pid, s))
    fd = os.open(os.path.join(BOXES, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    os.write(fd, str(pid).encode())
    os.close(fd)
    os.write(go_w, b"g")
    os.close(go_w)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if "--rm" in opts:
        try:
            os.unlink(os.path.join(BOXES, name))
        except FileNotFoundError:
            pass
    sys.exit(os.waitstatus_to_exitcode(status) & 255)

if args[:2] == ["rm", "--force"]:
    name = args[2]
    path = os.path.join(BOXES, name)
    try:
        pid = int(open(path).read())
    except FileNotFoundError:
        note(op="rm", name=name, found=False)
        sys.exit(1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.unlink(path)
    note(op="rm", name=name, found=True, pid=pid)
    sys.exit(0)

note(op="unknown")
sys.exit(125)
"""


class FakeRuntime:
    """The three executables in ``bin``, their record, and the containers they run."""

    def __init__(self, base: Path) -> None:
        self.bin = base / "bin"
        self.record = base / "record.jsonl"
        self.boxes = base / "boxes"
        for folder in (self.bin, self.boxes):
            folder.mkdir(parents=True)
        for folder in (base, self.bin):
            folder.chmod(0o755)
        self.boxes.chmod(0o777)  # the job's user (not root) runs the fake
        self.record.touch()
        self.record.chmod(0o666)
        text = _SCRIPT.format(
            python=SYSTEM_PYTHON, record=str(self.record), boxes=str(self.boxes), valued=_VALUED
        )
        for name in ("docker", "podman", "apptainer"):
            path = self.bin / name
            path.write_text(text)
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | 0o444)

    def calls(self, op: str | None = None) -> list[dict[str, Any]]:
        lines = self.record.read_text().splitlines()
        found = [json.loads(line) for line in lines if line.strip()]
        return [c for c in found if op is None or c["op"] == op]

    def running(self) -> dict[str, int]:
        """Container name -> the pid of its command, for those not removed."""
        return {p.name: int(p.read_text() or 0) for p in self.boxes.iterdir()}


def helper_env(fake: FakeRuntime, **extra: str) -> dict[str, str]:
    """The helper's environment with the fake runtime first on its PATH."""
    env = dict(os.environ, **extra)
    env["PATH"] = f"{fake.bin}:{env.get('PATH', '/usr/bin:/bin')}"
    return env
