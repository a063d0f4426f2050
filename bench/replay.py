"""Replay host side: one process serves N simulated hosts' SSH sessions from
pre-made samples, so a benchmark at 1,000 hosts measures gputui, not 1,000 helpers.

One asyncssh server on loopback (one listener, one host key that the clients verify,
public-key auth for one key), as ``bench/fanout.py`` has, but an exec request does not
start the real helper as a process: the session reads the helper's payload line as the
real one does (base64 of zlib of the modules and argv), takes the host's name from
``--sim SPEC,name=HOST`` and the rate from ``--interval``, and answers as the helper
does: ``hello``, ``jobs`` when started with ``--jobs``, then a ``sample`` every
interval, and a ``result`` for each request (``interval`` applied; others answered
``unsupported``, as a helper answers an op it does not have). A client's fleet cannot
tell it from a helper.

The samples are made once (``Templates``): the real helper, in simulator mode, gives
the hello and the shape of every field (the errors its sim reports, the health
readings' sample every ``--health-every``); then ``--variants`` samples are made from
it with realistic change: five GPUs of eight busy (one or two processes; utilisation, power,
memory, clocks and temperature moving), the rest idle and still. About half the
reading series (``READINGS``) stay the same from one sample to the next
(``unchanged_fraction``), as measured clusters do. Each is
one bytes template; per host and per sample only its name, its GPUs' UUIDs, the
sequence number and the time are put in.

    python bench/replay.py --serve DIR [--gpus 8] [--variants 60]

prints its port once listening and serves until its stdin closes; ``DIR`` holds
``host_key`` and ``client.pub``. Importable: ``Templates``, ``ReplayServer``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import random
import shlex
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncssh

from gputui.remote.bundle import BOOT, _prefix, helper_command, helper_payload

TEMPLATE_NAME = "replaytpl"
_UUID_TAIL = "4c3b-9a3e-5d1f0e2b7a6c"
MAX_PAYLOAD = 4 << 20
"""The helper's payload line is about 200 KB; a longer first line ends the session."""


HEALTH_EVERY = 10
"""A host's samples per health reading (the helper's default: one every tenth)."""


def host_uuid(host: str, index: int) -> str:
    """GPU ``index`` of ``host``: a UUID of its own (the head keys its GPUs by UUID)."""
    tag = zlib.crc32(host.encode()) & 0xFFFFFFFF
    return f"GPU-{tag:08x}-{index:04x}-{_UUID_TAIL}"


