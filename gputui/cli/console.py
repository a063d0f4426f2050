"""Command line: ``gputui`` (the console), ``check-config``, ``demo``, ``helper``.

Every failure a user can cause ends in one clear line on stderr and a non-zero exit
status; no traceback reaches a user.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from gputui import __version__
from gputui.config import (
    Config,
    ConfigError,
    file_problems,
    find_config,
    load_config,
    require_hosts,
)
from gputui.text import clean

EXIT_OK = 0
EXIT_CONFIG = 1
EXIT_USAGE = 2


SCHEDULER_HELP = """\
scheduler (a `head:` in hosts.yaml; `gputui VERB --help` for each):
  head          run the head daemon (also: head backup PATH, --print-unit, --check)
  claim, release, claims, env
                claim GPUs, give them back, list claims, print CUDA_VISIBLE_DEVICES
  run           wait for N GPUs here, run a command with them, release them
  submit, queue, show, logs, wait
                queue a job, list the queue, one job, its output, wait for it
  cancel, kill, preempt, requeue, hold, release-hold
                act on jobs (--reason when an admin acts on another's)
  explain, quota
                why a job waits (place, factors, start estimate); weekly quotas
  drain, undrain, unfence
                admins: no new work on a HOST[:GPU] (--reason), take it again;
                clear the head's automatic fence of a GPU (--reason)
  health --ack KEY --note TEXT
                admins: acknowledge a problem of the head's board (KEY from
                health --json or --keys); `gputui health` asks the head when there is one
  force-free    admins: take a stuck GPU back, step by step (HOST:GPU --reason TEXT
                [--reset]); exit 0 free, 1 a step failed
  audit, whoami the audit trail; who the head says you are
  notices [--all]
                what the head told you while you were away (preemptions,
                job ends, drains); shown once, like mail
  usage, report GPU-hours, busy hours, energy and cost; a weekly summary
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputui",
        description="Live console for a team's GPU servers, over SSH.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=SCHEDULER_HELP,
    )
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    parser.add_argument(
        "--hosts",
        metavar="FILE",
        help=(
            "hosts.yaml to use (else $GPUTUI_HOSTS, ./hosts.yaml,"
            " ~/.config/gputui/hosts.yaml, /etc/gputui/hosts.yaml; a file found there"
            " is skipped unless it is yours or root's and nobody else can write it;"
            " one named here is refused when anyone besides its owner can write it)"
        ),
    )
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help="colour theme (gputui-dark, gputui-light, gputui-high-contrast, ...)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("console", help="open the console (the default)")

    check = sub.add_parser("check-config", help="validate hosts.yaml and print a summary")
    check.add_argument("file", nargs="?", help="file to check (default: the search order above)")

    demo = sub.add_parser(
        "demo", help="open the console on a simulated cluster over real SSH on loopback"
    )
    demo.add_argument(
        "--hosts",
        dest="demo_hosts",
        type=_positive,
        default=4,
        metavar="N",
        help="simulated hosts (default 4)",
    )
    demo.add_argument(
        "--gpus",
        dest="demo_gpus",
        type=_positive,
        default=None,
        metavar="M",
        help="GPUs in all (default 5 per host: 20 for 4 hosts)",
    )
    demo.add_argument("--theme", dest="demo_theme", metavar="NAME", help="colour theme")

    from gputui.cli import health as cli_health
    from gputui.cli import incident as cli_incident

    cli_health.add_parser(sub)
    cli_incident.add_parser(sub)

    helper = sub.add_parser(
        "helper", help="run the host helper here and print its JSON lines (for debugging)"
    )
    helper.add_argument("--sim", metavar="SPEC", help="simulate GPUs, e.g. 4xrtx3090")
    helper.add_argument("--once", action="store_true", help="print hello and one sample, then exit")
    helper.add_argument("--interval", type=float, default=1.0, metavar="SECONDS")
    helper.add_argument(
        "--health-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between the health readings (1-3600; default 10)",
    )
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = args.command or "console"
    try:
        if command == "check-config":
            return check_config(args.file or args.hosts)
        if command == "demo":
            if args.hosts:
                raise UsageError(
                    "--hosts FILE is for the console; the demo makes its own hosts"
                    " (gputui demo --hosts N sets how many)"
                )
            gpus = args.demo_gpus if args.demo_gpus is not None else 5 * args.demo_hosts
            return run_demo(args.demo_hosts, gpus, args.demo_theme or args.theme)
        if command == "helper":
            return run_helper(args.sim, args.once, args.interval, args.health_every)
        if command == "health":
            from gputui.cli import health as cli_health

            return cli_health.main(args)
        if command == "incident":
            from gputui.cli import incident as cli_incident

            return cli_incident.main(args)
        return run_console(args.hosts, args.theme)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"gputui: {line}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gputui health | head`: the reader went; nothing to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except UsageError as exc:
        print(f"gputui: {clean(exc, 1024)}", file=sys.stderr)
        return EXIT_USAGE


