"""What a caller of the head gets when a request is not answered with a result:
``HeadError``, with a code and one line to show."""

from __future__ import annotations

import os


class HeadError(Exception):
    """The head refused a request, or could not be reached: ``code`` and one line."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def unreachable(path: str | os.PathLike[str], exc: BaseException) -> HeadError:
    if isinstance(exc, FileNotFoundError):
        why = "no socket there; is `gputui head` running?"
    elif isinstance(exc, ConnectionRefusedError):
        why = "nobody is listening (a head that stopped?)"
    elif isinstance(exc, PermissionError):
        why = "permission denied on the socket or its directory"
    else:
        why = str(exc) or type(exc).__name__
    return HeadError("unreachable", f"head unreachable at {path}: {why}")


def may_still_apply(op: str, rid: str) -> HeadError:
    """A mutating request the head did not answer in time: not refused, maybe applied."""
    return HeadError(
        "timeout",
        f"the head did not answer {op} in time; it may still be applied later"
        f" (request id {rid}): check before asking again",
    )
