"""What a caller of the head gets when a request is not answered with a result:
``HeadError``, with a code and one line to show."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gputui.common.i18n import N_

if TYPE_CHECKING:
    from gputui.wire.words import Words

# ``gputui.wire.words`` (and with it ``dataclasses``' use of ``inspect``) loads only
# when an error is made or shown: a verb that succeeds never needs it.


class HeadError(Exception):
    """The head refused a request, or could not be reached: ``code`` and one line.

    ``message`` is the line in English (as the head sent it: logs, tests, programs);
    ``words`` the template and args the head made it from, where it sent them, and
    ``shown`` the line in the user's language (``gputui.wire.words``)."""

    def __init__(self, code: str, message: str, words: Words | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.words = words

    @classmethod
    def of(cls, code: str, words: Words) -> HeadError:
        """An error made from the head's ``Words``: its line is the template filled."""
        return cls(code, words.english(), words)

    @property
    def shown(self) -> str:
        """The line to show the user: in their language where the head's template is
        in the catalogue, else the English line."""
        if self.words is None:
            return self.message
        from gputui.wire.words import shown

        return shown(self.message, self.words.msg, self.words.args)


def unreachable(path: str | os.PathLike[str], exc: BaseException) -> HeadError:
    from gputui.wire.words import say

    where = str(path)
    if isinstance(exc, FileNotFoundError):
        words = say(
            N_("head unreachable at {path}: no socket there; is `gputui head` running?"),
            path=where,
        )
    elif isinstance(exc, ConnectionRefusedError):
        words = say(
            N_("head unreachable at {path}: nobody is listening (a head that stopped?)"),
            path=where,
        )
    elif isinstance(exc, PermissionError):
        words = say(
            N_("head unreachable at {path}: permission denied on the socket or its directory"),
            path=where,
        )
    else:
        why = str(exc) or type(exc).__name__
        words = say(N_("head unreachable at {path}: {why}"), path=where, why=why)
    return HeadError.of("unreachable", words)


def may_still_apply(op: str, rid: str) -> HeadError:
    """A mutating request the head did not answer in time: not refused, maybe applied."""
    from gputui.wire.words import say

    return HeadError.of(
        "timeout",
        say(
            N_(
                "the head did not answer {op} in time; it may still be applied later"
                " (request id {rid}): check before asking again"
            ),
            op=str(op),
            rid=str(rid),
        ),
    )
