"""``gputui head``: run the scheduler daemon; ``head backup PATH``; ``--print-unit``;
``--check`` (is the running head's every task alive and moving?).

The daemon's signal handlers only set a flag (the loop then stops serving, closes
the socket and its host sessions, and exits 0); jobs on the hosts go on running
under their supervisors and are re-attached at the next start. Should a task the
head depends on die, it stops too, but exits 1 (systemd starts it again).

On PostgreSQL a head first waits as standby until it holds the lease
(``head.leader``; a second head on another machine keeps waiting while the first
leads), migrates the database only then, and exits 1 should it lose the lease while
it leads.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import shutil
import signal
import sys
from collections.abc import Coroutine
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from gputui.common.i18n import _
from gputui.common.listen import listen_text, parse_listen
from gputui.common.locations import DEFAULT_SOCKET, HostsMissing, named_hosts, socket_dir_problem
from gputui.common.tasks import cancel_and_wait
from gputui.common.text import clean
from gputui.config.loader import ConfigError, find_config, load_config
from gputui.config.models import Config, HeadConfig

if TYPE_CHECKING:  # the daemon's modules load only when it serves
    from sqlalchemy import Engine

    from gputui.scheduler.head.leader import Leadership
    from gputui.scheduler.head.settings import HeadSettings
    from gputui.scheduler.store.sqlstore import SqlStore

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
LEADING_MODULES = (
    "gputui.scheduler.head.daemon",
    "gputui.scheduler.head.fleet_hostops",
    "gputui.scheduler.head.leased_hosts",
    "gputui.scheduler.head.liveness",
)
"""What a head imports to lead: a standby imports it while it waits, so the seconds
an import takes never hold up the lease's first renewals."""
SWITCH_INTERVAL_S = 0.001
"""How long the head's busy loop keeps the interpreter from a thread that waits for it
(Python's default: 5 ms). Its other threads (``/metrics``' server and renderer, the
store's reader) wait that long each time they come back from the network or the
disk: a scrape comes back some five times, and at 1,000 hosts one scrape in five
took over 50 ms at 5 ms, one in twenty-five at 1 ms (``bench/consoles.py``'s head,
48 scrapes each way), at no CPU cost seen."""


def parser() -> argparse.ArgumentParser:
    from gputui.cli.args import Parser  # argparse's own words in the language chosen

    p = Parser(prog="gputui head", description=_("the scheduler daemon"))
    p.add_argument("--hosts", metavar="FILE", help=_("hosts.yaml (default: the usual search)"))
    p.add_argument("--socket", metavar="PATH", help=_("override head.socket"))
    p.add_argument(
        "--database",
        metavar="PATH|URL",
        help=_("override head.database: a SQLite file, or postgresql+psycopg://USER@HOST/DB"),
    )
    p.add_argument(
        "--metrics",
        metavar="ADDR:PORT",
        help=_(
            "serve Prometheus metrics at http://ADDR:PORT/metrics (dcgm-exporter's names,"
            " one instance label per GPU host; overrides head.metrics; off by default),"
            " e.g. 127.0.0.1:9400, [::1]:9400 or :9400 for every interface"
        ),
    )
    p.add_argument("--print-unit", action="store_true", help=_("print the systemd unit and exit"))
    p.add_argument("--print-tmpfiles", action="store_true", help=_("print the tmpfiles.d rule"))
    p.add_argument(
        "--check",
        action="store_true",
        help=_(
            "ask the running head whether its writer, scheduler, host watch and timer"
            " are alive and moving: exit 0 when healthy, else 1 with one line for each"
            " that is dead or stuck (or for a head that does not answer)"
        ),
    )
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument(
        "--commit-per-request",
        action="store_true",
        help=argparse.SUPPRESS,  # the benchmark's baseline: no group commit
    )
    p.add_argument("action", nargs="?", choices=["serve", "backup"], default="serve")
    p.add_argument("path", nargs="?", help=_("backup: the file to write"))
    return p


