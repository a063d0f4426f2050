"""``gputui queue``'s flags: processes on GPUs their owners hold nothing on, idle jobs.

Stdlib only (a scheduler verb must stay light: see ``gputui.cli.verbs``). Everything here
comes from the head and is shown as untrusted text: anything not printable is
``?``, every field is cut to its column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gputui.cli.layout import fit_table, wrap
from gputui.common.durations import coarse_text
from gputui.common.i18n import N_, _, pgettext
from gputui.common.job_words import idle_text
from gputui.common.printable import owner_name
from gputui.common.printable import shown as _shown
from gputui.common.untrusted import number as _number

KINDS = {
    "no-allocation": N_("no job or claim of theirs on the host"),
    "outside-allocation": N_("outside their jobs' and claims' GPUs"),
}
"""What each kind of flag means (the kind itself is a code, shown as it is)."""
HEADER = (N_("USER"), N_("GPU"), N_("PID"), N_("NAME"), N_("KIND"), N_("FOR"), N_("ACTION"))
MAX_SHOWN = 200


def idle_reason(job: dict[str, Any], idle_after_s: Any, now: float) -> str | None:
    """``Idle 2h05m`` for a running job idle past the head's limit; else None."""
    since, after = _number(job.get("idle_since")), _number(idle_after_s)
    if job.get("state") != "running" or since is None or after is None:
        return None
    idle = now - since
    return idle_text(coarse_text(idle)) if idle >= after else None


def action_text(flag: dict[str, Any], now: float) -> str:
    """``SIGTERM in 4m``, ``SIGTERM sent, SIGKILL in 4m``, ``SIGKILL sent``, ``warn``."""
    parts = []
    signalled = flag.get("signalled")
    if signalled in ("TERM", "KILL"):
        parts.append(_("{signal} sent").format(signal=f"SIG{signalled}"))
    at, signal = _number(flag.get("signal_at")), flag.get("next_signal")
    if at is not None and signal in ("TERM", "KILL"):
        due = at - now
        if due >= 1:
            parts.append(
                _("{signal} in {time}").format(signal=f"SIG{signal}", time=coarse_text(due))
            )
        else:
            parts.append(_("{signal} now").format(signal=f"SIG{signal}"))
    return ", ".join(parts) or pgettext("action", "warn")


def flags_table(flags: Any, now: float, width: int | None = None) -> list[str]:
    """The block under the queue: one line per flagged process and GPU (none: no lines);
    in ``width`` cells NAME, ACTION, KIND, GPU and USER are cut first."""
    if not isinstance(flags, list) or not flags:
        return []
    rows = [tuple(_(title) for title in HEADER)]
    for flag in flags[:MAX_SHOWN]:
        if not isinstance(flag, dict):
            continue
        since = _number(flag.get("since"))
        user = owner_name(flag.get("user"), flag.get("uid"))
        rows.append(
            (
                _shown(user, 12),
                _shown(f"{flag.get('host', '?')}:{flag.get('gpu_index', '?')}", 20),
                _shown(flag.get("pid", "?"), 8),
                _shown(flag.get("name") or "-", 24),
                _shown(flag.get("kind", "?"), 20),
                coarse_text(now - since) if since is not None else "-",
                _shown(action_text(flag, now), 32),
            )
        )
    if len(rows) == 1:
        return []
    count = len(rows) - 1
    said = _("FLAGS: {n} process(es) on GPUs their owners were not given").format(n=count)
    lines = ["", *wrap(said, width, 2)]
    lines += fit_table(rows, width, flex={3: 8, 6: 10, 4: 10, 1: 10, 0: 8})
    if len(flags) > MAX_SHOWN:
        lines.append(_("… and {n} more").format(n=len(flags) - MAX_SHOWN))
    kinds: Sequence[str] = sorted({str(f.get("kind")) for f in flags if isinstance(f, dict)})
    for k in kinds:
        if k in KINDS:
            lines += wrap(f"  {k}: {_(KINDS[k])}", width, 4)
    return lines
