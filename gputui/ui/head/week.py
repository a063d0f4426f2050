"""The console's side of the week screen (``W``): open it, ask the head for the
week's bookings and the estimated start of the waiting jobs (one ``estimates``
request for the first ``ESTIMATES_ASKED`` in line, not an ``explain`` a job), and lay
them out with the GPUs, active claims and running jobs the head last pushed.

The answers are untrusted like every other: each booking's and estimate's strings
cleaned and cut, its numbers range-checked, a malformed one left out
(``parse_bookings``, ``parse_estimates``), never raising. Without a head, with the
head away, or with a head too old to know ``bookings``, the screen says so in one
line; a head too old to know ``estimates`` gives a board without them, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from textual.app import App

from gputui.common.i18n import _
from gputui.common.text import clean
from gputui.common.text import clean_str as _text
from gputui.common.untrusted import epoch, integer
from gputui.scheduler.client.errors import HeadError
from gputui.telemetry import HostSnapshot
from gputui.ui.head.link import HeadLink
from gputui.ui.head.requests import HeadRequests
from gputui.ui.head.view import HeadView
from gputui.ui.screens.week import REFRESH_S, WeekScreen
from gputui.ui.widgets.week_board import Bar, BoardRow

SLICE_PREFIX = "MIG-"
"""A MIG slice's uuid starts so (a card's: ``GPU-``)."""
WEEK_TIMEOUT_S = 20.0
MAX_BOOKINGS = 10_000
ESTIMATES_ASKED = 100
"""The waiting requests in line the week view asks the head to project (the head
allows 300): more than a board shows."""


def parse_bookings(answer: Any) -> list[Bar]:
    """The ``bookings`` answer -> bars; anything malformed is left out."""
    items = answer.get("bookings") if isinstance(answer, Mapping) else None
    if not isinstance(items, list):
        return []
    out: list[Bar] = []
    for raw in items[:MAX_BOOKINGS]:
        if not isinstance(raw, Mapping):
            continue
        ident = integer(raw.get("id"), 1, 2**53)
        start, end = epoch(raw.get("start")), epoch(raw.get("end"))
        cards = raw.get("gpu_uuids")
        if ident is None or start is None or end is None or end <= start:
            continue
        if not isinstance(cards, list) or raw.get("state") in ("cancelled", "released"):
            continue  # (a booking given up holds nothing: the board shows what is promised)
        rows = tuple(clean(u, 96) for u in cards[:256] if isinstance(u, str))
        kind = "maint" if raw.get("maint") is True else "booking"
        user, note = _text(raw.get("user"), 32), _text(raw.get("note"), 80)
        out.append(Bar(kind, ident, rows, start, end, user, note))
    return out


def parse_estimates(answer: Any) -> list[Bar]:
    """The ``estimates`` answer -> a bar for each waiting job with an estimated start
    (a waiting claim's is left out: the board draws jobs); anything malformed is left
    out."""
    items = answer.get("estimates") if isinstance(answer, Mapping) else None
    if not isinstance(items, list):
        return []
    out: list[Bar] = []
    for raw in items[:ESTIMATES_ASKED]:
        if not isinstance(raw, Mapping) or raw.get("kind") != "job":
            continue
        ident = integer(raw.get("id"), 1, 2**53)
        gpus = integer(raw.get("gpus"), 1, 4096)
        start, end = epoch(raw.get("start")), epoch(raw.get("end"))
        cards = raw.get("gpu_uuids")
        if ident is None or gpus is None or start is None or not isinstance(cards, list):
            continue
        if raw.get("end") is not None and (end is None or end <= start):
            continue
        rows = tuple(clean(u, 96) for u in cards[:256] if isinstance(u, str))
        user, name = _text(raw.get("user"), 32), _text(raw.get("name"), 80)
        out.append(Bar("estimate", ident, rows, start, end, user, name, gpus=gpus))
    return out


def board_of(
    view: HeadView | None,
    bookings: Iterable[Bar],
    profiles: Mapping[str, str] | None = None,
) -> tuple[list[BoardRow], list[Bar]]:
    """The GPUs the head knows (by host, then index, a card's MIG slices under it:
    ``└`` and the profile ``profiles`` names for its uuid) and the bars: the bookings,
    the active claims (to their expiry, or open) and the jobs running now (to their
    time limit's end, or open)."""
    if view is None:
        return [], list(bookings)
    known = profiles or {}
    gpus = sorted(
        view.gpus, key=lambda g: (g.host, g.index, g.uuid.startswith(SLICE_PREFIX), g.uuid)
    )
    sliced = {(g.host, g.index) for g in gpus if g.uuid.startswith(SLICE_PREFIX)}
    rows = []
    for g in gpus:
        if g.uuid.startswith(SLICE_PREFIX):
            rows.append(BoardRow(g.uuid, "└" + clean(known.get(g.uuid) or "MIG", 24), g.pool))
        else:  # (a card in MIG mode is not counted in its pool: its slices are)
            whole = g.state != "mig" and (g.host, g.index) not in sliced
            rows.append(BoardRow(g.uuid, f"{g.host}:{g.index}", g.pool, counted=whole))
    bars = list(bookings)
    for job in view.jobs:
        if not job.live or not job.gpu_uuids or job.started_at is None:
            continue
        end = job.started_at + job.time_limit_s if job.time_limit_s else None
        bars.append(Bar("job", job.id, job.gpu_uuids, job.started_at, end, job.user, job.name))
    for claim in view.claims:
        if claim.state != "active" or not claim.gpu_uuids or claim.granted_at is None:
            continue
        until = claim.expires_at
        if until is not None and until <= claim.granted_at:
            continue  # (a window that holds nothing)
        bars.append(
            Bar(
                "claim",
                claim.id,
                claim.gpu_uuids,
                claim.granted_at,
                until,
                claim.user,
                claim.note,
            )
        )
    return rows, bars


def slice_profiles(snapshots: Mapping[str, HostSnapshot]) -> dict[str, str]:
    """Each MIG slice's uuid -> its profile, as its host's ``hello`` says."""
    out: dict[str, str] = {}
    for snap in snapshots.values():
        hello = snap.hello
        for gpu in hello.gpus if hello is not None else ():
            for piece in gpu.mig:
                if piece.profile is not None:
                    out[piece.uuid] = piece.profile
    return out


def estimates_note(exc: HeadError) -> str:
    """Why the board has no estimated jobs, in a line."""
    if exc.code == "unknown-op":
        return _("no estimated starts: the head is too old (upgrade it)")
    return clean(_("no estimated starts: {message}").format(message=exc.message), 200)


def week_problem(exc: HeadError) -> str:
    if exc.code == "unknown-op":
        return _("the head is too old to answer bookings requests (upgrade it)")
    if exc.message.startswith("head unreachable") or exc.code == "unsupported":
        return clean(exc.message, 300)
    return clean(_("the head refused bookings: {message}").format(message=exc.message), 300)


class WeekActions:
    """``W``: the week screen and its reads of the head's bookings."""

    def __init__(
        self,
        app: App[None],
        asks: HeadRequests,
        clock: Callable[[], float],
        view: Callable[[], HeadView | None],
        snapshots: Callable[[], Mapping[str, HostSnapshot]] = dict,
    ) -> None:
        self.app = app
        self.asks = asks
        self.clock = clock
        self.view = view
        """The head's last pushed state (GPUs, running jobs)."""
        self.snapshots = snapshots
        """The console's telemetry: its hosts' ``hello`` names each MIG slice's profile."""
        self.refresh_s: float = REFRESH_S

    def open_week(self) -> None:
        app = self.app
        if any(isinstance(screen, WeekScreen) for screen in app.screen_stack):
            return

        def closed(_: None) -> None:
            app.workers.cancel_group(app, "week")

        app.push_screen(WeekScreen(clock=self.clock, refresh_s=self.refresh_s), closed)

    def fetch(self, message: WeekScreen.Wanted) -> None:
        link = self.asks.connected(
            lambda why: message.screen.show_problem(message.token, why), "bookings"
        )
        if link is not None:
            self.asks.ask_in_worker("week", "the week's bookings", self._fetch(link, message))

    async def _fetch(self, link: HeadLink, message: WeekScreen.Wanted) -> None:
        since, until = message.since, message.until
        try:
            answer = await link.ask(
                "bookings",
                lambda b: b.bookings(since=since, until=until, all=True, timeout=WEEK_TIMEOUT_S),
            )
        except HeadError as exc:
            message.screen.show_problem(message.token, week_problem(exc))
            return
        guessed: list[Bar] = []
        note = None
        try:
            projected = await link.ask(
                "estimates",
                lambda b: b.estimates(limit=ESTIMATES_ASKED, timeout=WEEK_TIMEOUT_S),
            )
            guessed = parse_estimates(projected)
        except HeadError as exc:  # the bookings still show, without the guesses
            note = estimates_note(exc)
        booked = [*parse_bookings(answer), *guessed]
        rows, bars = board_of(self.view(), booked, slice_profiles(self.snapshots()))
        message.screen.show_week(message.token, rows, bars, note)
