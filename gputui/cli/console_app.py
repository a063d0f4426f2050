"""The console app over the source it should read: one rule for ``gputui`` and
``gputui demo``.

With a head in hosts.yaml the console reads the head's telemetry stream and acts
through the head (one connection, the head's helpers); ``direct``, or no head, and
it opens SSH of its own to every host. A console on the stream can fall back to
direct SSH (``S``) when the head is away.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputui.config.models import Config
    from gputui.ui.app import GpuTuiApp


def console_app(config: Config, theme: str, *, direct: bool = False) -> GpuTuiApp:
    from gputui.fleet.fleet import Fleet
    from gputui.ui.app import GpuTuiApp

    if config.head is None or direct:
        return GpuTuiApp(Fleet(config), config, theme=theme)
    from gputui.scheduler.client.telemetry import HeadTelemetry

    stream = HeadTelemetry(config)
    app = GpuTuiApp(stream, config, theme=theme, direct=lambda: Fleet(config))
    app.head.channel = stream.channel  # one connection: the scheduler side rides it too
    stream.on_problem = app.fallback.heard
    return app