class UsageError(Exception):
    """Something the user asked for that cannot be done, said in one line."""


def check_config(path: str | None) -> int:
    """Everything the console would refuse, and what it would fail on later (an unknown
    theme, a key or known_hosts file that is not there), one line each; else a summary."""
    source = find_config(path)
    config = load_config(source)
    require_hosts(config)  # the same verdict as the console's
    from gputui.ui.themes import theme_names

    problems: list[str] = []
    known = theme_names()
    if config.theme not in known:
        problems.append(
            f"{source}:{config.line_of('theme')}: theme: unknown theme {config.theme!r};"
            f" known themes: {', '.join(known)}"
        )
    problems += file_problems(config)
    if problems:
        raise ConfigError(problems)
    print(summarise(config, source))
    return EXIT_OK


def summarise(config: Config, source: Path, max_rows: int = 15) -> str:
    """A one-screen summary of a valid config."""
    hosts = config.resolved()
    pools = Counter(h.pool for h in hosts)
    pool_text = ", ".join(f"{name} ({count})" for name, count in sorted(pools.items())) or "none"
    sims = sum(1 for h in hosts if h.sim)
    head = config.head.host if config.head else "none (monitoring only)"
    lines = [
        f"{clean(str(source), 512)}: OK",
        f"  hosts     {len(hosts)}" + (f" ({sims} simulated)" if sims else ""),
        f"  pools     {pool_text}",
        f"  refresh   every {config.refresh_interval:g}s;"
        f" stale after {config.health.stale_after_s:g}s",
        f"  theme     {config.theme}",
        f"  health    temp warn {config.health.temp_warn_c}°C / crit {config.health.temp_crit_c}°C,"
        f" memory warn {config.health.mem_warn_pct:g}%",
        f"  head      {head}",
        f"  connect   {config.connect_concurrency} handshakes at once,"
        f" timeout {config.defaults.connect_timeout:g}s",
    ]
    if hosts:
        # VIA: hosts.yaml's proxy_jump, else the host's ssh_config ProxyJump (files
        # read only; nothing is connected to).
        from gputui.fleet.connector import configured_jump

        lines.append("")
        rows = [("NAME", "ADDRESS", "USER", "VIA", "POOL", "GPUS")]
        for h in hosts[:max_rows]:
            address = h.address + (f":{h.port}" if h.port else "")
            rows.append(
                (
                    h.name,
                    address,
                    h.user or "(ssh config)",
                    configured_jump(h) or "-",
                    h.pool,
                    h.sim or "nvml",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += [
            "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows
        ]
        if len(hosts) > max_rows:
            lines.append(f"  ... and {len(hosts) - max_rows} more")
    return "\n".join(lines)


def _theme_or_error(config: Config, theme: str | None) -> str:
    return _theme_named(theme or config.theme)


def _theme_named(name: str) -> str:
    """``name`` if it is a theme this console can use; else ``UsageError``, one line
    naming it and the themes there are."""
    from gputui.ui.themes import skipped_themes, theme_names

    names = theme_names()
    broken = skipped_themes()
    if name not in names and name in broken:
        raise UsageError(f"theme {name!r} cannot be used: {broken[name]}")
    if name not in names:
        raise UsageError(f"unknown theme {name!r}; known themes: {', '.join(names)}")
    return name


def run_console(hosts_file: str | None, theme: str | None) -> int:
    config = load_config(find_config(hosts_file))
    require_hosts(config)
    theme_name = _theme_or_error(config, theme)
    from gputui.fleet.fleet import Fleet
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.terminal_exit import SignalExit

    app = GpuTuiApp(Fleet(config), config, theme=theme_name)

    async def console() -> None:
        # SIGTERM, SIGHUP and SIGINT end the console as `q` does, the terminal restored.
        with SignalExit() as signals:
            await signals.run(app)

    asyncio.run(console())
    return app.return_code or EXIT_OK


def run_demo(hosts: int, gpus: int, theme: str | None) -> int:
    if gpus < hosts:
        raise UsageError(f"--gpus {gpus} is fewer than --hosts {hosts}; each host needs a GPU")
    from gputui.demo.limits import DemoLimitError, check_demo_size
    from gputui.remote.simspec import MAX_GPUS

    if gpus > MAX_GPUS * hosts:
        raise UsageError(f"--gpus {gpus} over {hosts} hosts is more than {MAX_GPUS} per host")
    try:
        check_demo_size(hosts)
    except DemoLimitError as exc:
        raise UsageError(str(exc)) from None
    if theme:  # before the simulated hosts start, not after
        _theme_named(theme)
    return asyncio.run(_demo(hosts, gpus, theme))


async def _demo(hosts: int, gpus: int, theme: str | None) -> int:
    from gputui.demo.cluster import DemoCluster
    from gputui.demo.limits import start_error
    from gputui.fleet.fleet import Fleet
    from gputui.ui.app import GpuTuiApp
    from gputui.ui.terminal_exit import SignalExit

    print(
        f"gputui demo: starting {hosts} simulated hosts with {gpus} GPUs on loopback SSH"
        " and a scheduler head…",
        flush=True,
    )
    cluster = DemoCluster(hosts=hosts, gpus=gpus, faults=True, head=True)
    # A closed terminal or a plain kill ends the demo the same way as `q`, so the
    # simulated hosts, their helpers and the workloads are all cleaned up; during
    # start-up it stops the start. Should that hang, they are killed on the way out.
    with SignalExit(on_force=cluster.emergency_cleanup) as signals:
        try:
            await cluster.start()
        except asyncio.CancelledError:
            if signals.received is None:
                raise
            return signals.exit_code
        except OSError as exc:  # too many open files, no loopback, ...
            raise UsageError(start_error(exc, hosts)) from None
        seeding: asyncio.Task[None] | None = None
        try:
            config = cluster.config()
            theme_name = _theme_or_error(config, theme)
            app = GpuTuiApp(Fleet(config), config, theme=theme_name)
            seeding = asyncio.get_running_loop().create_task(_seed_demo(cluster, app))
            await signals.run(app)
        finally:
            if seeding is not None:
                seeding.cancel()
                with contextlib.suppress(BaseException):
                    await seeding
            await cluster.stop()
    return app.return_code or EXIT_OK


DEMO_WELCOME = (
    "This demo has a scheduler. c claims the selected GPU (the export line is copied),"
    " u releases it, n enqueues a job (Ctrl+S sends it), Q shows the queue with each"
    " job's output."
)


async def _seed_demo(cluster: object, app: object) -> None:
    """Give the demo's head work once its hosts are live, then say how to use it."""
    from gputui.demo.cluster import DemoCluster
    from gputui.ui.app import GpuTuiApp

    assert isinstance(cluster, DemoCluster) and isinstance(app, GpuTuiApp)
    try:
        done = await cluster.seed_head()
    except Exception as exc:  # the demo goes on without its seeded work, saying so
        done = [f"seeding stopped: {clean(repr(exc), 200)}"]
    if cluster.head is not None:
        # The enqueue form offers the demo's own little job, in the directory it is in.
        here = str(cluster.head.socket.parent)
        # --demo-pid: it ends with the demo, like the seeded jobs (the demo leaves nothing).
        command = f"python3 train.py --model mine --steps 20 --pause 1 --demo-pid {os.getpid()}"
        app.submit_defaults = (here, command)
    quick = [line for line in done if "quick-test" in line]
    text = DEMO_WELCOME + (f" Watch {quick[0]}." if quick else "")
    problems = [
        line for line in done if "stopped" in line or "refused" in line or "did not" in line
    ]
    app.notify(text, title="gputui demo", timeout=40, markup=False)
    for line in problems:
        app.notify(line, title="demo head", severity="warning", timeout=20, markup=False)


def run_helper(sim: str | None, once: bool, interval: float, health_every: float = 10.0) -> int:
    from gputui.remote import helper

    argv = ["--interval", str(interval), "--health-every", str(health_every)]
    if sim:
        argv += ["--sim", sim]
    if once:
        argv.append("--once")
    return int(helper.main(argv) or 0)


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
