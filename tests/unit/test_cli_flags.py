"""``gputui queue``'s flags block and idle reason: what the head sends is untrusted."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gputui.cli.flagged import action_text, flags_table, idle_reason

NOW = 1_700_000_000.0

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
FIELDS = (
    "host", "gpu_index", "pid", "uid", "user", "name", "kind", "since",
    "signal_at", "next_signal", "signalled",
)  # fmt: skip
flag_dicts = st.fixed_dictionaries({}, optional=dict.fromkeys(FIELDS, values))


@given(st.lists(flag_dicts | values, max_size=5) | values)
def test_any_flags_print_as_printable_lines_or_nothing(flags: Any) -> None:
    lines = flags_table(flags, NOW)
    for line in lines:
        assert line.isprintable() or line == "", repr(line)
        assert len(line) < 400


def test_a_flag_under_enforce_says_when_its_signal_goes() -> None:
    flag = {
        "host": "gpu01", "gpu_index": 2, "pid": 4242, "uid": 1003, "user": "bob",
        "name": "python\x1b]0;pwned\x07 train.py", "kind": "no-allocation", "since": NOW - 200,
        "signal_at": NOW + 100, "next_signal": "TERM", "signalled": None,
    }  # fmt: skip
    lines = flags_table([flag], NOW)
    assert lines[1] == "FLAGS: 1 process(es) on GPUs their owners were not given"
    assert lines[3].split()[:4] == ["bob", "gpu01:2", "4242", "python?]0;pwned?"]
    assert lines[3].endswith("no-allocation  3m   SIGTERM in 1m")
    assert action_text({**flag, "signalled": "TERM", "next_signal": "KILL"}, NOW) == (
        "SIGTERM sent, SIGKILL in 1m"
    )
    assert action_text({**flag, "signal_at": None, "signalled": "KILL"}, NOW) == "SIGKILL sent"
    assert action_text({**flag, "signal_at": None}, NOW) == "warn"
    assert flags_table([], NOW) == []


def test_a_running_job_idle_past_the_limit_says_idle_and_nothing_else_does() -> None:
    job = {"state": "running", "idle_since": NOW - 7500}
    assert idle_reason(job, 3600.0, NOW) == "Idle 2h05m"
    assert idle_reason(job, 9000.0, NOW) is None  # not yet past the head's limit
    assert idle_reason({**job, "state": "killing"}, 3600.0, NOW) is None
    assert idle_reason({**job, "idle_since": None}, 3600.0, NOW) is None
    assert idle_reason({**job, "idle_since": "soon"}, 3600.0, NOW) is None
    assert idle_reason(job, None, NOW) is None
