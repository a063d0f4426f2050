"""``queue`` and ``claims`` follow the scheduler's pages, up to a million rows, and
say on stderr what their bound left out."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gputui.common.i18n import _
from gputui.common.printable import shown
from gputui.scheduler.client.backend import Answer
from gputui.scheduler.client.errors import HeadError

PAGE = 5_000
MAX_PAGES = 200

Fetch = Callable[[int, "int | None"], Answer]
"""One page: (its size, the last id of the page before it, or None) -> the answer."""


def every_page(fetch: Fetch, key: str, verb: str) -> tuple[list[Any], Answer]:
    """Every row under ``key``, page after page, and the first page's answer."""
    result = fetch(PAGE, None)
    items = list(result[key])
    after = result.get("next")
    for _page in range(MAX_PAGES - 1):
        if not isinstance(after, int) or isinstance(after, bool):
            break
        page = fetch(PAGE, after)
        items += page[key]
        after = page.get("next")
    if isinstance(after, int) and not isinstance(after, bool):
        told = _("the first {count} shown, more after id {after} not shown (narrow it with --user)")
        print(f"gputui {verb}: " + told.format(count=len(items), after=after), file=sys.stderr)
    return items, result


def known_user(user: str | None, rows: list[Any]) -> None:
    """``--user NAME`` with nothing listed: a usage error when no such user exists here
    (a typo), so it is not mistaken for a user with nothing queued. A user the head
    still has rows of (an account removed since) lists them, as any other."""
    if user is None or rows:
        return
    import pwd

    try:
        pwd.getpwnam(user)
    except (KeyError, ValueError):  # ValueError: a NUL in the name
        raise HeadError("usage", _("no such user: {user}").format(user=shown(user, 64))) from None


def nothing_line(noun: str, a: Any) -> str:
    """The line under an empty table: what was asked for, and that there is none."""
    jobs = noun == "jobs"
    if a.user:
        user = shown(a.user, 64)
        if a.all:
            line = _("no jobs of {user}") if jobs else _("no claims of {user}")
        elif jobs:
            line = _("no queued or running jobs of {user} (--all: finished ones too)")
        else:
            line = _("no waiting or active claims of {user} (--all: finished ones too)")
        return line.format(user=user)
    if a.all:
        return _("no jobs") if jobs else _("no claims")
    if jobs:
        return _("no queued or running jobs (--all: finished ones too)")
    return _("no waiting or active claims (--all: finished ones too)")
