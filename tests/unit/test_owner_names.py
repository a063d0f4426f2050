"""A process's owner is named one way wherever a list shows one: the user name, else
``uid N`` when its host has no name for the uid, else ``?`` (never ``uid None``):
the console's flags, ``gputui queue``'s flags block, the head's ownership rule and
its force-free steps (``common.printable.owner_name``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gputui.cli.flagged import flags_table
from gputui.common.printable import owner_name, shown
from gputui.scheduler.head.forcefree import _holder_words
from gputui.scheduler.policy.ownership import GpuProc
from gputui.ui.head.flags import parse_flags

USERS = st.none() | st.just("") | st.from_regex(r"\A[a-z][a-z0-9]{0,7}\Z")
UIDS = st.none() | st.integers(0, 2**31)
FLAG: dict[str, Any] = {
    "host": "gpu01", "gpu_uuid": "GPU-1", "gpu_index": 1, "pid": 77, "name": "python",
    "kind": "no-allocation", "since": 1000.0, "signal_at": None, "next_signal": None,
}  # fmt: skip


@given(USERS, UIDS)
def test_every_list_names_an_owner_alike(user: str | None, uid: int | None) -> None:
    expected = user or (f"uid {uid}" if uid is not None else "?")
    assert owner_name(user, uid) == expected
    assert "None" not in expected
    flag = {**FLAG, "user": user, "uid": uid}
    (console,) = parse_flags([flag])
    assert console.user == expected
    cli_row = flags_table([flag], 2000.0, 200)[3]  # blank, title, header, the row
    assert cli_row.startswith(shown(expected, 12))  # the USER column is 12 wide
    proc = GpuProc("gpu01", "GPU-1", 1, 77, uid, user, "python", None)
    assert proc.owner == expected
    holder = _holder_words({"pid": 77, "user": user, "uid": uid})
    assert holder.english().startswith(f"pid 77 {expected} ")
