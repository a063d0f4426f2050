"""gputui: a terminal console for a team that shares GPU servers."""

from __future__ import annotations

__version__ = "0.1.0"
