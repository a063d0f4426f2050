"""The console side's one kind of user error (``gputui``, ``demo``, ``check-config``)."""

from __future__ import annotations


class UsageError(Exception):
    """Something the user asked for that cannot be done, said in one line."""
