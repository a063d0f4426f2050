"""The console: a Textual app fed by one ``TelemetrySource`` and acting on hosts through
one ``HostControl`` (``gputui.telemetry``), with the scheduler's side in ``head/``.

``app`` holds the parts and the workers; ``model``, ``host_entry`` and ``gpu_view``
are the picture of the cluster; ``health_rounds`` are its own health checks,
``host_actions`` its signals and reconnects; ``format``, ``themes`` and
``terminal_exit`` the rest. ``screens/`` and ``widgets/`` draw; ``head/`` is the
scheduler's side, one composed ``HeadConsole``.

It may import telemetry, the health rules, config, the wire, common and the
scheduler's client; never the fleet or the demo (the CLI builds the app and hands it
its source, the fleet's or the demo's), never the head's daemon or store.
"""