def unit_text(name: str) -> str:
    text = resources.files("gputui.scheduler").joinpath("units", name).read_text("utf-8")
    # This installation's own command: the script beside this interpreter (a venv's),
    # else whatever `gputui` is on PATH, else the interpreter running the package.
    beside = Path(sys.executable).parent / "gputui"
    if beside.is_file() and os.access(beside, os.X_OK):
        exe = str(beside)
    else:
        exe = shutil.which("gputui") or f"{sys.executable} -m gputui"
    return text.replace("{gputui}", exe)


def _database(text: str) -> Path | str:
    """A SQLite file's path, or a database URL (PostgreSQL) as it is."""
    return text if "://" in text else Path(text).expanduser()


def _settings(config: Config, args: argparse.Namespace) -> tuple[Path, Path | str, object]:
    from gputui.scheduler.head.actions import Rules
    from gputui.scheduler.head.settings import HeadSettings
    from gputui.scheduler.server.connection import Limits

    head = config.head
    socket_path = Path(args.socket or (head.socket if head else DEFAULT_SOCKET))
    database = _database(args.database or (head.database if head else "/var/lib/gputui/gputui.db"))
    group_commit = not args.commit_per_request
    listen = args.metrics if args.metrics is not None else (head.metrics if head else None)
    metrics = None if listen is None else parse_listen(listen)  # (checked in main)
    if head is None:
        settings = HeadSettings(
            metrics=metrics,
            socket=socket_path.expanduser(),
            rules=Rules(
                sched=config.scheduler,
                runtime=config.jobs.runtime,
                interactive_time_s=config.jobs.interactive_time,
                interactive_idle_s=config.jobs.interactive_idle,
            ),
            group_commit=group_commit,
            health=config.health,
            expected_gpus={h.name: h.gpus for h in config.hosts},
            host_places={h.name: (h.address or h.name, h.local) for h in config.hosts},
            notify=config.notify,
        )
    else:
        settings = HeadSettings(
            socket=socket_path.expanduser(),
            admin_group=head.admin_group,
            rules=Rules(
                claim_idle_s=head.claim_idle_minutes * 60,
                requeue_limit=head.requeue_limit,
                kill_grace_s=head.kill_grace_s,
                runtime=config.jobs.runtime,
                sched=config.scheduler,
                interactive_time_s=config.jobs.interactive_time,
                interactive_idle_s=config.jobs.interactive_idle,
            ),
            run_as_login_user=head.run_as_login_user,
            allow_gpu_reset=head.allow_gpu_reset,
            readings_keep_s=head.readings_keep_days * 86400,
            limits=Limits(
                per_user=head.max_connections_per_user,
                request_timeout_s=head.request_timeout_s,
                send_stall_s=head.client_stall_s,
            ),
            session_grace_s=head.session_grace_s,
            slurm=config.slurm,
            metrics=metrics,
            group_commit=group_commit,
            health=config.health,
            expected_gpus={h.name: h.gpus for h in config.hosts},
            host_places={h.name: (h.address or h.name, h.local) for h in config.hosts},
            notify=config.notify,
        )
    return socket_path.expanduser(), database, settings


def _team_channels(config: Config) -> list[str]:
    """One ``FILE:LINE: field: why`` line for each team channel (``notify:``) the head
    would refuse: a URL no sender takes, a ``url_file`` not kept for the head alone."""
    if not config.notify.channels:
        return []
    from gputui.scheduler.head.chat.channels import resolve_team

    _rows, problems = resolve_team(config.notify, 0.0)
    out = []
    for index, why in problems:
        field = f"notify.channels[{index}]"
        out.append(f"{config.source}:{config.line_of(field + '.url')}: {field}: {why}")
    return out


def _prepare_socket_dir(path: Path) -> None:
    """Make the socket's directory (0755) and refuse one another user could write
    (checked again by the head itself, before it binds)."""
    directory = path.parent
    if not directory.exists():
        directory.mkdir(parents=True, mode=0o755)
    problem = socket_dir_problem(path)
    if problem is not None:
        raise OSError(problem)


