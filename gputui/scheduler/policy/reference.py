"""The scheduling rules applied the plain way: a reference for ``passes``.

For every request it sorts what is left of the line again and scans every GPU
again: no shared work between requests, no shortcuts. It is slow on purpose
(``bench/sched.py`` reports both, and checks the two decide the same), and it
is what the property tests compare the fast pass with.
"""

from __future__ import annotations

from gputui.scheduler.policy.bookings import barred, by_card, until_free
from gputui.scheduler.policy.model import (
    INF,
    OFF_HOURS,
    PREEMPTING,
    PRIORITY,
    QUOTA,
    RESERVATION,
    RESOURCES,
    ClusterView,
    Decisions,
    GpuSlot,
    Place,
    Preempt,
    Running,
    Wait,
    Want,
    static_reason,
    victims_for,
)
from gputui.scheduler.policy.passes import end_of
from gputui.scheduler.policy.state import Reservation


def decide_ref(view: ClusterView) -> Decisions:
    now = view.now
    gpus = sorted(view.gpus, key=lambda g: (g.host, g.index))
    by_uuid = {g.uuid: g for g in gpus}
    hosts = sorted({g.host for g in gpus})
    free = {g.uuid for g in gpus if g.free}
    # (host, end, uuids, running or None)
    # Plain lookups by host (no cached answers: every question is asked again).
    by_host: dict[str, list[GpuSlot]] = {h: [g for g in gpus if g.host == h] for h in hosts}
    runs_on: dict[str, list[Running]] = {h: [] for h in hosts}
    for r in view.running:
        runs_on.setdefault(r.host, []).append(r)
    holds: dict[str, list[tuple[float, tuple[str, ...], Running | None]]] = {h: [] for h in hosts}
    for r in view.running:
        end = INF if r.ends_at is None else r.ends_at
        holds.setdefault(r.host, []).append((end, r.gpus, r))
    soon: dict[str, list[str]] = {}
    for r in view.running:
        if r.stopping:
            soon.setdefault(r.host, []).extend(r.gpus)
    promised: set[str] = set()
    victims: set[int] = set()
    reserved: dict[str, Reservation] = {}
    place: list[Place] = []
    waits: list[Wait] = []
    preempts: list[Preempt] = []
    later: list[tuple[Want, float | None, str | None]] = []
    booked = by_card(view.bookings, now)
    booked_until = until_free(booked)

    def slots_of(host: str) -> list[GpuSlot]:
        return by_host[host]

    def fitting_free(want: Want, host: str) -> list[GpuSlot]:
        """Clean cards first (``GpuSlot.last``), then by index."""
        found = [g for g in slots_of(host) if g.uuid in free and want.fits(g)]
        return [g for g in found if not g.last] + [g for g in found if g.last]

    def could_hold(want: Want) -> list[str]:
        return [h for h in hosts if sum(1 for g in slots_of(h) if want.fits(g)) >= want.gpus]

    def hosts_map() -> dict[str, list[GpuSlot]]:
        return by_host

    remaining = list(view.waiting)
    while remaining:
        remaining.sort(key=Want.line_key)
        want = remaining.pop(0)
        if want.blocked is not None:
            waits.append(Wait(want.kind, want.id, want.blocked))
            continue
        if want.off_hours_only and not view.off_hours:
            waits.append(Wait(want.kind, want.id, OFF_HOURS))
            continue
        fixed = static_reason(want, hosts_map())
        if fixed is not None:
            waits.append(Wait(want.kind, want.id, fixed))
            continue
        end = end_of(want, now)
        candidates = could_hold(want)
        # -- place: fewest fitting free GPUs, reservations respected
        best: tuple[int, int, str, list[GpuSlot]] | None = None
        for host in candidates:
            ff = fitting_free(want, host)
            if len(ff) < want.gpus:
                continue
            size = len(ff)
            if want.named:
                ff = [g for g in ff if g.uuid in want.named]
                if len(ff) != len(set(want.named)) or len({g.vendor for g in ff}) > 1:
                    continue
            no = barred(want, end, now, booked, [g.uuid for g in ff])
            ff = [g for g in ff if g.uuid not in no]
            if len(ff) < want.gpus:
                continue
            res = reserved.get(host)
            if res is None or res.want is want or want.booking is not None:
                chosen = ff[: want.gpus]
            elif not view.backfill:
                continue
            elif end < INF and end <= res.start:
                chosen = ff[: want.gpus]
            else:
                others = [g for g in ff if not res.want.fits(g)][: want.gpus]
                short = want.gpus - len(others)
                if short > res.spare:
                    continue
                chosen = others + [g for g in ff if res.want.fits(g)][:short]
            dirty = sum(1 for g in chosen if g.last)
            if best is None or (dirty, size, host) < (best[0], best[1], best[2]):
                best = (dirty, size, host, chosen)
        if best is not None:
            _, _, host, chosen = best
            uuids = tuple(g.uuid for g in chosen)
            free.difference_update(uuids)
            holds[host].append((end, uuids, None))
            res = reserved.get(host)
            if (
                res is not None
                and res.want is not want
                and want.booking is None
                and not (end < INF and end <= res.start)
            ):
                res.spare -= sum(1 for g in chosen if res.want.fits(g))
            place.append(Place(want.kind, want.id, host, uuids))
            continue
        if want.kind != "job":
            later.append((want, None, None))
            continue
        # -- preempt
        if not want.over_quota and view.preemption:
            pick: tuple[tuple[int, int, str], str, tuple[int, ...], list[GpuSlot], list[str]] | None
            pick = None
            for host in candidates:
                res = reserved.get(host)
                if res is not None and res.want is not want:
                    continue
                ff = fitting_free(want, host)
                sn = [u for u in soon.get(host, ()) if u not in promised and want.fits(by_uuid[u])]
                need = want.gpus - len(ff) - len(sn)
                if need <= 0:
                    pick = ((0, 0, host), host, (), ff, sn)
                    break
                cands = []
                for r in runs_on.get(host, []):
                    if r.kind != "job" or r.stopping or r.id in victims:
                        continue
                    if now - r.started_at < view.min_runtime_s:
                        continue
                    if not (
                        (r.preemptible and r.rank > want.rank)
                        or (r.over_quota and not want.over_quota)
                    ):
                        continue
                    count = sum(1 for u in r.gpus if want.fits(by_uuid[u]))
                    if count:
                        cands.append((count, r.started_at, r.id))
                chosen_ids = victims_for(need, cands)
                if chosen_ids is None:
                    continue
                freed = sum(c[0] for c in cands if c[2] in chosen_ids)
                rank = (len(chosen_ids), freed, host)
                if pick is None or rank < pick[0]:
                    pick = (rank, host, chosen_ids, ff, sn)
            if pick is not None:
                # No preemption for cards a booking keeps from it.
                _, host, chosen_ids, ff, sn = pick
                keep = want.gpus
                take = [g.uuid for g in ff[:keep]] + sn[: max(0, keep - len(ff[:keep]))]
                keep -= len(take)
                for victim in chosen_ids:
                    victim_run = next(r for r in view.running if r.id == victim and r.kind == "job")
                    fit = [u for u in victim_run.gpus if want.fits(by_uuid[u])]
                    take.extend(fit[:keep] if keep > 0 else [])
                    keep -= min(keep, len(fit))
                if barred(want, end, now, booked, take):
                    pick = None
            if pick is not None:
                _, host, chosen_ids, ff, sn = pick
                keep = want.gpus
                held = [g.uuid for g in ff[:keep]]
                keep -= len(held)
                got = sn[:keep]
                keep -= len(got)
                for victim in chosen_ids:
                    victim_run = next(r for r in view.running if r.id == victim and r.kind == "job")
                    victims.add(victim)
                    preempts.append(Preempt(victim, host, want.kind, want.id))
                    fit = [u for u in victim_run.gpus if want.fits(by_uuid[u])]
                    got.extend(fit[:keep] if keep > 0 else [])
                    keep -= min(keep, len(fit))
                    soon.setdefault(host, []).extend(victim_run.gpus)
                promised.update(got)
                free.difference_update(held)
                waits.append(Wait(want.kind, want.id, PREEMPTING, None, host))
                continue
        # -- reserve: the soonest unreserved host
        soonest: tuple[float, str, int] | None = None
        for host in candidates if want.booking is None else ():
            if host in reserved:
                continue
            fitting = {g.uuid for g in slots_of(host) if want.fits(g)}
            # A booked card comes free no sooner than the last booking on it ends.
            have = len({u for u in fitting & free if u not in booked_until})
            events = [(booked_until[u], 1) for u in fitting & free if u in booked_until]
            for e, uuids, holder in holds.get(host, []):
                for u in uuids:
                    if u in fitting and u not in promised:
                        stopping = holder is not None and holder.stopping
                        at = now + view.grace_s if stopping else max(e, now)
                        events.append((max(at, booked_until.get(u, at)), 1))
            events.sort()
            start: float | None = now if have >= want.gpus else None
            for e, count in events:
                if start is not None and e > start:
                    break
                have += count
                if start is None and have >= want.gpus:
                    start = e
            if start is None:
                continue
            if soonest is None or (start, host) < (soonest[0], soonest[1]):
                soonest = (start, host, have - want.gpus)
        if soonest is not None:
            at, where, spare = soonest
            reserved[where] = Reservation(want, at, spare)
            later.append((want, None if at == INF else at, where))
            continue
        later.append((want, None, None))
    for want, start_at, on_host in later:
        hm = hosts_map()
        if want.over_quota:
            reason = QUOTA
        elif not any(
            sum(1 for g in slots if want.fits(g) and g.free) >= want.gpus for slots in hm.values()
        ):
            reason = RESOURCES
        else:
            reason = PRIORITY
            candidates = could_hold(want)
            for h, res in reserved.items():
                room = len(fitting_free(want, h)) >= want.gpus
                if res.want is not want and h in candidates and room:
                    reason = RESERVATION
        waits.append(Wait(want.kind, want.id, reason, start_at, on_host))
    return Decisions(tuple(place), tuple(waits), tuple(preempts))
