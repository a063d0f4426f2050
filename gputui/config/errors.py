"""``ConfigError``, apart from the loader: a command catches it without importing the
configuration's models (``gputui --help`` never loads them)."""

from __future__ import annotations

from collections.abc import Sequence

_LINE_LIMIT = 1024


class ConfigError(Exception):
    """hosts.yaml could not be used; ``lines`` holds one ``FILE:LINE: field: problem`` each.

    Every line is passed through :func:`gputui.common.text.clean` here, once for all callers:
    a line may quote a path or value from the file, and none of it may reach a
    terminal as an escape sequence.
    """

    def __init__(self, lines: Sequence[str]) -> None:
        from gputui.common.text import clean

        safe = [clean(line, _LINE_LIMIT) for line in lines]
        super().__init__("\n".join(safe))
        self.lines = safe
