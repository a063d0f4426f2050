"""Reaching the head: the one set of mutating ops, the blocking client (the CLI's),
the asyncio client (the console's), and where the head is.

Importing this package loads only the light, blocking side: the asyncio client
(``aio``) is loaded when it is asked for, so a CLI verb never imports asyncio.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.ops import MUTATING
from gputui.scheduler.client.place import head_place, is_local_name, socket_path
from gputui.scheduler.client.sync import HeadClient

if TYPE_CHECKING:
    from gputui.scheduler.client.aio import AsyncHeadClient

__all__ = [
    "MUTATING",
    "AsyncHeadClient",
    "HeadClient",
    "HeadError",
    "head_place",
    "is_local_name",
    "socket_path",
]


def __getattr__(name: str) -> Any:
    """``AsyncHeadClient`` for the console's modules that import it from here: loaded
    (with asyncio) only then."""
    if name == "AsyncHeadClient":
        from gputui.scheduler.client.aio import AsyncHeadClient

        return AsyncHeadClient
    raise AttributeError(name)