def _real_helper_lines(gpus: int, samples: int) -> list[dict[str, Any]]:
    """The real helper in simulator mode: its hello and its first ``samples`` samples."""
    spec = f"{gpus}xa100-80gb,name={TEMPLATE_NAME}"
    proc = subprocess.Popen(
        helper_command(sys.executable),
        shell=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(helper_payload(["--sim", spec, "--interval", "0.1"]))
        proc.stdin.flush()
        lines = []
        while len(lines) < samples + 1:
            raw = proc.stdout.readline()
            if not raw:
                raise RuntimeError("the helper ended before its samples")
            lines.append(json.loads(raw))
        return lines
    finally:
        proc.kill()
        proc.wait()


class Templates:
    """The hello and ``variants`` samples of one simulated host, as bytes templates."""

    def __init__(self, gpus: int = 8, variants: int = 60, health_every: int = HEALTH_EVERY) -> None:
        real = _real_helper_lines(gpus, 2)
        hello, health, plain = real[0], real[1], real[2]
        assert hello["type"] == "hello" and health["type"] == "sample"
        self.gpus = gpus
        self.uuids = [g["uuid"] for g in hello["gpus"]]
        self.hello = self._template(hello)
        rng = random.Random(1)
        busy = [i % 8 not in (3, 6, 7) for i in range(gpus)]  # five of eight
        users = ["alice", "bob", "carol", "dave"]
        made: list[dict[str, Any]] = []
        util = [rng.randint(60, 99) if b else 0 for b in busy]
        temp = [rng.randint(55, 70) if b else 33 for b in busy]
        for k in range(variants):
            base = health if k % health_every == 0 else plain
            gpu_list = []
            for i, gpu in enumerate(base["gpus"]):
                g = dict(gpu)
                if busy[i]:
                    util[i] = max(40, min(100, util[i] + rng.choice((-5, -3, 2, 4, 6))))
                    if rng.random() < 0.6:
                        temp[i] = max(50, min(80, temp[i] + rng.choice((-1, 1))))
                    g.update(
                        util_gpu=util[i],
                        util_mem=util[i] // 2 + rng.randint(0, 3),
                        mem_used_mib=61_440 + 512 * rng.randint(0, 1),
                        temp_c=temp[i],
                        power_w=round(150 + 2.5 * util[i] + rng.random() * 4, 2),
                        clock_sm_mhz=rng.choice((1410, 1395)),
                    )
                    procs = [
                        {
                            "pid": 40_000 + 10 * i + p,
                            "uid": 1000 + (i + p) % 4,
                            "user": users[(i + p) % 4],
                            "command": f"python train.py --shard {p}",
                            "gpu_mem_mib": 30_720,
                            "start_ticks": 1_234_567 + i,
                            "start_time": 1_700_000_000.0 + i,
                            "kind": "compute",
                            "errors": {},
                        }
                        for p in range(1 + i % 2)
                    ]
                    g["processes"] = procs
                gpu_list.append(g)
            sample = {"type": "sample", "seq": -1, "time": -1.0, "gpus": gpu_list}
            made.append(sample)
        self.unchanged_fraction = _unchanged(made)
        self.samples = [self._template(s) for s in made]

    def _template(self, message: dict[str, Any]) -> bytes:
        text = json.dumps(message, separators=(",", ":")).replace("%", "%%")
        text = text.replace('"seq":-1,', '"seq":%(s)d,').replace('"time":-1.0,', '"time":%(t)s,')
        text = text.replace(TEMPLATE_NAME, "%(n)s")
        for i, uuid in enumerate(self.uuids):
            text = text.replace(uuid, f"GPU-%(h)s-{i:04x}-{_UUID_TAIL}")
        return (text + "\n").encode()

    def line(self, k: int, host: str, tag: bytes, seq: int, now: float) -> bytes:
        """Sample ``k`` (mod the variants) as ``host`` sends it, numbered ``seq``, at ``now``."""
        template = self.samples[k % len(self.samples)]
        values = {b"n": host.encode(), b"h": tag, b"s": seq, b"t": b"%.3f" % now}
        return template % values

    def hello_line(self, host: str, tag: bytes) -> bytes:
        return self.hello % {b"n": host.encode(), b"h": tag}


READINGS = ("util_gpu", "util_mem", "mem_used_mib", "temp_c", "power_w", "clock_sm_mhz")
"""The readings that move on a busy GPU: the series ``unchanged_fraction`` counts."""


def _unchanged(samples: list[dict[str, Any]]) -> float:
    """The share of (GPU, reading) series equal from one sample to the next."""
    same = total = 0
    for a, b in itertools.pairwise(samples):
        for ga, gb in zip(a["gpus"], b["gpus"], strict=True):
            for key in READINGS:
                total += 1
                same += ga.get(key) == gb.get(key)
    return same / max(total, 1)


def _argv(payload: bytes) -> list[str]:
    """The helper argv at the end of a payload line (the modules before it are skipped).

    gputui's own payload is the modules compressed once and the argv as a deflate
    stream of its own after them (``bundle.helper_payload``): only that tail is read
    (this process serves every host; decompressing the whole line cost it 1.5 ms a
    host). Any other line is read whole."""
    encoded, left, _ = _prefix()
    if payload.startswith(encoded):
        rest = base64.b64decode(payload[len(encoded) :])
        if rest.startswith(left) and len(rest) > len(left) + 4:
            with contextlib.suppress(zlib.error, UnicodeDecodeError):
                tail = zlib.decompress(rest[len(left) : -4], -zlib.MAX_WBITS).decode("utf-8")
                return _argv_of(tail[:-1])
    text = zlib.decompress(base64.b64decode(payload)).decode("utf-8")
    start = text.rfind('"argv":')
    if start < 0:
        raise ValueError("no argv in the payload")
    return _argv_of(text[start + len('"argv":') : -1])


def _argv_of(text: str) -> list[str]:
    argv = json.loads(text)
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv is not a list of strings")
    return argv


class _Session:
    """One host's helper session: hello, then samples at the interval, results."""

    def __init__(self, owner: ReplayServer, process: asyncssh.SSHServerProcess[bytes]) -> None:
        self.owner = owner
        self.process = process
        self.interval = 1.0

    async def run(self) -> None:
        process = self.process
        try:
            if shlex.quote(BOOT) not in (process.command or ""):
                process.stderr.write(b"replay: only the gputui helper runs here\n")
                process.exit(127)
                return
            payload = await process.stdin.readline()
            if len(payload) > MAX_PAYLOAD or not payload.endswith(b"\n"):
                process.exit(3)
                return
            argv = _argv(payload.strip())
            host, jobs = self._options(argv)
            tag = host_uuid(host, 0)[4:12].encode()
            tpl = self.owner.templates
            process.stdout.write(tpl.hello_line(host, tag))
            if jobs:
                process.stdout.write(b'{"type":"jobs","jobs":[]}\n')
            reader = asyncio.ensure_future(self._requests())
            try:
                await self._samples(host, tag)
            finally:
                reader.cancel()
        except (OSError, asyncssh.Error, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                process.exit(0)

    def _options(self, argv: list[str]) -> tuple[str, bool]:
        host, jobs = "", False
        items = iter(argv)
        for item in items:
            if item == "--sim":
                for part in next(items, "").split(",")[1:]:
                    key, _, value = part.partition("=")
                    if key == "name":
                        host = value
            elif item == "--interval":
                self.interval = max(0.1, min(60.0, float(next(items, "1"))))
            elif item == "--jobs":
                jobs = bool(next(items, ""))
            elif item == "--health-every":
                next(items, None)
        if not host:
            raise ValueError("no --sim name=HOST in the helper's argv")
        return host, jobs

    async def _samples(self, host: str, tag: bytes) -> None:
        tpl, out = self.owner.templates, self.process.stdout
        offset = zlib.crc32(host.encode()) % len(tpl.samples)
        loop = asyncio.get_running_loop()
        seq = 0
        next_at = loop.time()
        while not out.is_closing():
            seq += 1
            out.write(tpl.line(offset + seq, host, tag, seq, time.time()))
            self.owner.sent += 1
            next_at = max(next_at + self.interval, loop.time() + self.interval * 0.5)
            await asyncio.sleep(next_at - loop.time())

    async def _requests(self) -> None:
        stdin, out = self.process.stdin, self.process.stdout
        while True:
            line = await stdin.readline()
            if not line:
                return
            try:
                req = json.loads(line)
                rid, op = req["id"], req.get("op")
            except (ValueError, KeyError, TypeError):
                continue
            answer: dict[str, Any]
            if op == "interval" and isinstance(req.get("seconds"), int | float):
                self.interval = max(0.1, min(60.0, float(req["seconds"])))
                answer = {"type": "result", "id": rid, "ok": True,
                          "value": {"seconds": self.interval}}  # fmt: skip
            elif op == "jobs":
                answer = {"type": "result", "id": rid, "ok": True, "value": {"jobs": []}}
            else:
                answer = {"type": "result", "id": rid, "ok": False, "code": "unsupported",
                          "error": f"unsupported request op {str(op)[:40]!r}"}  # fmt: skip
            out.write(json.dumps(answer).encode() + b"\n")


class _Auth(asyncssh.SSHServer):
    def __init__(self, key: asyncssh.SSHKey) -> None:
        self._key = key

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return key.public_data == self._key.public_data


class ReplayServer:
    """Every simulated host behind one SSH listener on 127.0.0.1."""

    def __init__(
        self,
        client_key: asyncssh.SSHKey,
        host_key: asyncssh.SSHKey,
        templates: Templates,
    ) -> None:
        self.client_key = client_key
        self.host_key = host_key
        self.templates = templates
        self.port = 0
        self.sent = 0
        """Samples written, over all sessions."""
        self._acceptor: asyncssh.SSHAcceptor | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._acceptor = await asyncssh.create_server(
            lambda: _Auth(self.client_key),
            "127.0.0.1",
            0,
            server_host_keys=[self.host_key],
            process_factory=self._run,
            encoding=None,
            allow_pty=False,
            x11_forwarding=False,
            agent_forwarding=False,
            allow_scp=False,
            sftp_factory=None,
            keepalive_interval=0,
            backlog=4096,
        )
        self.port = int(self._acceptor.sockets[0].getsockname()[1])
        return self.port

    def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        task = asyncio.ensure_future(_Session(self, process).run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
            with contextlib.suppress(Exception):
                await self._acceptor.wait_closed()
        for task in list(self._tasks):
            task.cancel()


def serve(directory: Path, gpus: int, variants: int) -> None:
    async def run() -> None:
        client = asyncssh.read_public_key(str(directory / "client.pub"))
        host_key = asyncssh.read_private_key(str(directory / "host_key"))
        templates = Templates(gpus, variants)
        server = ReplayServer(client, host_key, templates)
        port = await server.start()
        print(port, round(templates.unchanged_fraction, 3), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await server.stop()

    asyncio.run(run())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="DIR", required=True)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--variants", type=int, default=60)
    args = parser.parse_args()
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    serve(Path(args.serve), args.gpus, args.variants)
    return 0


if __name__ == "__main__":
    sys.exit(main())