async def serve(config: Config, settings: object, database: Path | str) -> int:
    """Serve as the head. On SQLite, its file checked and held first. On PostgreSQL
    (the engine's dialect says which), first wait as standby until this head holds
    the lease (``head.leader``), and only then migrate the database: only the leader
    does."""
    from gputui.scheduler.head.settings import HeadSettings
    from gputui.scheduler.store.engine import make_engine, prepare
    from gputui.scheduler.store.location import hold_exclusively, prepare_location
    from gputui.scheduler.store.sqlstore import SqlStore

    assert isinstance(settings, HeadSettings)
    engine = make_engine(database)  # nothing connects yet
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    if engine.dialect.name != "postgresql":  # a SQLite file (a path, or a sqlite:// URL)
        engine.dispose()
        path = Path(engine.url.database or "")
        prepare_location(path)
        hold_exclusively(path)  # before the database is checked or upgraded; until exit
        store = await asyncio.to_thread(SqlStore.open, path)
        return await _lead(config, settings, store, None, stop, keeping=None)
    leader = _leadership(config, engine)
    for module in LEADING_MODULES:  # loaded now: once leading, the loop must renew in time
        importlib.import_module(module)
    try:
        if not await leader.wait(stop):  # standby until it leads
            engine.dispose()
            _say(_("stopped while standby"))
            return EXIT_OK
        keeping = asyncio.ensure_future(leader.keep(stop))  # renewed from now on
        try:
            await asyncio.to_thread(prepare, engine)  # the leader alone migrates
        except BaseException:
            await _stop_keeping(keeping)
            await leader.release()  # the standby may try: it may have a newer gputui
            engine.dispose()
            raise
        return await _lead(config, settings, SqlStore(engine), leader, stop, keeping=keeping)
    finally:
        leader.close()


async def _stop_keeping(keeping: asyncio.Future[None] | None) -> None:
    await cancel_and_wait([keeping])


async def _lead(
    config: Config,
    settings: HeadSettings,
    store: SqlStore,
    leader: Leadership | None,
    stop: asyncio.Event,
    *,
    keeping: asyncio.Future[None] | None,
) -> int:
    from gputui.common.collector import pace_collector
    from gputui.scheduler.head.daemon import Head
    from gputui.scheduler.head.fleet_hostops import FleetHosts
    from gputui.scheduler.head.hostops import HostOps
    from gputui.scheduler.head.leased_hosts import LeasedHosts
    from gputui.scheduler.head.liveness import HeadDied
    from gputui.scheduler.store.engine import describe

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    pace_collector(len(config.resolved()))
    namespace = store.jobs_namespace()
    hosts: HostOps = FleetHosts(config, namespace)
    if leader is not None:  # no action on a host once the lease may have gone
        hosts = LeasedHosts(hosts, leader.may_act)
    pools = {h.name: h.pool for h in config.resolved()}
    head = Head(store, hosts, settings, host_pools=pools)
    try:
        await head.start()  # a socket another head serves is refused here, before a word
    except BaseException:
        await _stop_keeping(keeping)
        raise
    _say(
        _("serving {socket} for {hosts} host(s); database {database}").format(
            socket=settings.socket, hosts=len(pools), database=describe(store.engine)
        )
    )
    if head.metrics.server is not None:
        where = listen_text(head.metrics.server.addr, head.metrics.server.port)
        _say(_("metrics on {url}").format(url=f"http://{where}/metrics"))
    try:
        await head.serve(stop)
    except HeadDied as exc:
        _say(_("stopped: {why}").format(why=clean(str(exc), 300)))
        return EXIT_FAIL
    finally:
        await _stop_keeping(keeping)
    if leader is not None and leader.lost is not None:
        _say(_("{why}: stopped writing; running jobs go on running").format(why=leader.lost))
        return EXIT_FAIL
    if leader is not None:
        await leader.release()
    _say(_("stopped; running jobs go on running"))
    return EXIT_OK


def _leadership(config: Config, engine: Engine) -> Leadership:
    """The lease of a head on PostgreSQL (``head.leader``), its store fenced."""
    from gputui.scheduler.head.leader import Leadership, holder_name
    from gputui.scheduler.store.lease import HeadLease, fence

    lease_s = config.head.lease_s if config.head is not None else HeadConfig().lease_s
    holder = holder_name()
    _say(_("on PostgreSQL: this head is {holder} in the lease").format(holder=holder))
    return Leadership(HeadLease(engine, holder, lease_s), fence(engine, lease_s), _say)


def _say(line: str) -> None:
    print(f"gputui head: {line}", file=sys.stderr, flush=True)


