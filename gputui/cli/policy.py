"""The policy's command-line verbs: ``gputui explain JOB`` and ``gputui quota``.

Loaded only when one of them runs (``verbs.handler``). ``explain`` is ``sprio``
and ``sshare`` for one job: its place in line, each factor that put it there, the
requests ahead of it and a start estimated from the time limits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from gputui.cli.args import EXIT_OK
from gputui.cli.layout import fit_table, terminal_width, wrap
from gputui.cli.tables import date_text
from gputui.common.i18n import N_, _
from gputui.scheduler.client.backend import SyncBackend
from gputui.scheduler.client.explain_text import explain_lines, shown


def explain(backend: SyncBackend, a: argparse.Namespace) -> int:
    body = backend.explain(a.job)
    if a.json:
        json.dump(body, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    print("\n".join(explain_lines(body, time.time())))
    return EXIT_OK


def quota(backend: SyncBackend, a: argparse.Namespace) -> int:
    body = backend.quota()
    if a.json:
        json.dump(body, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    rows = body["quotas"]
    since = date_text(body["week_start"])
    if not rows:
        print(_("no quotas configured (scheduler.quotas in hosts.yaml)"))
        return EXIT_OK
    as_of = body.get("as_of")
    if isinstance(as_of, (int, float)) and as_of > 0:
        at = time.strftime("%H:%M:%S", time.localtime(as_of))
        title = _(
            "weekly GPU-hour quotas, this week since {since} (as the scheduler counts it, at {at})"
        ).format(since=since, at=at)
    else:
        title = _("weekly GPU-hour quotas, this week since {since}").format(since=since)
    width = terminal_width()
    for line in wrap(title, width, 2):
        print(line)
    titles = (N_("GROUP"), N_("POOL"), N_("USED"), N_("LIMIT"), N_("USE%"), N_("STATE"))
    table = [tuple(_(t) for t in titles)]
    for q in rows:
        limit = q["limit_gpu_h"]
        pct = 100.0 * q["used_gpu_h"] / limit if limit else 100.0
        state = _("over: its jobs run only on idle GPUs, preemptible") if q["over"] else _("within")
        table.append(
            (
                shown(q["group"], 16),
                shown(q["pool"], 12) if q["pool"] else _("(all)"),
                f"{q['used_gpu_h']:.1f}",
                f"{limit:g}",
                f"{pct:.0f}%",
                state,
            )
        )
    for line in fit_table(table, width, flex={5: 6, 0: 8, 1: 6}, right=(2, 3, 4)):
        print(line)
    return EXIT_OK


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {
    "explain": explain,
    "quota": quota,
}
