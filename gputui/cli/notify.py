"""``gputui notify set|show|test|clear``: your notices in your team's chat too.

The URL (and a bot's signing secret) go to the head, which keeps them where only it
can read them; nothing here prints them back: the head answers with the URL's
tokens masked. ``-`` reads the URL (or the secret) from standard input, so it never
shows in ``ps`` or the shell's history.

Loaded only when ``notify`` runs (``verbs.handler``).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from gputui.cli.args import EXIT_OK, EXIT_REFUSED
from gputui.cli.tables import print_json
from gputui.common.i18n import _
from gputui.common.printable import shown
from gputui.scheduler.client.backend import SyncBackend
from gputui.scheduler.client.errors import HeadError

STDIN_MAX = 4096


def _stdin_line(what: str) -> str:
    line = sys.stdin.readline(STDIN_MAX + 1)
    if len(line) > STDIN_MAX:
        raise HeadError(
            "usage",
            _("{what}: over {limit} characters on standard input").format(
                what=what, limit=STDIN_MAX
            ),
        )
    line = line.strip()
    if not line:
        raise HeadError("usage", _("{what}: nothing on standard input").format(what=what))
    return line


def _channel_line(c: dict[str, Any]) -> str:
    name = shown(c.get("name"), 32)
    who = _("team {name}").format(name=name) if c.get("team") else name
    if c.get("group"):
        who = _("{who} (group {group})").format(who=who, group=shown(c.get("group"), 64))
    signed = _("{url}, signed") if c.get("signed") else "{url}"
    url = signed.format(url=shown(c.get("shown"), 300))
    events = ",".join(shown(e, 16) for e in c.get("events") or [])
    return f"{who}: {url}  [{events}]"


def run(backend: SyncBackend, a: argparse.Namespace) -> int:
    if a.action == "set":
        url = _stdin_line("url") if a.url == "-" else a.url
        secret = _stdin_line("--secret") if a.secret == "-" else a.secret  # noqa: S105
        events = None
        if a.events is not None:
            events = [e.strip() for e in a.events.split(",") if e.strip()]
        answer = backend.notify_set(url, secret=secret, events=events, name=a.name)
        print(f"notify: {_channel_line(answer['channel'])}")
        print("notify: " + _("send a test with: {command}").format(command="gputui notify test"))
        return EXIT_OK
    if a.action == "show":
        answer = backend.notify_show()
        if a.json:
            print_json(answer)
            return EXIT_OK
        channels = answer.get("channels") or []
        if not channels:
            print(_("no channels: gputui notify set URL (an apprise URL or a bot's webhook)"))
        for c in channels:
            since = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(c.get("since") or 0)))
            print(_("{channel}  since {time}").format(channel=_channel_line(c), time=since))
        box = answer.get("outbox") or {}
        print(
            _(
                "head's outbox: {waiting} waiting, {sent} sent, {failed} given up,"
                " {dropped} dropped"
            ).format(
                waiting=box.get("waiting", 0),
                sent=box.get("sent", 0),
                failed=box.get("failed", 0),
                dropped=box.get("dropped", 0),
            )
        )
        return EXIT_OK
    if a.action == "test":
        results = backend.notify_test(a.name, timeout=None)["results"]
        failed = 0
        for r in results:
            if r.get("ok"):
                print(_("sent: {channel}").format(channel=_channel_line(r)))
            else:
                failed += 1
                print(
                    _("not sent: {channel}: {error}").format(
                        channel=_channel_line(r), error=shown(r.get("error"), 200)
                    )
                )
        return EXIT_REFUSED if failed else EXIT_OK
    cleared = backend.notify_clear(a.name)["cleared"]
    if cleared:
        print(_("cleared: {names}").format(names=", ".join(shown(n, 32) for n in cleared)))
    else:
        print(_("cleared: nothing (no channel)"))
    return EXIT_OK
