"""Acting on hosts from the console: signals and reconnects, through a ``HostControl``.

The control is its own interface, apart from the telemetry that feeds the view: a
read-only source gets ``ReadOnly``, whose every action says it cannot be done. A
signal runs in an app worker (group ``signal``) and its outcome is said in one
notification, in words a person can act on.
"""

from __future__ import annotations

from textual.app import App

from gputui.telemetry import HostControl, RequestOutcome
from gputui.wire.messages import ProcessSample, Signal, SignalResult


class HostActions:
    """Signals and reconnects, asked of ``control`` on behalf of the app's screens."""

    def __init__(self, app: App[None], control: HostControl) -> None:
        self.app = app
        self.control = control

    def signal(self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal) -> None:
        """Send ``signal`` to ``process`` (the user confirmed it) in an app worker."""
        self.app.run_worker(
            self._signal(host, gpu_uuid, process, signal),
            name=f"signal-{host}-{process.pid}",
            group="signal",
            description=f"SIG{signal} to pid {process.pid} on {host}",
            exclusive=False,
            exit_on_error=False,
        )

    def retry(self, host: str | None) -> None:
        """Reconnect ``host`` (None: every waiting host) now, without the backoff wait."""
        self.control.retry_now(host)
        what = host if host is not None else "all hosts"
        self.app.notify(f"retrying {what} now", timeout=3, markup=False)

    async def _signal(
        self, host: str, gpu_uuid: str, process: ProcessSample, signal: Signal
    ) -> RequestOutcome[SignalResult]:
        outcome = await self.control.signal_process(host, gpu_uuid, process, signal)
        self.app.notify(
            outcome.message,
            title=f"SIG{signal} pid {process.pid} on {host}",
            severity="information" if outcome.ok else "error",
            timeout=8,
            markup=False,
        )
        return outcome
