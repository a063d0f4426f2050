"""What the scheduler keeps and tells: ``gputui audit`` (the admins' actions),
``notices`` (what it told you while you were away) and ``whoami``.

Loaded only when one of them runs (``verbs.handler``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from gputui.cli.args import EXIT_OK
from gputui.cli.layout import pad, terminal_width, wrap
from gputui.cli.tables import audit_table, print_json
from gputui.common.i18n import _
from gputui.common.job_words import notice_kind_text
from gputui.common.printable import shown
from gputui.scheduler.client.backend import SyncBackend
from gputui.scheduler.client.errors import HeadError
from gputui.wire.words import shown as words_shown


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%d"))
    except ValueError:
        raise HeadError(
            "usage",
            _("--since: not a date: {text} (YYYY-MM-DD)").format(text=repr(shown(text, 40))),
        ) from None


def audit(backend: SyncBackend, a: argparse.Namespace) -> int:
    rows = backend.audit(since=_since(a.since))["rows"]
    if a.json:
        print_json(rows)
        return EXIT_OK
    for line in audit_table(rows, terminal_width()):
        print(line)
    return EXIT_OK


def notices(backend: SyncBackend, a: argparse.Namespace) -> int:
    """Your unread notices (marked read by the head once sent), or ``--all``."""
    rows = backend.notices(all=bool(a.all))["notices"]
    if a.json:  # as before: the English text (the template and args are for showing)
        plain = [{k: v for k, v in n.items() if k not in ("msg", "args")} for n in rows]
        json.dump(plain, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    if not rows:
        print(_("no notices") if a.all else _("no unread notices"))
        return EXIT_OK
    width = terminal_width()
    for n in rows:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(n["time"])))
        new = "*" if n.get("unread") and a.all else " "
        text = words_shown(shown(n["text"], 512), n.get("msg"), n.get("args"))
        kind = notice_kind_text(shown(n["kind"], 10))
        line = f"{new}{when}  {pad(kind, 10)} {shown(text, 512)}"
        for part in wrap(line, width, 33):
            print(part)
    return EXIT_OK


def whoami(backend: SyncBackend, a: argparse.Namespace) -> int:
    me = backend.whoami()
    if a.json:
        print_json(me)
        return EXIT_OK
    said = _("{user} (uid {uid}), groups {groups}, admin") if me["admin"] else None
    print(
        (said or _("{user} (uid {uid}), groups {groups}")).format(
            user=me["user"], uid=me["uid"], groups=", ".join(me["groups"])
        )
    )
    return EXIT_OK


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {
    "audit": audit,
    "notices": notices,
    "whoami": whoami,
}
