"""``gputui audit``'s table: ACTOR is who acted; OWNER whose work it was, ``-`` when
it was the actor's own (one name for the column in the CLI and the console)."""

from __future__ import annotations

from gputui.cli.tables import audit_table


def test_actor_and_owner_where_it_differs() -> None:
    rows = [
        {"time": 0, "user": "alice", "action": "cancel", "target": "job 3", "owner": "alice"},
        {"time": 0, "user": "carol", "action": "kill", "target": "job 4", "owner": "bob"},
        {"time": 0, "user": "gputui-head", "action": "fence", "target": "n:1", "owner": ""},
    ]
    lines = audit_table(rows)
    assert lines[0].split() == ["TIME", "ACTOR", "ACTION", "TARGET", "OWNER", "REASON", "OUTCOME"]
    at = lines[0].index("OWNER")
    assert [line[at:].split()[0] for line in lines[1:]] == ["-", "bob", "-"]
