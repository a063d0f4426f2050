"""Every GPU host kept connected: one helper process each, over SSH or as a local child.

``fleet`` is the ``Fleet`` (every host, as one ``TelemetrySource`` and ``HostControl``);
``link`` keeps one host connected and ``feed`` makes what its helper says into the
host's snapshot; ``session`` and ``transport`` run one helper, ``requests`` sends it one
request; ``connector``, ``hostkeys``, ``identity``, ``jumps`` and ``localfiles`` open
an SSH connection the way OpenSSH would; ``failures`` and ``backoff`` say what went
wrong and when to try again; ``stream`` hands the snapshots to a daemon.

Below the scheduler and the console, which use it: it may import the helper (to ship
it), the wire, telemetry, the health rules, config and common; never the scheduler,
textual, the console or the demo.
"""

from __future__ import annotations
