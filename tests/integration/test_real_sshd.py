"""The fleet against a real OpenSSH sshd, as an unprivileged user, with real processes."""

from __future__ import annotations

import asyncio
import os
import re

import asyncssh
import pytest
from simscope import sim_env

from gputui.fleet.hostkeys import fingerprint
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.wire.messages import ProcessSample

pytestmark = [pytest.mark.sshd, pytest.mark.root]

SLEEPER = "import time; time.sleep(120)"


def find_process(snapshot: HostSnapshot, uuid: str, pid: int) -> ProcessSample | None:
    for gpu in snapshot.sample.gpus if snapshot.sample else ():
        if gpu.uuid == uuid:
            for proc in gpu.processes:
                if proc.pid == pid:
                    return proc
    return None


async def start_on_gpu(uuid: str, *, uid: int | None = None, gid: int | None = None):
    env = sim_env(PATH="/usr/bin:/bin", GPUTUI_SIM_GPU=uuid, GPUTUI_SIM_MEM_MIB="777")
    kwargs = {} if uid is None else {"user": uid, "group": gid, "extra_groups": []}
    return await asyncio.create_subprocess_exec(
        "/usr/bin/python3", "-c", SLEEPER, env=env, cwd="/", **kwargs
    )


async def live_snapshot(fleet, wait, name: str) -> HostSnapshot:
    return await wait(
        lambda: (
            (s := fleet.snapshots()[name]).sample is not None and s.status is HostStatus.LIVE and s
        ),
        what=f"{name} live with samples",
    )


async def test_streams_from_real_sshd_and_kills_own_process(sshd, fleets, wait) -> None:
    fleet = await fleets(sshd.config([{"name": "real1", "sim": "2xh200,name=real1"}]))
    snap = await live_snapshot(fleet, wait, "real1")
    assert snap.hello is not None and len(snap.hello.gpus) == 2
    await wait(lambda: fleet.samples_received()["real1"] >= 3, what="a few samples")

    uuid = snap.hello.gpus[1].uuid
    proc = await start_on_gpu(uuid, uid=sshd.uid, gid=sshd.gid)
    try:
        target = await wait(
            lambda: find_process(fleet.snapshots()["real1"], uuid, proc.pid),
            what="the user's process on the GPU",
        )
        assert target.user == sshd.user and target.uid == sshd.uid
        outcome = await fleet.signal_process("real1", uuid, target, "TERM")
        assert outcome.ok, outcome.message
        assert await asyncio.wait_for(proc.wait(), 10) == -15
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_another_users_process_is_refused(sshd, fleets, wait, ptrace_python) -> None:
    config = sshd.config(
        [{"name": "real2", "sim": "1xa100-80gb,name=real2", "python": ptrace_python}]
    )
    fleet = await fleets(config)
    snap = await live_snapshot(fleet, wait, "real2")
    uuid = snap.hello.gpus[0].uuid
    proc = await start_on_gpu(uuid)  # root's process, same simulated GPU
    try:
        target = await wait(
            lambda: find_process(fleet.snapshots()["real2"], uuid, proc.pid),
            what="root's process on the GPU",
        )
        assert target.uid == 0
        outcome = await fleet.signal_process("real2", uuid, target, "KILL")
        assert not outcome.ok
        assert outcome.message.startswith("permission denied"), outcome.message
        assert outcome.code == "permission-denied"
        assert proc.returncode is None and os.path.exists(f"/proc/{proc.pid}")
    finally:
        proc.kill()
        await proc.wait()


async def test_changed_key_against_real_sshd(sshd, fleets, wait, tmp_path) -> None:
    impostor = asyncssh.generate_private_key("ssh-ed25519")
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {impostor.export_public_key().decode()}")
    config = sshd.config([{"name": "real3", "known_hosts": str(known)}])
    fleet = await fleets(config)
    snap = await wait(
        lambda: (s := fleet.snapshots()["real3"]).status is HostStatus.HOST_KEY_CHANGED and s,
        what="host key changed",
    )
    real = asyncssh.import_public_key(sshd.host_public_key)
    found = re.findall(r"SHA256:[A-Za-z0-9+/]{43}", snap.message)
    assert fingerprint(real) in found and fingerprint(impostor) in found


async def test_wrong_user_is_auth_failed(sshd, fleets, wait) -> None:
    fleet = await fleets(sshd.config([{"name": "real4", "user": "nobody"}]))
    snap = await wait(
        lambda: (s := fleet.snapshots()["real4"]).status is HostStatus.AUTH_FAILED and s,
        what="auth failed",
    )
    assert snap.message == "permission denied (publickey) for nobody@127.0.0.1"
