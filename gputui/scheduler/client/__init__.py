"""Reaching the head: the one set of mutating ops, the blocking client (the CLI's),
the asyncio client (the console's, ``aio``), and where the head is.

Importing this package loads nothing: each name below is imported when first asked
for (``__getattr__``), so a verb that never reaches the head (one in front of Slurm)
loads no socket client, and the asyncio client is imported from
``gputui.scheduler.client.aio`` by those that use it, so a CLI verb never imports
asyncio.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputui.scheduler.client.errors import HeadError
    from gputui.scheduler.client.ops import MUTATING
    from gputui.scheduler.client.place import head_place, is_local_name, socket_path
    from gputui.scheduler.client.sync import HeadClient

_WHERE = {
    "HeadError": "errors",
    "MUTATING": "ops",
    "head_place": "place",
    "is_local_name": "place",
    "socket_path": "place",
    "HeadClient": "sync",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "MUTATING",
    "HeadClient",
    "HeadError",
    "head_place",
    "is_local_name",
    "socket_path",
]
