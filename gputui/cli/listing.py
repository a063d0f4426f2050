"""``queue`` and ``claims`` follow the scheduler's pages, up to a million rows, and
say on stderr what their bound left out."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

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
    for _ in range(MAX_PAGES - 1):
        if not isinstance(after, int) or isinstance(after, bool):
            break
        page = fetch(PAGE, after)
        items += page[key]
        after = page.get("next")
    if isinstance(after, int) and not isinstance(after, bool):
        print(
            f"gputui {verb}: the first {len(items)} shown, more after id {after}"
            " not shown (narrow it with --user)",
            file=sys.stderr,
        )
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
        raise HeadError("usage", f"no such user: {shown(user, 64)}") from None


def nothing_line(noun: str, a: Any) -> str:
    """The line under an empty table: what was asked for, and that there is none."""
    kind = "" if a.all else (" queued or running" if noun == "jobs" else " waiting or active")
    mine = f" of {shown(a.user, 64)}" if a.user else ""
    more = "" if a.all else " (--all: finished ones too)"
    return f"no{kind} {noun}{mine}{more}"
