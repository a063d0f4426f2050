"""One request, one answer line: what the blocking and the asyncio clients share.

Every request is a JSON object on one line; a mutating one carries a fresh request
id (``rid``) that the head answers a retry of from its log.
"""

from __future__ import annotations

import json
from typing import Any

from gputui.common.i18n import N_
from gputui.scheduler.client.errors import HeadError
from gputui.wire.words import say, words_of

MAX_LINE = 64 * 1024 * 1024
"""The longest answer line either client reads."""


def new_request_id() -> str:
    import uuid  # only a mutating request needs one: most verbs never load it

    return uuid.uuid4().hex


def request_line(ident: int, op: str, args: dict[str, Any], rid: str | None) -> bytes:
    """The request as the line sent to the head."""
    request: dict[str, Any] = {"id": ident, "op": op, "args": args}
    if rid is not None:
        request["rid"] = rid
    return json.dumps(request, separators=(",", ":")).encode() + b"\n"


def message_of(line: bytes) -> dict[str, Any]:
    """A line the head sent, read: a JSON object, or the ``HeadError`` that says what
    else it was (the blocking client's answers and an attached terminal's stream).

    The wire is UTF-8: the line is decoded as that, never guessed from its first bytes
    (``json.loads`` of bytes takes ``b"\\x000"`` for UTF-16 and reads ``0``), so a line
    reads the same with or without its newline."""
    try:
        message = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise HeadError.of(
            "protocol", say(N_("the head sent something that is not JSON"))
        ) from None
    if not isinstance(message, dict):
        raise HeadError.of("protocol", say(N_("the head sent something that is not an object")))
    return message


def answer_of(message: dict[str, Any]) -> dict[str, Any]:
    """The result of an answer, or the ``HeadError`` it carries."""
    if message.get("ok") is True:
        result = message.get("result")
        return result if isinstance(result, dict) else {}
    err = message.get("error")
    if isinstance(err, dict):
        code, line = str(err.get("code", "error")), str(err.get("message", "refused"))
        raise HeadError(code, line, words_of(err))
    raise HeadError.of("protocol", say(N_("the head sent an answer without a result or an error")))
