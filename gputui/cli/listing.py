"""``queue`` and ``claims`` follow the scheduler's pages, up to a million rows, and
say on stderr what their bound left out."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from gputui.scheduler.client.backend import Answer

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
