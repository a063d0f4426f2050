"""A helper that prints junk is reported with the reason it gives on stderr, if any."""

from __future__ import annotations

import pytest

from gputui.telemetry import HostStatus

JUNK = "sys.stdout.write('Welcome to gpu01!\\n'); sys.stdout.flush(); "


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # The reason comes well after the junk (far longer than a fixed short sleep).
        (
            JUNK + "import time; time.sleep(0.3); sys.stderr.write('late reason\\n'); sys.exit(1)",
            "; stderr: late reason",
        ),
        # Written in two pieces: the whole first line is kept, not its first piece.
        (
            JUNK + "sys.stderr.write('half a'); sys.stderr.flush(); import time; "
            "time.sleep(0.2); sys.stderr.write(' line\\n'); sys.stdin.read()",
            "; stderr: half a line",
        ),
    ],
    ids=["late", "in_pieces"],
)
async def test_junk_is_reported_with_the_stderr_that_follows_it(
    kit, body: str, expected: str
) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    python = kit.fake_python("python-junk", body)
    fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}])
    )
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.HELPER_ERROR and s,
        what="helper error",
    )
    assert "not the gputui protocol: 'Welcome to gpu01!'" in snap.message
    assert snap.message.endswith(expected)


async def test_junk_without_stderr_from_a_helper_that_stays_is_reported(kit) -> None:
    """Nothing on stderr and no exit: the error still comes, without a stderr part."""
    server = await kit.servers.start()
    kit.known_hosts(server)
    python = kit.fake_python("python-junk", JUNK + "sys.stdin.read()")
    fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}])
    )
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).status is HostStatus.HELPER_ERROR and s,
        what="helper error",
    )
    assert snap.message.endswith("not the gputui protocol: 'Welcome to gpu01!'")
