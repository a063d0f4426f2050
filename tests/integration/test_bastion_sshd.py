"""Set-ups real teams have, against real OpenSSH: a GPU host behind a bastion that
reboots and comes back re-keyed, and an encrypted key that only the agent can use."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import asyncssh
import pytest
from textual.widgets import Static

from gputui.fleet.backoff import LinkTiming
from gputui.fleet.fleet import Fleet
from gputui.fleet.hostkeys import fingerprint
from gputui.telemetry import HostSnapshot, HostStatus
from gputui.ui.app import GpuTuiApp
from gputui.ui.gpu_view import HostRow
from gputui.ui.widgets.detail import DetailPane

pytestmark = [pytest.mark.sshd, pytest.mark.root]

FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
# The reconnect timing people get (1 s base, 60 s cap, 2 s while refused), only
# quicker to give up on a helper: what a rebooted host really waits is under test.
PEOPLE_TIMING = LinkTiming(hello_timeout=10.0, close_timeout=2.0)


def status_is(fleet: Fleet, name: str, status: HostStatus):
    return lambda: (s := fleet.snapshots()[name]).status is status and s


def detail_message(app: GpuTuiApp) -> str:
    """The detail pane's message, its wrapped lines joined back (all of it, scrolled
    into view or not): from its label to the next one, "data age"."""
    body = app.main.query_one(DetailPane).query_one("#detail-text", Static).content
    lines = str(getattr(body, "plain", body)).splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("message")), None)
    if start is None:
        return ""
    parts = [lines[start].removeprefix("message").strip()]
    for line in lines[start + 1 :]:
        if line.startswith("data age"):
            break
        parts.append(line.strip())
    return "".join(parts)


def screen_text(app: GpuTuiApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_a_host_behind_a_bastion_reboots_and_comes_back_rekeyed(
    sshd, second_sshd, fleets, wait, tmp_path: Path
) -> None:
    bastion = f"{sshd.user}@127.0.0.1:{sshd.port}"
    known = tmp_path / "known_hosts"
    known.write_text(
        f"[127.0.0.1]:{sshd.port} {sshd.host_public_key}\n" + second_sshd.known_hosts_line()
    )
    config = sshd.config(
        [
            {
                "name": "gpu1",
                "port": second_sshd.port,
                "proxy_jump": bastion,
                "known_hosts": str(known),
                "sim": "1xa10,name=gpu1",
            }
        ]
    )
    fleet = await fleets(config, timing=PEOPLE_TIMING)
    await wait(status_is(fleet, "gpu1", HostStatus.LIVE), what="gpu1 live through the bastion")

    seen: list[tuple[HostSnapshot, float]] = []
    fleet.subscribe(lambda snap: seen.append((snap, time.time())))

    refused = f"via bastion {bastion}: connection refused"

    def refusals() -> list[tuple[HostSnapshot, float]]:
        return [(s, t) for s, t in seen if s.message == refused]

    second_sshd.stop()  # the GPU host goes down; the bastion stays up
    await wait(lambda: len(refusals()) >= 5, timeout=30, what="five refused attempts")
    for snap, at in refusals():
        assert snap.status is HostStatus.UNREACHABLE
        assert snap.next_retry_at is not None and snap.next_retry_at - at <= 2.1
    # Besides the refusals, only the drop itself: never a helper error, never slow.
    downs = [s.message for s, _ in seen if s.status.is_problem and s.message != refused]
    assert set(downs) <= {"connection lost"}, downs

    second_sshd.start()  # back from its reboot
    back = time.monotonic()
    await wait(status_is(fleet, "gpu1", HostStatus.LIVE), what="gpu1 live again")
    assert time.monotonic() - back < 5.0
    await fleet.close()

    # Reinstalled: a new host key. Both fingerprints show in the detail pane, at a
    # wide and at an 80-column terminal.
    old = asyncssh.import_public_key(second_sshd.public_key)
    second_sshd.stop()
    new = asyncssh.import_public_key(second_sshd.new_host_key())
    second_sshd.start()
    for size in ((200, 50), (80, 30)):
        app = GpuTuiApp(Fleet(config, timing=PEOPLE_TIMING), config)
        async with app.run_test(size=size) as pilot:
            await wait(
                lambda app=app: (
                    (e := app.model.hosts.get("gpu1")) is not None
                    and e.snapshot.status is HostStatus.HOST_KEY_CHANGED
                ),
                what="host key changed",
            )
            assert app.main.grid.select(HostRow("gpu1"))
            await pilot.pause()

            def both_shown(app: GpuTuiApp = app, wide: bool = size[0] >= 200) -> bool:
                # At 80 columns the pane is too narrow for a fingerprint on one line:
                # its wrapped lines, joined, must hold both whole.
                shown = set(FINGERPRINT.findall(detail_message(app)))
                if wide:  # and wide, each is on the screen in one piece
                    shown &= set(FINGERPRINT.findall(screen_text(app)))
                return shown >= {fingerprint(old), fingerprint(new)}

            await wait(both_shown, what=f"both fingerprints in the detail pane at {size}")
            assert all(len(line) <= size[0] for line in screen_text(app).splitlines())


def keygen(path: Path, passphrase: str = "") -> str:
    """An OpenSSH-made key; its public line (the .pub is removed: gputui must not need it)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "t", "-f", str(path)],
        check=True,
        capture_output=True,
    )
    pub = Path(f"{path}.pub")
    line = pub.read_text()
    pub.unlink()
    return line


async def test_an_encrypted_identity_file_held_by_a_full_agent_connects(
    sshd, fleets, wait, ssh_agent, tmp_path: Path
) -> None:
    # Seven other keys first: offered all, they would trip sshd's MaxAuthTries (6).
    for i in range(7):
        other = tmp_path / f"other{i}"
        keygen(other)
        ssh_agent.add(other)
    locked = tmp_path / "id_locked"
    public = keygen(locked, "correct horse")
    ssh_agent.add(locked, "correct horse")
    authorized = sshd.directory / "authorized_keys"
    before = authorized.read_text()
    authorized.write_text(before + public)
    try:
        config = sshd.config(
            [{"name": "locked", "identity_file": str(locked), "sim": "1xa10,name=locked"}]
        )
        # Without identity_file every agent key is offered, and sshd gives up first.
        defaults = config.defaults.model_copy(update={"identity_file": None})
        host = config.hosts[0].model_copy(update={"name": "all", "identity_file": None})
        everything = config.model_copy(update={"defaults": defaults, "hosts": [host]})
        fleet = await fleets(config)
        other_fleet = await fleets(everything)
        await wait(status_is(fleet, "locked", HostStatus.LIVE), what="live with the agent's key")
        snap = await wait(status_is(other_fleet, "all", HostStatus.AUTH_FAILED), what="too many")
        assert snap.message.startswith(
            f"too many authentication failures for {sshd.user}@127.0.0.1"
        )
        assert "IdentitiesOnly yes" in snap.message
    finally:
        authorized.write_text(before)


async def test_a_host_that_refuses_session_channels_is_a_helper_error(
    sshd, make_sshd, fleets, wait, tmp_path: Path
) -> None:
    # MaxSessions 0: logins work, forwarding works, no session (so no helper) opens.
    host = make_sshd("MaxSessions 0")
    known = tmp_path / "known_hosts"
    known.write_text(host.known_hosts_line())
    config = sshd.config([{"name": "nosess", "port": host.port, "known_hosts": str(known)}])
    fleet = await fleets(config)
    snap = await wait(status_is(fleet, "nosess", HostStatus.HELPER_ERROR), what="refused")
    assert snap.message.startswith("could not start the helper: ")
