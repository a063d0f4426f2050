"""Command line: ``gputui`` (the console), ``check-config``, ``demo``, ``health``,
``incident``, ``helper``.

Each command's module is imported only when it runs (the parser here knows them
all). Every failure a user can cause ends in one clear line on stderr and a non-zero
exit status; no traceback reaches a user.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gputui import __version__
from gputui.cli.args import LANG_HELP, Parser, RawWords, finding_the_head, hanging
from gputui.cli.errors import UsageError
from gputui.common.i18n import N_, _
from gputui.common.i18n import configure as configure_language
from gputui.common.locations import HostsMissing, named_hosts
from gputui.config.errors import ConfigError

EXIT_OK = 0
EXIT_CONFIG = 1
EXIT_USAGE = 2


_SCHEDULER_TITLE = N_("scheduler (a `head:` in hosts.yaml; `gputui VERB --help` for each):")
_SCHEDULER_VERBS = (
    ("head", N_("run the head daemon (also: head backup PATH, --print-unit, --check)")),
    (
        "claim, release, claims, env",
        N_("claim GPUs, give them back, list claims, print CUDA_VISIBLE_DEVICES"),
    ),
    ("run", N_("wait for N GPUs here, run a command with them, release them")),
    (
        "gpus [--free] [--pool P]",
        N_(
            "every GPU: its state (free, claimed, job, rogue, stray, drained, fenced,"
            " unhealthy), holder, use, why it is unavailable"
        ),
    ),
    (
        "submit, queue, show, logs, wait, attach",
        N_(
            "queue a job, list the queue, one job, its output, wait for it, a terminal on"
            " an interactive job (run --pty)"
        ),
    ),
    ("history", N_("finished jobs: exit code, GPU-hours, busy share, energy (as sacct)")),
    (
        "cancel, kill, preempt, requeue, hold, release-hold",
        N_("act on jobs (--reason when an admin acts on another's)"),
    ),
    (
        "explain, quota",
        N_("why a job waits (place, factors, start estimate); weekly quotas"),
    ),
    (
        "drain, undrain, unfence",
        N_(
            "admins: no new work on a HOST[:GPU] (--reason), take it again; clear the"
            " head's automatic fence of a GPU (--reason)"
        ),
    ),
    (
        "health --ack KEY --note TEXT",
        N_(
            "admins: acknowledge a problem of the head's board (KEY from health --json or"
            " --keys); `gputui health` asks the head when there is one"
        ),
    ),
    (
        "force-free",
        N_(
            "admins: take a stuck GPU back, step by step (HOST:GPU --reason TEXT"
            " [--reset]); exit 0 free, 1 a step failed"
        ),
    ),
    ("audit, whoami", N_("the audit trail; who the head says you are")),
    (
        "notices [--all]",
        N_(
            "what the head told you while you were away (preemptions, job ends, drains);"
            " shown once, like mail"
        ),
    ),
    ("usage, report", N_("GPU-hours, busy hours, energy and cost; a weekly summary")),
    (
        "book, unbook, bookings",
        N_("the booking board: GPUs held ahead for a window (--from, --for)"),
    ),
    ("notify", N_("your notices in your team chat: set URL, show, test, clear")),
)


def scheduler_help(say: Callable[[str], str] = _) -> str:
    """The scheduler's verbs, a line or two each, in the language ``say`` looks
    words up in: the top of ``gputui --help``'s epilog."""
    lines = [say(_SCHEDULER_TITLE)]
    for verbs, text in _SCHEDULER_VERBS:
        lines += hanging(verbs, say(text), 16)
    return "\n".join(lines) + "\n"


def _epilog() -> str:
    return scheduler_help() + "\n" + finding_the_head()


def parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gputui",
        description=N_("Live console for a team's GPU servers, over SSH."),
        formatter_class=RawWords,
    )
    parser.epilog_of = _epilog
    parser.add_argument("--version", action="version", version=f"gputui {__version__}")
    parser.add_argument(
        "--hosts",
        metavar="FILE",
        help=(
            N_(
                "hosts.yaml to use (else $GPUTUI_HOSTS, ./hosts.yaml,"
                " ~/.config/gputui/hosts.yaml, /etc/gputui/hosts.yaml; a file found there"
                " is skipped unless it is yours or root's and nobody else can write it;"
                " one named here is refused when anyone besides its owner can write it)"
            )
        ),
    )
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help=N_("the head's socket, for health and the scheduler verbs (see below)"),
    )
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help=N_("colour theme (gputui-dark, gputui-light, gputui-high-contrast, ...)"),
    )
    parser.add_argument("--lang", metavar="LANG", help=LANG_HELP)
    parser.add_argument(
        "--direct",
        action="store_true",
        help=(
            N_(
                "console: watch the hosts over SSH from this console (a helper per host per"
                " console) even with a head in hosts.yaml; without it the console reads the"
                " head's stream (one connection), and offers this (key S) when the head is away"
            )
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    sub.add_parser("console", help=N_("open the console (the default)"))

    check = sub.add_parser("check-config", help=N_("validate hosts.yaml and print a summary"))
    check.add_argument(
        "file", nargs="?", help=N_("file to check (default: the search order above)")
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help=N_(
            "an identity_file or known_hosts file that does not exist is an error"
            " (exit 1), not a warning"
        ),
    )

    demo = sub.add_parser(
        "demo", help=N_("open the console on a simulated cluster over real SSH on loopback")
    )
    demo.add_argument(
        "--hosts",
        dest="demo_hosts",
        type=_positive,
        default=4,
        metavar="N",
        help=N_("simulated hosts (default 4)"),
    )
    demo.add_argument(
        "--power",
        dest="demo_power",
        choices=("off", "report", "lock"),
        default="off",
        help=N_(
            "the head's power.mode, with one job that holds a card and does nothing:"
            " lock shows its clocks locked low (CLK-LOW) and its draw falling (default off)"
        ),
    )
    demo.add_argument(
        "--gpus",
        dest="demo_gpus",
        type=_positive,
        default=None,
        metavar="M",
        help=N_("GPUs in all (default 5 per host: 20 for 4 hosts)"),
    )
    demo.add_argument("--theme", dest="demo_theme", metavar="NAME", help=N_("colour theme"))
    demo.add_argument(
        "--mig",
        dest="demo_mig",
        action="store_true",
        help=N_("MIG mode on the A100 and H100 hosts (slices: 3g.40gb + 2x 2g.20gb, 7x 1g.10gb)"),
    )

    _health_parser(sub)
    _incident_parser(sub)

    helper = sub.add_parser(
        "helper", help=N_("run the host helper here and print its JSON lines (for debugging)")
    )
    helper.add_argument("--sim", metavar="SPEC", help=N_("simulate GPUs, e.g. 4xrtx3090"))
    helper.add_argument(
        "--once", action="store_true", help=N_("print hello and one sample, then exit")
    )
    helper.add_argument("--interval", type=float, default=1.0, metavar="SECONDS")
    helper.add_argument(
        "--health-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help=N_("seconds between the health readings (1-3600; default 10)"),
    )
    return parser


HEALTH_ABOUT = N_(
    "With a head in hosts.yaml it prints the head's board (first seen, counts and"
    " acknowledgements kept over time); without one, or when the head does not answer,"
    " it connects to every host of hosts.yaml (or the ones of ``--host``) the way the"
    " console does, has each helper take a health reading at once, runs the health checks"
    " on it (or on the host's failure to answer) and prints the ranked list, or JSON with"
    " ``--json``. The exit code is for cron and monitoring: 0 nothing wrong and every"
    " check made, 1 warnings only, 2 something critical (acknowledged problems count"
    " too), 3 when the check itself could not run (bad config or arguments, or an --ack"
    " refused), 4 nothing wrong found but some checks could not be made (unknown, listed)."
)
"""What ``gputui health --help`` says it does (``gputui.cli.health`` does it)."""


def _health_parser(sub: Any) -> None:
    p = sub.add_parser(
        "health",
        help=N_(
            "every problem on every host, ranked"
            " (exit 0 ok, 1 warnings, 2 critical, 3 could not run, 4 some checks unknown)"
        ),
        description=HEALTH_ABOUT,
    )
    p.add_argument(
        "--json", action="store_true", help=N_("print JSON (problems and unknown checks)")
    )
    p.add_argument(
        "--host", action="append", metavar="NAME", help=N_("only this host (repeatable)")
    )
    p.add_argument(
        "--wait",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help=N_("how long to wait for hosts to answer (default 20)"),
    )
    p.add_argument(
        "--keys", action="store_true", help=N_("also list each problem's key (for --ack)")
    )
    p.add_argument("--ack", metavar="KEY", help=N_("acknowledge problem KEY on the head (admins)"))
    p.add_argument("--note", metavar="TEXT", help=N_("why it may wait (required with --ack)"))


def _incident_parser(sub: Any) -> None:
    p = sub.add_parser(
        "incident",
        help=N_("a timeline for one host or GPU: boot, Xids, problems, audit rows, readings"),
    )
    p.add_argument("target", metavar="HOST[:GPU]")
    p.add_argument(
        "--since", default="24h", help=N_("how far back: 30m, 12h, 2d, 1w (default 24h)")
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--wait", type=float, default=20.0, metavar="SECONDS")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("{text} is not a whole number").format(text=repr(text[:40]))
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(_("{value} must be at least 1").format(value=value))
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = args.command or "console"
    named = args.hosts if command != "check-config" or args.file is None else args.file
    if command not in ("health", "incident", "demo"):  # health, incident: their own exit 3;
        # the demo refuses --hosts itself and reads no hosts.yaml
        try:
            named_hosts(named)
        except HostsMissing as exc:
            print(f"gputui: {exc.line}", file=sys.stderr)
            return EXIT_USAGE
    try:
        if command == "check-config":
            from gputui.cli.check_config import check_config

            return check_config(args.file or args.hosts, strict=args.strict)
        if command == "demo":
            if args.hosts:
                raise UsageError(
                    _(
                        "--hosts FILE is for the console; the demo makes its own hosts"
                        " (gputui demo --hosts N sets how many)"
                    )
                )
            gpus = args.demo_gpus if args.demo_gpus is not None else 5 * args.demo_hosts
            from gputui.cli.demo import run_demo

            return run_demo(
                args.demo_hosts,
                gpus,
                args.demo_theme or args.theme,
                power=args.demo_power,
                mig=args.demo_mig,
            )
        if command == "helper":
            return run_helper(args.sim, args.once, args.interval, args.health_every)
        if command == "health":
            from gputui.cli import health as cli_health

            return cli_health.main(args)
        if command == "incident":
            from gputui.cli import incident as cli_incident

            return cli_incident.main(args)
        return run_console(args.hosts, args.theme, direct=args.direct)
    except ConfigError as exc:
        for line in exc.lines:
            print(f"gputui: {line}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gputui health | head`: the reader went; nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except UsageError as exc:
        from gputui.common.text import clean

        print(f"gputui: {clean(exc, 1024)}", file=sys.stderr)
        return EXIT_USAGE


def run_console(hosts_file: str | None, theme: str | None, *, direct: bool = False) -> int:
    """The console: over the head's stream when hosts.yaml has a head (``direct``:
    over SSH of its own all the same), else over SSH to every host."""
    import asyncio

    from gputui.cli.themes import theme_for
    from gputui.config.loader import find_config, load_config, require_hosts

    config = load_config(find_config(hosts_file))
    require_hosts(config)
    configure_language(config.ui.lang)  # below --lang, above LANG
    theme_name = theme_for(config, theme)
    from gputui.cli.console_app import console_app
    from gputui.common.collector import pace_collector
    from gputui.ui.terminal_exit import SignalExit

    app = console_app(config, theme_name, direct=direct)
    pace_collector()

    async def console() -> None:
        # SIGTERM, SIGHUP and SIGINT end the console as `q` does, the terminal restored.
        with SignalExit() as signals:
            await signals.run(app)

    asyncio.run(console())
    return app.return_code or EXIT_OK


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
