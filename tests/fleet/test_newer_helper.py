"""A newer helper over real SSH: message types this client does not know are noted once
and ignored, and the ``jobs`` message it pushes becomes the host's job list."""

from __future__ import annotations

from scripted_helper import job_state, plan_body

from gputui.health import data_notes
from gputui.telemetry import HostSnapshot, HostStatus


async def test_unknown_types_are_noted_once_and_the_session_stays(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    newer = [
        {"type": "telemetry-v2", "payload": {"x": 1}},
        {"type": "telemetry-v2", "payload": {"x": 2}},
        {"type": "\x1b]0;pwned\x07quota"},
        {"type": "jobs", "jobs": [job_state(7), job_state(8, "exited", exit_code=0)]},
    ]
    python = kit.fake_python("python-newer", plan_body(kit.tmp_path / "log", after_hello=newer))
    fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}])
    )
    seen: list[HostSnapshot] = []
    fleet.subscribe(seen.append)
    snap = await kit.wait_for(
        lambda: (s := kit.snap(fleet, "h1")).jobs and s.sample and s, what="jobs and a sample"
    )
    assert snap.status is HostStatus.LIVE
    assert [(j.job_id, j.state) for j in snap.jobs] == [(7, "running"), (8, "exited")]
    assert snap.jobs[1].exit_code == 0 and snap.jobs[0].pid == 4007
    assert snap.jobs_seen_at is not None
    assert snap.notes == (
        "ignored messages of unknown type 'telemetry-v2' (a newer helper?)",
        "ignored messages of unknown type 'quota' (a newer helper?)",
    )
    assert data_notes(snap)[-2:] == snap.notes  # shown like the decoder's own notes
    # The session was never dropped: samples keep coming on the same connection.
    before = fleet.samples_received()["h1"]
    await kit.wait_for(lambda: fleet.samples_received()["h1"] >= before + 3, what="samples")
    assert len(server.command_pids()) == 1
    assert all(s.status in (HostStatus.CONNECTING, HostStatus.LIVE) for s in seen)


async def test_a_bad_job_entry_is_dropped_with_a_note_and_a_new_state_is_unknown(kit) -> None:
    server = await kit.servers.start()
    kit.known_hosts(server)
    jobs = [
        job_state(1, exit_code=300),  # out of range: read as null, named in errors
        job_state(0),  # no identity: dropped
        job_state(3, "checkpointing"),  # a newer helper's state: unknown, not an error
        {"job_id": 4},  # no state at all: dropped
    ]
    body = plan_body(kit.tmp_path / "log", after_hello=[{"type": "jobs", "jobs": jobs}])
    python = kit.fake_python("python-newer", body)
    fleet = await kit.start_fleet(
        kit.config([{"name": "h1", "port": server.port, "python": python}])
    )
    snap = await kit.wait_for(lambda: (s := kit.snap(fleet, "h1")).jobs and s, what="jobs")
    assert [(j.job_id, j.state) for j in snap.jobs] == [(1, "running"), (3, "unknown")]
    assert snap.jobs[0].exit_code is None and snap.jobs[0].errors == {"exit_code": "OutOfRange"}
    assert not snap.jobs[1].active and not snap.jobs[1].ended
    assert len(snap.notes) == 2 and all(n.startswith("dropped job entry") for n in snap.notes)
    assert snap.status is HostStatus.LIVE
