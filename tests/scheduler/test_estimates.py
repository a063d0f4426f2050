"""``estimates``: the estimated start of the first requests in line, from one play of
the line (``explain.project``), as the week board draws them.

The projection asks each host only at the times its own cards free up; a reference
here asks every host at every time any card or booking frees up (what ``explain``
did before) and must give the same starts, hosts and cards. Whatever the line, no
two projected requests (or a running one) share a card at once, none sits in a
booking's window but its own, and each start is what ``explain`` says for that
request. From a live head the answer carries a waiting job's start at the end of
the work before it, capped at the limit asked, and one answer serves the requests
of the next ``ESTIMATES_KEPT_S``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from headkit import SettableClock
from headthread import LineClient, ThreadedHead, poll
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.scheduler.head import reader
from gputui.scheduler.policy import explain, model
from gputui.scheduler.policy.bookings import overlaps
from gputui.scheduler.server.read_args import MAX_ESTIMATES

INF = model.INF
NOW = 1000.0


def _reference(
    view: model.ClusterView, limit: int
) -> list[tuple[int, float, str, tuple[str, ...]]]:
    """The line played forward asking every host at every time anything frees up."""
    busy: dict[str, list[tuple[float, float]]] = {}
    for run in view.running:
        end = INF if run.ends_at is None else max(run.ends_at, view.now)
        for u in run.gpus:
            busy.setdefault(u, []).append((view.now, end))
    usable = [g for g in view.gpus if g.healthy and not g.drained]
    out = []
    for want in explain.line_of(view)[:limit]:
        if want.blocked is not None:
            continue
        by_host: dict[str, list[str]] = {}
        for g in usable:
            if want.fits(g):
                by_host.setdefault(g.host, []).append(g.uuid)
        times = {view.now} | {e for iv in busy.values() for _, e in iv if NOW < e < INF}
        times |= {b.end for b in view.bookings if b.end > NOW}
        own = next((b for b in view.bookings if b.id == want.booking), None)
        times |= {own.start} if own is not None and own.start > NOW else set()
        found = None
        for t in sorted(times):
            end = INF if want.time_limit_s is None else t + want.time_limit_s
            best: tuple[int, str, list[str]] | None = None
            for host, cards in sorted(by_host.items()):
                free = [
                    u
                    for u in cards
                    if all(e <= t or s >= end for s, e in busy.get(u, []))
                    and (
                        (own is not None and u in own.uuids and own.start <= t < own.end)
                        if want.booking is not None
                        else not any(
                            u in b.uuids and overlaps(t, end, b.start, b.end) for b in view.bookings
                        )
                    )
                ]
                if len(free) >= want.gpus and (best is None or len(free) < best[0]):
                    best = (len(free), host, free[: want.gpus])
            if best is not None:
                found = (t, best[1], best[2], end)
                break
        if found is None:
            continue
        t, host, cards, end = found
        for u in cards:
            busy.setdefault(u, []).append((t, end))
        out.append((want.id, t, host, tuple(cards)))
    return out


@st.composite
def views(draw: st.DrawFn) -> model.ClusterView:
    hosts = draw(st.integers(1, 4))
    gpus = tuple(
        model.GpuSlot(
            f"GPU-{h}-{i}",
            f"h{h}",
            i,
            pool=draw(st.sampled_from(["a100", "h100"])),
            healthy=draw(st.integers(0, 9)) > 0,
        )
        for h in range(hosts)
        for i in range(draw(st.integers(1, 4)))
    )
    running = tuple(
        model.Running(
            "job",
            100 + k,
            g.host,
            (g.uuid,),
            ends_at=draw(st.one_of(st.none(), st.floats(NOW - 50, NOW + 500))),
        )
        for k, g in enumerate(gpus)
        if draw(st.booleans())
    )
    bookings = []
    cards = draw(st.lists(st.sampled_from(gpus), max_size=2, unique=True))
    for b, card in enumerate(cards):  # (each on a card of its own: two never share one)
        start = NOW + draw(st.floats(0, 400))
        end = start + draw(st.floats(10, 300))
        bookings.append(model.Booked(1 + b, "carol", (card.uuid,), start, end))
    waiting = tuple(
        model.Want(
            "job",
            j,
            draw(st.integers(1, 3)),
            user="alice",
            pool=draw(st.sampled_from([None, "a100", "h100"])),
            since=float(j),
            time_limit_s=draw(st.one_of(st.none(), st.sampled_from([30.0, 100.0, 250.0]))),
            blocked=model.DEPENDENCY if draw(st.integers(0, 9)) == 0 else None,
            booking=draw(st.sampled_from([None, None, None, 1, 2])),
        )
        for j in range(1, draw(st.integers(1, 14)))
    )
    return model.ClusterView(
        gpus=gpus,
        waiting=waiting,
        running=running,
        now=NOW,
        bookings=tuple(bookings),
    )


@settings(max_examples=300, deadline=None)
@given(views(), st.integers(1, 20))
def test_asking_each_host_at_its_own_times_finds_what_asking_everywhere_finds(
    view: model.ClusterView, limit: int
) -> None:
    got = [(p.want.id, p.start, p.host, p.uuids) for p in explain.project(view, None, limit)]
    assert got == _reference(view, limit)


@settings(max_examples=300, deadline=None)
@given(views())
def test_no_card_is_projected_twice_at_once_nor_into_anothers_booking(
    view: model.ClusterView,
) -> None:
    placed = explain.project(view, None, len(view.waiting))
    taken: dict[str, list[tuple[float, float]]] = {}
    for run in view.running:
        end = INF if run.ends_at is None else max(run.ends_at, NOW)
        for u in run.gpus:
            taken.setdefault(u, []).append((NOW, end))
    by_id = {w.id: w for w in view.waiting}
    for p in placed:
        want = by_id[p.want.id]
        assert want.blocked is None
        assert len(p.uuids) == want.gpus and p.start >= NOW
        end = INF if p.end is None else p.end
        assert p.end is None or p.end == p.start + (want.time_limit_s or 0)
        fitting = {g.uuid: g for g in view.gpus if want.fits(g) and g.healthy}
        for u in p.uuids:
            assert u in fitting and fitting[u].host == p.host
            assert all(not overlaps(p.start, end, s, e) for s, e in taken.get(u, [])), (p, taken)
            assert not any(
                u in b.uuids and overlaps(p.start, end, b.start, b.end) and b.id != want.booking
                for b in view.bookings
            )
            if want.booking is not None:  # only on its booking's cards, while it is on
                own = next(b for b in view.bookings if b.id == want.booking)
                assert u in own.uuids and own.start <= p.start < own.end
            taken.setdefault(u, []).append((p.start, end))
        # The week board and ``explain`` say the same start for it.
        assert explain.estimate_start(view, want).start == p.start


def _state(client: LineClient, job_id: int) -> dict[str, object]:
    return dict(client.ok("show", {"job_id": job_id})["job"])


def test_a_waiting_job_is_estimated_to_start_when_the_work_before_it_ends(
    tmp_path: Path,
) -> None:
    clock = SettableClock()
    with ThreadedHead(tmp_path, {"gpu01": 4}, clock=clock) as th, LineClient(th.sock) as c:
        big = c.ok("submit", {"argv": ["train"], "gpus": 4, "time_limit_s": 3600})["job"]
        poll(lambda: _state(c, big["id"])["state"] == "running", what="the 4-GPU job")
        started = float(str(_state(c, big["id"])["started_at"]))
        first = c.ok("submit", {"argv": ["eval"], "gpus": 2, "time_limit_s": 600, "name": "ev"})
        second = c.ok("submit", {"argv": ["sweep"], "gpus": 4})
        told = c.ok("estimates", {"limit": 10})
        rows = {e["id"]: e for e in told["estimates"]}
        ev = rows[first["job"]["id"]]
        assert ev["kind"] == "job" and ev["user"] == "root" and ev["name"] == "ev"
        assert ev["start"] == pytest.approx(started + 3600)
        assert ev["end"] == pytest.approx(started + 3600 + 600)
        assert ev["host"] == "gpu01" and len(ev["gpu_uuids"]) == 2 and ev["gpus"] == 2
        # No limit: it starts when the eval ends, and never ends.
        sweep = rows[second["job"]["id"]]
        assert sweep["start"] == pytest.approx(started + 3600 + 600) and sweep["end"] is None
        assert told["in_line"] == 2
        # The same start ``explain`` gives.
        said = c.ok("explain", {"job_id": first["job"]["id"]})["estimate"]["start"]
        assert said == pytest.approx(ev["start"])
        assert (ev["position"], sweep["position"]) == (1, 2)
        # Capped at what was asked (from the answer just made: one serves the next 10 s).
        assert [e["id"] for e in c.ok("estimates", {"limit": 1})["estimates"]] == [ev["id"]]
        late = c.ok("submit", {"argv": ["late"], "gpus": 1, "time_limit_s": 60})["job"]["id"]
        kept = c.ok("estimates", {"limit": 10})
        assert kept == told  # (the same answer, the new job not in it yet)
        th.in_loop(lambda: clock.advance(reader.ESTIMATES_KEPT_S))
        fresh = c.ok("estimates", {"limit": 10})
        assert late in {e["id"] for e in fresh["estimates"]} and fresh["in_line"] == 3
        for bad in (0, MAX_ESTIMATES + 1, "5", True):
            refused = c.ask("estimates", {"limit": bad})
            assert refused.get("ok") is False, refused
        assert th.problems == []