def check(socket_path: Path) -> int:
    """``--check``: one line for each task of the running head that is dead or stuck."""
    from gputui.scheduler.client import HeadClient, HeadError
    from gputui.scheduler.head.liveness import problems

    try:
        with HeadClient(socket_path, timeout=10.0) as client:
            tasks = client.call("ping").get("tasks")
    except HeadError as exc:
        print(f"gputui head --check: {clean(exc.message, 300)}")
        return EXIT_FAIL
    wrong = problems(tasks)
    for line in wrong:
        print(f"gputui head --check: {line}")
    if wrong:
        return EXIT_FAIL
    assert isinstance(tasks, dict)
    moved = ", ".join(f"{clean(str(n), 40)} {t['idle_s']:.1f} s" for n, t in sorted(tasks.items()))
    print("gputui head --check: " + _("healthy (last progress: {tasks})").format(tasks=moved))
    return EXIT_OK


def backup(database: Path | str, dest: str | None) -> int:
    from gputui.scheduler.store.backup import backup as copy

    if not isinstance(database, Path):
        print(
            "gputui head backup: "
            + _(
                "the database is on a PostgreSQL server: back it up there"
                " (pg_dump, or the server's own backups)"
            ),
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not dest:
        print(
            "gputui head backup: " + _("give the file to write: gputui head backup PATH"),
            file=sys.stderr,
        )
        return EXIT_USAGE
    if not database.is_file():
        told = _("no database at {path}").format(path=database)
        print(f"gputui head backup: {told}", file=sys.stderr)
        return EXIT_FAIL

    def progress(done: int, total: int) -> None:
        if total:
            line = _("backup: {percent}% of {total} pages").format(
                percent=f"{done * 100 // total:3d}", total=total
            )
            print(f"\r{line}", end="", file=sys.stderr)

    pages = copy(database, Path(dest).expanduser(), progress)  # reads the file as it is
    told = _("{pages} pages copied to {dest} and verified").format(pages=pages, dest=dest)
    print(f"\rgputui head backup: {told}", file=sys.stderr)
    return EXIT_OK


def _run(main: Coroutine[None, None, int]) -> int:
    """Run the head on uvloop where it is installed (about a tenth more durable
    submissions a second than asyncio's own loop: see bench/sched.py), on asyncio's
    own loop otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.metrics is not None:
        try:
            parse_listen(args.metrics)
        except ValueError as exc:
            print(f"gputui head: --metrics: {clean(str(exc), 300)}", file=sys.stderr)
            return EXIT_USAGE
    if args.print_unit:
        print(unit_text("gputui-head.service"), end="")
        return EXIT_OK
    if args.print_tmpfiles:
        print(unit_text("gputui.tmpfiles"), end="")
        return EXIT_OK
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="gputui head: %(levelname)s %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from gputui.scheduler.head.metrics_serve import MetricsBindError
    from gputui.scheduler.store.api import StoreError

    try:
        named_hosts(args.hosts)
    except HostsMissing as exc:
        print(f"gputui head: {exc.line}", file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load_config(find_config(args.hosts))
        socket_path, database, settings = _settings(config, args)
        if args.check:
            return check(socket_path)
        if args.action == "backup":
            return backup(database, args.path)
        refused = _team_channels(config)
        if refused:
            for line in refused[:20]:
                print(clean(line, 300), file=sys.stderr)
            return EXIT_FAIL
        _prepare_socket_dir(socket_path)
        return _run(serve(config, settings, database))
    except ConfigError as exc:
        for line in exc.lines[:20]:
            print(clean(line, 300), file=sys.stderr)
        return EXIT_FAIL
    except StoreError as exc:
        print(f"gputui head: {clean(str(exc), 400)}", file=sys.stderr)
        return EXIT_FAIL
    except MetricsBindError as exc:
        print(f"gputui head: {clean(str(exc), 400)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"gputui head: {clean(str(exc), 400)}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:  # no traceback reaches a user: one line, the details logged
        logging.getLogger(__name__).debug("internal error", exc_info=True)
        told = _("internal error: {error}").format(error=clean(repr(exc), 300))
        print(f"gputui head: {told}", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
    os._exit(0)
