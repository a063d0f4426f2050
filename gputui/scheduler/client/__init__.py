"""Reaching the head: the one set of mutating ops, the blocking client (the CLI's),
the asyncio client (the console's, ``aio``), and where the head is.

Importing this package loads only the light, blocking side: the asyncio client is
imported from ``gputui.scheduler.client.aio`` by those that use it, so a CLI verb
never imports asyncio.
"""

from __future__ import annotations

from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.ops import MUTATING
from gputui.scheduler.client.place import head_place, is_local_name, socket_path
from gputui.scheduler.client.sync import HeadClient

__all__ = [
    "MUTATING",
    "HeadClient",
    "HeadError",
    "head_place",
    "is_local_name",
    "socket_path",
]
