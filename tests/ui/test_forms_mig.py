"""``--mig PROFILE`` in the console's claim and submit forms: the field reads a profile
exactly as the command line's ``--mig`` does (``mig_arg``), and what it reads reaches
a real head the way the CLI's does: a claim or a job on slices of that profile, by
their ``MIG-`` UUIDs (80x24 and 200x50). A profile that is none is refused under the
field, and nothing is sent.

The head is the real daemon on a real Unix socket and SQLite file; its host is
scripted (``headkit``) with one A100 in MIG mode (two 1g.10gb slices and a 3g.40gb)
and one whole A100.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_scheduler import connected, console
from textual.widgets import Input
from ui_helpers import screen_text, until

from gputui.common.mig_profile import mig_arg
from gputui.ui.screens.confirm import ConfirmScreen
from gputui.ui.screens.forms import ClaimScreen, FormProblem, SubmitScreen, _mig
from gputui.ui.screens.main import MainScreen

from headkit import ScriptedHosts, running_head  # isort: skip  (tests/scheduler, on sys.path via test_scheduler)

SIZES = [(80, 24), (200, 50)]
PROFILES = ("1g.10gb", "1g.10gb", "3g.40gb")


@given(
    st.one_of(
        st.text(max_size=30),
        st.from_regex(r"\s*([1-8]c\.)?[0-9]g\.[0-9]{1,5}GB?(\+[a-z]{1,9}){0,3}\s*", fullmatch=True),
    )
)
def test_the_field_reads_a_profile_as_the_command_line_does(text: str) -> None:
    try:
        want: str | None = mig_arg(text) if text.strip() else None
    except argparse.ArgumentTypeError:
        with pytest.raises(FormProblem) as refused:
            _mig(text, "f-mig")
        assert refused.value.field == "f-mig" and "\n" not in str(refused.value)
        assert str(refused.value).startswith("MIG: ")
        return
    assert _mig(text, "f-mig") == want


def _hosts() -> ScriptedHosts:
    return ScriptedHosts({"gpu01": 2}, mig={"gpu01": {0: PROFILES}})


@pytest.mark.parametrize("size", SIZES)
async def test_a_claim_and_a_job_from_the_forms_get_slices_of_the_profile(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    hosts = _hosts()
    slices = {hosts.slice_uuid("gpu01", 0, j): p for j, p in enumerate(PROFILES)}
    # (the head sees 5 units: the two cards and the first one's three slices)
    async with running_head(tmp_path, {"gpu01": 5}, scripted=hosts) as (_head, _h, sock):
        app = console(sock)
        async with app.run_test(size=size) as pilot:
            await connected(pilot, app)
            link = app.head.link
            assert link is not None

            def claims() -> list[tuple[str, tuple[str, ...], int]]:
                view = link.view
                return [(c.state, c.gpu_uuids, c.gpus) for c in view.claims] if view else []

            # A profile that is none: refused under the field, nothing sent.
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            form = app.screen
            form.query_one("#f-mig", Input).value = "big"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: "not a MIG profile" in screen_text(app), "the refusal")
            assert app.focused is form.query_one("#f-mig") and not form.sending
            assert claims() == []

            # One 1g.10gb slice (written as the CLI would take it: any case, spaces).
            form.query_one("#f-mig", Input).value = " 1G.10GB "
            await pilot.press("ctrl+s")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "the form closed")
            await until(pilot, lambda: len(claims()) == 1, "the claim")
            ((state, uuids, _n),) = claims()
            assert state == "active" and len(uuids) == 1 and slices[uuids[0]] == "1g.10gb"

            # Two more 1g.10gb: one is left, so the claim waits in line, asked as it is
            # (not planned as whole cards: no question of which cards).
            await pilot.press("C")
            await until(pilot, lambda: isinstance(app.screen, ClaimScreen), "the claim form")
            form = app.screen
            form.query_one("#f-gpus", Input).value = "2"
            form.query_one("#f-mig", Input).value = "1g.10gb"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: len(claims()) == 2, "the second claim")
            assert not isinstance(app.screen, ConfirmScreen)
            assert ("waiting", (), 2) in claims()

            # A job on the 3g.40gb slice from the enqueue form.
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, SubmitScreen), "the enqueue form")
            form = app.screen
            form.query_one("#f-command", Input).value = "python train.py"
            form.query_one("#f-cwd", Input).value = "/"
            form.query_one("#f-mig", Input).value = "3g.40gb"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: bool(hosts.launches), "the job's launch")
            (launch,) = hosts.launches
            assert [slices.get(u) for u in launch.gpu_uuids] == ["3g.40gb"]
