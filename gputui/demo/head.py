"""``DemoHead``: the scheduler's head for the demo, as a real ``gputui head`` process.

It serves a socket and a SQLite file inside the demo's directory and schedules on
the demo's simulated hosts over their real SSH, so claims, the queue and job
output in the console are the real thing. ``seed`` gives the newcomer something to
look at: a few jobs of the demo's users running, some waiting with their reasons
(more asked for than fits, one held), and one idle claim. As root, other users'
jobs are submitted by a small client that runs as that user (the head knows who
asks from the socket, never from the request); as anyone else, everything is
theirs. The demo's jobs are short Python loops that print their progress and end
by themselves once the demo that started them is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import pwd
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Mapping
from pathlib import Path
from typing import Any

from gputui.common.i18n import _, ngettext
from gputui.common.tasks import within
from gputui.demo.progress import Report
from gputui.demo.workloads import python_for_everyone
from gputui.scheduler.client.aio import AsyncHeadClient
from gputui.scheduler.client.backend import Answer
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.head_backend import HeadBackend

DemoBackend = HeadBackend[Awaitable[Answer], AsyncIterator[Answer]]
"""The demo's head over an asyncio connection, with the head's own extensions
(``submit``'s ``env``, ``cluster``): it seeds only a head it started."""

START_TIMEOUT_S = 20.0
HOSTS_TIMEOUT_S = 45.0

# The demo's job, written next to the socket as train.py: prints like a training
# loop, ends after --steps steps, or as soon as the demo (--demo-pid, when given)
# is gone, whoever the job runs as.
JOB_SCRIPT = """\
import argparse, os, sys, time
p = argparse.ArgumentParser()
p.add_argument("--model", default="demo")
p.add_argument("--steps", type=int, default=100)
p.add_argument("--pause", type=float, default=2.0)
p.add_argument("--demo-pid", type=int, default=0)
a = p.parse_args()
def alive():
    if not a.demo_pid:
        return True
    try:
        os.kill(a.demo_pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
print("training", a.model, "on", os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
for step in range(a.steps):
    if not alive():
        sys.exit(143)
    print(f"step {step + 1}/{a.steps}  loss {2.0 / (1 + step * 0.3):.4f}", flush=True)
    time.sleep(a.pause)
print("done", flush=True)
"""

# Starts ``gputui head`` so that it gets SIGTERM when the demo dies, even by kill -9
# (Linux's parent-death signal, kept across exec; elsewhere the demo's clean-up stops it).
HEAD_WRAPPER = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the demo is already gone
os.execv(sys.executable, [sys.executable, "-m", "gputui.entry", "head", "--hosts", sys.argv[2]])
"""

# Runs as another user, fed on stdin: one line of JSON requests in, their answers out.
CLIENT_SCRIPT = """
import json, socket, sys
path, requests = json.loads(sys.stdin.readline())
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(20)
sock.connect(path)
reader = sock.makefile("rb")
out = []
for i, (op, args) in enumerate(requests, 1):
    sock.sendall(json.dumps({"id": i, "op": op, "rid": "demo-%d-%d" % (i, id(out)),
                             "args": args}).encode() + b"\\n")
    while True:
        message = json.loads(reader.readline())
        if message.get("id") == i:
            out.append(message)
            break
print(json.dumps(out))
"""


def job_argv(python: str, model: str, steps: int, pause: float = 2.0) -> list[str]:
    """``python3 train.py --model M ...``, run in the socket's directory (train.py is there)."""
    demo = str(os.getpid())
    return [
        python,
        "train.py",
        "--model",
        model,
        "--steps",
        str(steps),
        "--pause",
        str(pause),
        "--demo-pid",
        demo,
    ]


class DemoHead:
    """A ``gputui head`` child process over the demo's hosts.yaml."""

    def __init__(self, hosts_yaml: Path, socket_path: Path) -> None:
        self.hosts_yaml = hosts_yaml
        self.socket = socket_path
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = hosts_yaml.parent / "head.log"
        self.seeded: list[str] = []
        """One line per thing ``seed`` did (for the banner and tests)."""
        self.claimed: list[str] = []
        """The GPUs of the seeded idle claim."""
        self.problems: list[str] = []
        """The lines of ``seeded`` that say what went wrong (the console shows each)."""
        self.quick: str | None = None
        """The line of ``seeded`` about the quick job to watch, once it is given."""

    def _problem(self, line: str) -> None:
        self.seeded.append(line)
        self.problems.append(line)

    async def start(self) -> None:
        """Start the head; return once its socket answers (else raise ``OSError``)."""
        script = self.socket.parent / "train.py"
        script.write_text(JOB_SCRIPT)
        script.chmod(0o644)
        self.process = self._spawn()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise OSError(f"the demo's head stopped at start: {self._log_tail()}")
            try:
                client = await AsyncHeadClient.open_local(self.socket)
            except HeadError:
                if time.monotonic() > deadline:
                    raise OSError("the demo's head did not start in time") from None
                await asyncio.sleep(0.1)
                continue
            await client.close()
            return

    def _spawn(self) -> subprocess.Popen[bytes]:
        with self.log_path.open("ab") as log:
            return subprocess.Popen(  # fixed argv, no shell
                [sys.executable, "-c", HEAD_WRAPPER, str(os.getpid()), str(self.hosts_yaml)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text("utf-8", "replace").strip().splitlines()
        except OSError:
            return "no output"
        return lines[-1][:300] if lines else "no output"

    async def stop(self) -> None:
        """SIGTERM (the head stops serving; running jobs end with the demo), then KILL."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        try:
            await within(loop.run_in_executor(None, process.wait), 5)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await loop.run_in_executor(None, process.wait)

    def emergency_cleanup(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    # -- seeding -------------------------------------------------------------------

    async def seed(
        self,
        owners: list[str],
        names: list[str],
        counts: list[int],
        mig: Mapping[str, str] | None = None,
    ) -> None:
        """Jobs running and waiting, one held, one idle claim (its GPUs' uuids kept in
        ``claimed``); needs the hosts live.
        ``mig``: hosts whose cards have MIG mode on -> a profile of their slices (they
        get a job on a slice; the whole-card jobs go to the others)."""
        mig = mig or {}
        client = await AsyncHeadClient.open_local(self.socket)
        head: DemoBackend = HeadBackend(client, local=True)
        try:
            if not await self._hosts_known(head, sum(counts)):
                self._problem(_("the head did not see every GPU in time; nothing seeded"))
                return
            me = pwd.getpwuid(os.getuid()).pw_name
            python = python_for_everyone() or sys.executable
            here = str(self.socket.parent)  # train.py is there

            def job(name: str, gpus: int, steps: int, **more: Any) -> dict[str, Any]:
                return _job(python, name, gpus, steps, cwd=here, **more)

            whole = [(n, c) for n, c in zip(names, counts, strict=True) if n not in mig]
            largest = max((c for _, c in whole), default=max(counts))
            plan: list[tuple[str, dict[str, Any]]] = []
            others = [o for o in owners if o != me] or [me]
            first = next((n for n, c in whole if c == largest), names[0])
            jobs = ("resnet50", "llama-lora", "vit-b16", "diffusion")
            hosts = [first, *(n for n, _ in whole)]
            for i, (name, host) in enumerate(zip(jobs, hosts, strict=False)):
                body = job(name, 1 + i % 2 if i else 1, 900, host=host)
                plan.append((others[i % len(others)], body))
            for i, (host, profile) in enumerate(sorted(mig.items())):  # one on a slice each
                body = job(f"bert-{profile}", 1, 900, host=host, mig=profile)
                plan.append((others[i % len(others)], body))
            # A whole host that already runs a job: it waits (Resources).
            plan.append((others[0], job("sweep-all", largest, 600, host=first)))
            for user, body in plan:
                await self._submit(head, user, me, body)
            # The idle claim before the short job: with time limits, the short job may
            # backfill the last free card of a small cluster, and a claim never could.
            claim = await head.claim(gpus=1, note="notebook", wait=False)
            self.seeded.append(_("claim {id} of yours, idle").format(id=claim["claim"]["id"]))
            self.claimed = [str(u) for u in claim["claim"].get("gpu_uuids") or []]
            short = await head.submit(**job("quick-test", 1, 12, pause=1.5))
            self.quick = _("job {id} ({name}) of yours ends in ~20 s").format(
                id=short["job"]["id"], name="quick-test"
            )
            self.seeded.append(self.quick)
            # Yours, a whole host: it waits too, and is held (reason Held) until released.
            held = await head.submit(**job("eval-big", largest, 300, host=first))
            if held["job"]["state"] == "queued":
                await head.hold(held["job"]["id"])
        except (HeadError, OSError, KeyError, TypeError, ValueError) as exc:
            why = exc.shown if isinstance(exc, HeadError) else exc  # in the user's language
            self._problem(_("seeding stopped: {error}").format(error=why))
        finally:
            await client.close()

    async def watch_hosts(self, counts: dict[str, int], report: Report, timeout: float) -> bool:
        """Wait until the head has every host live with all its GPUs, reporting each
        (``connecting``, then ``ready``) as it comes; False when ``timeout`` ran out."""
        for name in counts:
            report(name, "connecting", "")
        try:
            client = await AsyncHeadClient.open_local(self.socket)
        except HeadError:
            return False
        head: DemoBackend = HeadBackend(client, local=True)
        ready: set[str] = set()
        deadline = time.monotonic() + timeout
        try:
            while True:
                try:
                    state = await head.cluster()
                except HeadError:
                    return False  # the head went: the console says so
                hosts = state.get("hosts", {})
                seen = Counter(g.get("host") for g in state.get("gpus", []))
                for name, count in counts.items():
                    live = hosts.get(name, {}).get("live")
                    if name not in ready and live and seen[name] >= count:
                        ready.add(name)
                        said = ngettext("{n} GPU", "{n} GPUs", count).format(n=count)
                        report(name, "ready", said)
                if len(ready) == len(counts):
                    return True
                if time.monotonic() > deadline:
                    return False
                await asyncio.sleep(0.2)
        finally:
            await client.close()

    async def _hosts_known(self, head: DemoBackend, gpus: int) -> bool:
        deadline = time.monotonic() + HOSTS_TIMEOUT_S
        while time.monotonic() < deadline:
            state = await head.cluster()
            live = all(h.get("live") for h in state.get("hosts", {}).values())
            if live and len(state.get("gpus", [])) >= gpus:
                return True
            await asyncio.sleep(0.25)
        return False

    async def _submit(self, head: DemoBackend, user: str, me: str, body: dict[str, Any]) -> None:
        if user == me:
            await head.submit(**body)
            return
        answers = await asyncio.get_running_loop().run_in_executor(
            None, as_user, user, str(self.socket), [("submit", body)]
        )
        for answer in answers:
            if not answer.get("ok"):
                self._problem(
                    _("{user}'s job refused: {error}").format(user=user, error=answer.get("error"))
                )


def _job(
    python: str,
    name: str,
    gpus: int,
    steps: int,
    *,
    pause: float = 2.0,
    host: str | None = None,
    cwd: str = "/",
    mig: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "argv": job_argv(python, name, steps, pause),
        "gpus": gpus,
        "name": name,
        "cwd": cwd,
        "preemptible": name.startswith("sweep"),
        "env": {"GPUTUI_SIM_MEM_MIB": str(6144 * gpus), "GPUTUI_SIM_UTIL": "85"},
        # A limit as a team would give one (twice the run, whole minutes, ten at least):
        # the week view (w) and explain estimate starts and ends from limits.
        "time_limit_s": max(600, math.ceil(steps * pause * 2 / 60) * 60),
    }
    if host is not None:
        body["host"] = host
    if mig is not None:
        body["mig"] = mig
    return body


def as_user(user: str, socket_path: str, requests: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Send ``requests`` to the head from a process running as ``user`` (root only)."""
    entry = pwd.getpwnam(user)
    python = python_for_everyone() or sys.executable
    done = subprocess.run(  # fixed argv, no shell
        [python, "-c", CLIENT_SCRIPT],
        input=json.dumps([socket_path, requests]).encode() + b"\n",
        capture_output=True,
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
        cwd="/",
        timeout=30,
        check=False,
    )
    try:
        answers = json.loads(done.stdout or b"[]")
    except ValueError:
        answers = []
    if not isinstance(answers, list):
        return []
    return [a for a in answers if isinstance(a, dict)] or [
        {"ok": False, "error": done.stderr.decode("utf-8", "replace").strip()[-200:]}
    ]
