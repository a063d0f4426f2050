"""A summary (an off-screen host's row, sent every few seconds) carries a stale limit
grown by its cadence: between two summaries the host is not stale, only unseen."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gputui.scheduler.client.deltas import HostView, summary_view


@given(st.floats(0.5, 3600), st.floats(0.5, 60))
def test_a_summary_is_stale_only_past_its_hosts_limit_and_its_cadence(
    limit: float, every: float
) -> None:
    view = HostView({"stale_after_s": limit, "sample": None}, (), ())
    assert summary_view(view, every).top["stale_after_s"] == limit + every
    assert summary_view(view).top["stale_after_s"] == limit  # no cadence: as it was
    none = HostView({"stale_after_s": None, "sample": None}, (), ())
    assert summary_view(none, every).top["stale_after_s"] is None  # the console's own
