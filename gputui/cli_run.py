"""``gputui run``: claim GPUs for as long as one command runs, then release them.

Also the pieces other verbs share with it: the command after ``--`` and this host's
short name. Imports only the light client (a verb's start-up stays cheap).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from gputui.scheduler.client import HeadClient, HeadError


def command_of(args: argparse.Namespace) -> list[str]:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise HeadError("usage", f"{args.verb}: give the command after --")
    return cmd


def this_host(client: HeadClient) -> str:
    """The head's name for this machine (``gputui.thishost``: a ``local: true`` host
    when the head runs here, else by hostname, FQDN and addresses); a ``HeadError``
    naming the choices when it is none or several of the head's hosts."""
    from gputui import thishost

    try:
        table = client.call("hosts").get("hosts")
    except HeadError as exc:
        if exc.code != "unknown-op":
            raise
        return socket.gethostname().split(".")[0]  # a head from before the table
    rows = [
        thishost.HeadHost(one_line(h["name"])[:64], one_line(h["address"])[:255], h["local"])
        for h in (table if isinstance(table, list) else [])
        if isinstance(h, dict)
        and isinstance(h.get("name"), str)
        and isinstance(h.get("address"), str)
        and isinstance(h.get("local"), bool)
    ]
    try:
        return thishost.pick(rows, thishost.here(on_head=client.opener is None))
    except thishost.NoHost as exc:
        raise HeadError("no-host", str(exc)) from None


def one_line(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def dies_with_us() -> Callable[[], None] | None:
    """For the child's side of the fork: SIGTERM when this process dies, however it
    dies (``kill -9`` too), so CMD does not run on with GPUs the head gives away. The
    head keeps the GPUs claimed while a process of CMD's user is still on them.
    Linux only (``PR_SET_PDEATHSIG``); elsewhere nothing."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    except (OSError, AttributeError):
        return None

    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # gputui died between the fork and here
            os.kill(os.getpid(), signal.SIGTERM)

    return arm


def run(client: HeadClient, a: argparse.Namespace) -> int:
    """Claim GPUs for this connection, run CMD, release: the head releases them too
    when this process dies in any way (its connection to the head drops)."""
    command = command_of(a)
    host = a.host or this_host(client)
    body: dict[str, Any] = {
        "gpus": a.gpus,
        "host": host,
        "wait": True,
        "session": True,
        # The command as a note, on one printable line (the head refuses control
        # characters, and a `python -c` script is often several lines).
        "note": one_line(" ".join(command))[:200],
    }
    if a.pool:
        body["pool"] = a.pool
    # Not retried on a new connection: this claim ends with the connection it was
    # made on, so a replayed "active" would name GPUs the head is taking back.
    claim = client.call("claim", body, retry=False)["claim"]
    if claim["state"] != "active":
        print(
            f"gputui run: waiting for {a.gpus} GPU(s) on {host} ({claim['reason']})…",
            file=sys.stderr,
        )
        client.call("subscribe")
        for push in client.pushes():
            if push.get("push") != "state":
                continue
            mine = [c for c in push["state"]["claims"] if c["id"] == claim["id"]]
            if not mine:
                raise HeadError("released", f"claim c{claim['id']} went away while waiting")
            if mine[0]["state"] == "active":
                claim = mine[0]
                break
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(claim["gpu_uuids"])
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    print(f"gputui run: c{claim['id']}: {env['CUDA_VISIBLE_DEVICES']}", file=sys.stderr)
    try:
        # The one other thread (the SSH pump, for a remote head) takes no lock the
        # child needs: the hook calls one C function resolved before the fork.
        child = subprocess.Popen(command, env=env, preexec_fn=dies_with_us())  # noqa: PLW1509
    except OSError as exc:
        client.call("release", {"claim_ids": [claim["id"]]})
        raise HeadError("exec", f"cannot run {command[0]!r}: {exc.strerror or exc}") from None

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    code = child.wait()
    # The head releases a session's claim when the connection closes anyway.
    with contextlib.suppress(HeadError):
        client.call("release", {"claim_ids": [claim["id"]]})
    return code if code >= 0 else 128 - code
