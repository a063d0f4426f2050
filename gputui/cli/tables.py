"""What the scheduler's verbs print: the tables of ``gputui queue``, ``claims`` and
``audit`` (Slurm-like columns), the cards that take no new work (under ``queue``, and
after ``drain``), and JSON.

Everything shown comes from the scheduler and is shown as untrusted text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from gputui.cli.flagged import idle_reason
from gputui.cli.layout import fit_table, pad, wrap
from gputui.common.arrays import fold
from gputui.common.durations import coarse_text, elapsed_text
from gputui.common.i18n import N_, _
from gputui.common.job_words import gpu_state_text, reason_text, state_text
from gputui.common.printable import shown
from gputui.common.untrusted import number

MAX_SHOWN = 200
"""Cards listed at most (then how many more)."""


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))


def when(epoch: float | None) -> str:
    return "-" if not epoch else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


WEEKDAYS = (N_("Mon"), N_("Tue"), N_("Wed"), N_("Thu"), N_("Fri"), N_("Sat"), N_("Sun"))
MONTHS = (
    N_("Jan"),
    N_("Feb"),
    N_("Mar"),
    N_("Apr"),
    N_("May"),
    N_("Jun"),
    N_("Jul"),
    N_("Aug"),
    N_("Sep"),
    N_("Oct"),
    N_("Nov"),
    N_("Dec"),
)
"""The days and months a date names, in the chosen language (``strftime`` would say
them in the C locale's English whatever the language)."""


def day_text(epoch: float) -> str:
    """``Thu 03 Dec 09:00`` (local time), in the chosen language."""
    t = time.localtime(epoch)
    return _("{weekday} {day} {month} {clock}").format(
        weekday=_(WEEKDAYS[t.tm_wday]),
        day=f"{t.tm_mday:02d}",
        month=_(MONTHS[t.tm_mon - 1]),
        clock=time.strftime("%H:%M", t),
    )


def date_text(epoch: float) -> str:
    """``Thu 2026-12-03 09:00`` (local time), in the chosen language."""
    t = time.localtime(epoch)
    return _("{weekday} {date} {clock}").format(
        weekday=_(WEEKDAYS[t.tm_wday]),
        date=time.strftime("%Y-%m-%d", t),
        clock=time.strftime("%H:%M", t),
    )


def queue_table(
    jobs: Sequence[dict[str, Any]],
    now: float,
    idle_after_s: Any = None,
    width: int | None = None,
) -> list[str]:
    """Slurm-like columns: JOBID USER NAME STATE GPUS HOST TIME REASON (an array's
    waiting tasks fold into one line, ``12_[4-31]``; a running job
    idle past the head's limit, ``idle_after_s``, says ``Idle 2h05m`` there). In
    ``width`` cells: REASON, NAME, HOST and USER are cut first, then HOST goes. The
    titles, states and reasons are in the chosen language (``--json`` keeps the codes)."""
    titles = (
        N_("JOBID"),
        N_("USER"),
        N_("NAME"),
        N_("STATE"),
        N_("GPUS"),
        N_("HOST"),
        N_("TIME"),
        N_("REASON"),
    )
    rows = [tuple(_(t) for t in titles)]
    for label, job, _count in fold(jobs):  # an array's waiting tasks: one line
        started = job.get("started_at")
        ended = job.get("ended_at")
        elapsed = elapsed_text((ended or now) - started) if started else "0:00"
        rows.append(
            (
                shown(label, 40),
                shown(job.get("user", ""), 12),
                shown(job.get("name", ""), 20),
                state_text(shown(job.get("state", ""), 10)),
                str(job.get("gpus", "")),
                shown(job.get("host") or "-", 16),
                elapsed,
                idle_reason(job, idle_after_s, now)
                or reason_text(shown(job.get("reason") or "-", 40)),
            )
        )
    return fit_table(rows, width, flex={7: 10, 2: 8, 5: 8}, drop=(5, 2))


CLAIM_STATES = {
    "waiting": N_("waiting"),
    "active": N_("active"),
    "released": N_("released"),
    "expired": N_("expired"),
    "cancelled": N_("cancelled"),
}
"""A claim's states, as ``claims`` shows them (``--json`` keeps the codes)."""


def claim_state_text(state: str) -> str:
    """A claim's state in the chosen language; one not listed as it came."""
    return _(CLAIM_STATES[state]) if state in CLAIM_STATES else state


def claims_table(
    claims: Sequence[dict[str, Any]], now: float, width: int | None = None
) -> list[str]:
    """CLAIM USER STATE GPUS HOST AGE EXPIRES NOTE; in ``width`` cells NOTE, STATE's
    reason, HOST and USER are cut first, then EXPIRES and NOTE go."""
    titles = (
        N_("CLAIM"),
        N_("USER"),
        N_("STATE"),
        N_("GPUS"),
        N_("HOST"),
        N_("AGE"),
        N_("EXPIRES"),
        N_("NOTE"),
    )
    rows = [tuple(_(t) for t in titles)]
    for c in claims:
        since = c.get("granted_at") or c.get("created_at") or now
        expires = c.get("expires_at")
        rows.append(
            (
                f"c{c['id']}",
                shown(c.get("user", ""), 12),
                claim_state_text(shown(c.get("state", ""), 9))
                + (
                    ""
                    if c.get("state") == "active"
                    else f" ({c.get('reason') or c.get('release_reason') or ''})"
                ),
                str(len(c.get("gpu_uuids") or []) or c.get("gpus", "")),
                shown(c.get("host") or "-", 16),
                elapsed_text(now - since),
                when(expires) if expires else "-",
                shown(c.get("note") or "", 30),
            )
        )
    return fit_table(rows, width, flex={7: 4, 2: 9, 4: 8, 1: 8}, drop=(6, 7))


def audit_table(rows: Sequence[dict[str, Any]], width: int | None = None) -> list[str]:
    """TIME ACTOR ACTION TARGET OWNER REASON OUTCOME: who did what to whose work, why,
    and what came of it. ACTOR is who acted (an admin, an owner on their own work, or
    the head itself); OWNER is whose work it was, ``-`` when it was the actor's own.
    In ``width`` cells every column stays: the time to the minute, the free text cut
    (``--json`` has it whole)."""
    narrow = width is not None and width < 120
    titles = (
        N_("TIME"),
        N_("ACTOR"),
        N_("ACTION"),
        N_("TARGET"),
        N_("OWNER"),
        N_("REASON"),
        N_("OUTCOME"),
    )
    out = [tuple(_(t) for t in titles)]
    for r in rows:
        owner = r.get("owner") or "-"
        out.append(
            (
                when(r.get("time"))[5:16] if narrow and r.get("time") else when(r.get("time")),
                shown(r.get("user") or "", 12),
                shown(r.get("action") or "", 13),
                shown(r.get("target") or "", 16),
                shown("-" if owner == r.get("user") else owner, 16),
                shown(r.get("reason") or "-", 40),
                shown(r.get("outcome") or "-", 60),
            )
        )
    flex = {6: 9, 5: 9, 3: 9, 4: 8, 1: 8, 2: 8}
    return fit_table(out, width, flex=flex)


def _since(part: Any, now: float) -> str:
    at = number(part.get("since")) if isinstance(part, dict) else None
    if at is None:
        return ""
    return " " + _("for {span}").format(span=coarse_text(max(0.0, now - at)))


def gpu_lines(gpus: list[Any], now: float, width: int | None = None) -> list[str]:
    """One line a GPU: where, state, and the drain's and fence's who, why, since when
    (wrapped under the state in ``width`` cells)."""
    lines = []
    for g in gpus[:MAX_SHOWN]:
        if not isinstance(g, dict):
            continue
        where = shown(f"{g.get('host', '?')}:{g.get('index', '?')}", 40)
        parts = []
        drain, fence = g.get("drain"), g.get("fence")
        if isinstance(fence, dict):
            parts.append(
                _("FENCED {code}{since}: {reason}").format(
                    code=shown(fence.get("code"), 32),
                    since=_since(fence, now),
                    reason=shown(fence.get("reason"), 120),
                )
            )
        if isinstance(drain, dict):
            parts.append(
                _("DRAINED by {who}{since}: {reason}").format(
                    who=shown(drain.get("by"), 32),
                    since=_since(drain, now),
                    reason=shown(drain.get("reason"), 120),
                )
            )
        elif g.get("host_drained") is True:
            parts.append(_("DRAINED (its host)"))
        state = gpu_state_text(shown(g.get("state"), 16))
        lines += wrap(f"{pad(where, 20)} {'; '.join(parts) or state}", width, 21)
    if len(gpus) > MAX_SHOWN:
        lines.append(_("… and {count} more").format(count=len(gpus) - MAX_SHOWN))
    return lines


def unavailable_table(gpus: Any, now: float, width: int | None = None) -> list[str]:
    """The block under the queue (no such cards: no lines)."""
    if not isinstance(gpus, list) or not gpus:
        return []
    head = _(
        "UNAVAILABLE: {count} GPU(s) take no new work (drained by an admin, or fenced)"
    ).format(count=len(gpus))
    return ["", *wrap(head, width, 2), *gpu_lines(gpus, now, width)]
