"""Values from the head made safe for a terminal, for the light command-line verbs.

Stdlib only: ``gputui.common.text.clean`` does more (wide characters, bidi controls) but
pulls in rich, about 60 ms a command.
"""

from __future__ import annotations


def shown(text: object, width: int = 10_000) -> str:
    """``text`` with anything not printable shown as ``?``, cut to ``width`` with an
    ellipsis."""
    value = str(text)[: width + 1]  # what is cut away is never looked at
    if not value.isprintable():  # the usual text is printable whole: no pass a character
        value = "".join(ch if ch.isprintable() else "?" for ch in value)
    return value if len(value) <= width else value[: width - 1] + "…"


def owner_name(user: object, uid: object, unknown: str = "?") -> str:
    """Who owns a process, as every list names them: the user name, else ``uid N``
    (the host has no name for it), else ``unknown`` (the uid is not known either)."""
    if user:
        return str(user)
    return unknown if uid is None else f"uid {uid}"
