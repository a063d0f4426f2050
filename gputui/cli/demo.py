"""``gputui demo``: the console on a simulated cluster over real SSH on loopback, with
a scheduler head and some work already given to it."""

from __future__ import annotations

import asyncio
import os
import sys

from gputui.cli.args import wrap_cells
from gputui.cli.errors import UsageError
from gputui.cli.themes import theme_for, theme_named
from gputui.common.i18n import N_, _
from gputui.common.tasks import cancel_and_wait
from gputui.common.text import clean

EXIT_OK = 0
READY_WAIT_S = 20.0
"""How long the demo waits for its hosts before it opens the console anyway."""


def run_demo(
    hosts: int, gpus: int, theme: str | None, *, power: str = "off", mig: bool = False
) -> int:
    if gpus < hosts:
        raise UsageError(
            _("--gpus {gpus} is fewer than --hosts {hosts}; each host needs a GPU").format(
                gpus=gpus, hosts=hosts
            )
        )
    from gputui.demo.limits import DemoLimitError, check_demo_size
    from gputui.remote.sim.spec import MAX_GPUS

    if gpus > MAX_GPUS * hosts:
        raise UsageError(
            _("--gpus {gpus} over {hosts} hosts is more than {most} per host").format(
                gpus=gpus, hosts=hosts, most=MAX_GPUS
            )
        )
    try:
        check_demo_size(hosts)
    except DemoLimitError as exc:
        raise UsageError(str(exc)) from None
    if theme:  # before the simulated hosts start, not after
        theme_named(theme)
    # Said before the slow imports (asyncssh, Textual), so the terminal is never blank.
    said = _("{hosts} simulated hosts ({gpus} GPUs) on loopback SSH, and a scheduler head")
    print("gputui demo: " + said.format(hosts=hosts, gpus=gpus), flush=True)
    return asyncio.run(_demo(hosts, gpus, theme, power, mig))


async def _demo(
    hosts: int, gpus: int, theme: str | None, power: str = "off", mig: bool = False
) -> int:
    from gputui.cli.console_app import console_app
    from gputui.common.collector import pace_collector
    from gputui.demo.cluster import DemoCluster
    from gputui.demo.limits import start_error
    from gputui.demo.progress import StartLines, export_line
    from gputui.ui.terminal_exit import SignalExit

    cluster = DemoCluster(hosts=hosts, gpus=gpus, faults=True, head=True, power=power, mig=mig)
    report = StartLines(sys.stdout, cluster.names)
    # A closed terminal or a plain kill ends the demo the same way as `q`, so the
    # simulated hosts, their helpers and the workloads are all cleaned up; during
    # start-up it stops the start. Should that hang, they are killed on the way out.
    with SignalExit(on_force=cluster.emergency_cleanup) as signals:
        try:
            await cluster.start(report)
            # Each host as the head reaches it; the console opens on a live cluster
            # (one still connecting after READY_WAIT_S shows its state there).
            try:
                ready = await cluster.wait_ready(report, READY_WAIT_S)
            except BaseException:
                await cluster.stop()
                raise
        except asyncio.CancelledError:
            if signals.received is None:
                raise
            return signals.exit_code
        except OSError as exc:  # too many open files, no loopback, ...
            raise UsageError(start_error(exc, hosts)) from None
        if not ready:
            said = _("not every host is ready yet; the console shows each one's state")
            print(f"gputui demo: {said}")
        if cluster.head is not None:
            said = _("in another shell, this points the CLI at the demo's head:")
            print(f"gputui demo: {said}\n  {export_line(cluster.head.socket)}", flush=True)
        seeding: asyncio.Task[None] | None = None
        try:
            config = cluster.config()
            theme_name = theme_for(config, theme)
            app = console_app(config, theme_name)
            pace_collector()  # as the console does
            seeding = asyncio.get_running_loop().create_task(_seed_demo(cluster, app))
            await signals.run(app)
        finally:
            await cancel_and_wait([seeding])
            await cluster.stop()
    return app.return_code or EXIT_OK


DEMO_OPENING = N_("welcome: Esc closes this, N shows it again")
"""The intro's first line (its toast shows only that much at 80 columns)."""
WELCOME_W = 78
"""The longest line of the intro (the notices screen never wraps a line)."""
DEMO_INTRO = N_(
    "This demo has a scheduler. On a GPU line, c claims that GPU; on a host line,"
    " it asks how many. u releases. n enqueues a job (Ctrl+S sends it), and Q shows"
    " the queue with each job's output. : opens a command line (:usage, :health,"
    " :audit, :claim 2), Ctrl+P the palette, ? every key."
)
"""The intro, wrapped to ``WELCOME_W`` cells in the language chosen."""
DEMO_WELCOME = tuple(wrap_cells(DEMO_INTRO, WELCOME_W))
"""The intro in English, a line each: the notices screen shows each whole at 80 columns."""


def welcome_text(quick: str | None, export: str | None) -> str:
    """The intro after its opening line: what to try, the seeded quick job to watch,
    and the ``export`` line for the CLI (alone on its line, for a mouse)."""
    lines = wrap_cells(_(DEMO_INTRO), WELCOME_W)
    if quick:
        lines += wrap_cells(_("Watch {job}.").format(job=clean(quick, WELCOME_W - 7)), WELCOME_W)
    if export:
        lines += [_("The CLI, in another shell:"), export]
    return "\n".join(lines)


async def _seed_demo(cluster: object, app: object) -> None:
    """Give the demo's head work once its hosts are live, then say how to use it."""
    from gputui.demo.cluster import DemoCluster
    from gputui.demo.progress import export_line
    from gputui.ui.app import GpuTuiApp

    assert isinstance(cluster, DemoCluster) and isinstance(app, GpuTuiApp)
    problems: list[str] = []
    try:
        await cluster.seed_head()
    except Exception as exc:  # the demo goes on without its seeded work, saying so
        problems.append(_("seeding stopped: {error}").format(error=clean(repr(exc), 200)))
    if cluster.head is not None:
        # The enqueue form offers the demo's own little job, in the directory it is in.
        here = str(cluster.head.socket.parent)
        # --demo-pid: it ends with the demo, like the seeded jobs (the demo leaves nothing).
        command = f"python3 train.py --model mine --steps 20 --pause 1 --demo-pid {os.getpid()}"
        app.head.forms.submit_defaults = (here, command)
    quick = cluster.head.quick if cluster.head is not None else None
    export = export_line(cluster.head.socket) if cluster.head is not None else None
    text = welcome_text(quick, export)
    problems = [*(cluster.head.problems if cluster.head is not None else []), *problems]
    for line in problems:
        app.notify(line, title=_("demo head"), severity="warning", timeout=20, markup=False)
    app.notify(f"{_(DEMO_OPENING)}\n{text}", title="gputui demo", markup=False)

    def intro() -> None:  # the intro whole, on the notices screen; never over a form
        if app.screen is app.main:
            app.action_notices()

    app.call_later(intro)  # on the app's own loop turn (this task is not the app's)
