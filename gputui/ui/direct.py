"""Falling back from the head's stream to SSH sessions of the console's own.

With a head configured the console reads the head's telemetry stream. When the head
cannot be reached the source says so (``offer``: one notice, and every host's row
says why), and ``S`` switches this console to direct SSH for the rest of its life:
the source the CLI left ready (``make``: the fleet, which this package does not
import) replaces the head's, and acts on the hosts too. ``gputui --direct`` starts
that way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from gputui.common.i18n import N_, _
from gputui.common.tasks import within
from gputui.telemetry import HostControl, ReadOnly, TelemetrySource

OFFER = N_("head unreachable: press S for direct SSH (or start with gputui --direct) — {why}")
"""The key first: the notice line of an 80-column terminal cuts the rest (N shows it all)."""
CLOSE_TIMEOUT_S = 5.0


class Console(Protocol):
    """What the fallback needs of the app."""

    source: TelemetrySource

    def notify(
        self, message: str, *, severity: Any = ..., timeout: float | None = ..., markup: bool = ...
    ) -> None: ...

    def replace_source(self, source: TelemetrySource, control: HostControl) -> None: ...

    def run_source(self, work: Coroutine[Any, Any, None]) -> None: ...


class DirectFallback:
    """The console's way from the head's stream to its own SSH sessions (once)."""

    def __init__(self, app: Console, make: Callable[[], TelemetrySource] | None) -> None:
        self.app = app
        self._make = make
        self._offered = False
        self.switched = False

    @property
    def available(self) -> bool:
        return self._make is not None and not self.switched

    def heard(self, why: str | None) -> None:
        """The head's stream is away (``why``) or back (None): said once per outage."""
        if why is None:
            self._offered = False
            return
        if not self.available or self._offered:
            return
        self._offered = True
        self.app.notify(_(OFFER).format(why=why), severity="warning", timeout=15, markup=False)

    def switch(self) -> None:
        """``S``: replace the head's stream with the console's own SSH sessions."""
        if self._make is None or self.switched:
            self.app.notify(
                _("no head stream to leave: this console watches the hosts directly"),
                timeout=3,
                markup=False,
            )
            return
        self.switched = True
        app, old, new = self.app, self.app.source, self._make()
        app.replace_source(new, new if isinstance(new, HostControl) else ReadOnly())
        app.notify(_("watching the hosts over SSH directly"), timeout=3, markup=False)
        app.run_source(_swap(old, new))


async def _swap(old: TelemetrySource, new: TelemetrySource) -> None:
    with contextlib.suppress(asyncio.TimeoutError, OSError):
        await within(old.close(), CLOSE_TIMEOUT_S)
    await new.start()
