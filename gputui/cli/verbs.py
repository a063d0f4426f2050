"""The scheduler's command-line verbs: claim, release, submit, queue, run, logs, …

Each verb is one short-lived process that asks the scheduler through its
``SchedulerBackend`` (the head's, over the light blocking client): this module
loads only the verb's own module (``args.VERBS``), so a ``gputui submit`` costs a
few tens of milliseconds, not the console's start-up. Every failure is one line on
stderr and an exit status: 1 refused (or a capability the scheduler lacks, said
before anything is asked), 2 bad usage, 3 the scheduler cannot be reached.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from gputui.cli.args import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    VERBS,
    only_verb,
    parser,
    said,
)
from gputui.cli.slurm_front import hosts_named, slurm_backend
from gputui.common import i18n
from gputui.common.i18n import _
from gputui.scheduler.client.errors import HeadError

if TYPE_CHECKING:
    from gputui.scheduler.client.backend import SessionBackend
    from gputui.scheduler.client.slurm.backend import SlurmBackend

Handler = Callable[["SessionBackend", argparse.Namespace], int]


def handler(verb: str) -> Handler:
    """The function that runs ``verb``, its module imported now (and no other's)."""
    module = VERBS[verb].module
    if module == "jobs":
        from gputui.cli import jobs

        return jobs.HANDLERS[verb]
    if module == "claims":
        from gputui.cli import claims

        return claims.HANDLERS[verb]
    if module == "bookings":
        from gputui.cli import bookings

        return bookings.HANDLERS[verb]
    if module == "run":
        from gputui.cli import run

        return run.run
    if module == "attach":
        from gputui.cli import attach

        return attach.run
    if module == "records":
        from gputui.cli import records

        return records.HANDLERS[verb]
    if module == "policy":
        from gputui.cli import policy

        return policy.HANDLERS[verb]
    if module == "usage":
        from gputui.cli import usage

        return usage.HANDLERS[verb]
    if module == "history":
        from gputui.cli import history

        return history.run
    if module == "drain":
        from gputui.cli import drain

        return drain.run
    if module == "gpus":
        from gputui.cli import gpus

        return gpus.HANDLERS[verb]
    if module == "notify":
        from gputui.cli import notify

        return notify.run
    if module == "forcefree":
        from gputui.cli import forcefree

        return forcefree.run
    raise AssertionError(f"no module runs {verb}")  # pragma: no cover (args.VERBS is fixed)


def _ui_lang(hosts_file: str | None) -> str | None:
    """hosts.yaml's ``ui.lang``, if it names one (read on the first translated line)."""
    from gputui.scheduler.client.place import config_section

    found = config_section(hosts_file, "ui")
    lang = found[0].get("lang") if found is not None else None
    return lang if isinstance(lang, str) else None


@contextmanager
def _reached(args: argparse.Namespace, given: SessionBackend | None) -> Iterator[SessionBackend]:
    if given is not None:
        yield given
        return
    if args.socket is None:
        slurm = slurm_backend(args.hosts)
        if slurm is not None:
            if args.verb == "queue":  # the listing runs while the verb's code loads
                table = not args.json and getattr(args, "format", None) is None
                slurm.prefetch_queue(all=args.all, user=args.user, table=table)
            # The verbs check each capability they use first (``require``): none of a
            # session's own (claims held for a process's life) is asked of Slurm.
            yield cast("SessionBackend", slurm)
            return
    from gputui.scheduler.client.session import head_session

    with head_session(args.socket, args.hosts) as session:
        yield session


BEFORE_THE_VERB = {"--socket": "PATH", "--hosts": "FILE"}
"""Options of ``gputui`` itself, not of a verb: given after one, the error says where."""


def main(
    argv: Sequence[str],
    backend: SessionBackend | None = None,
    early: SlurmBackend | None = None,
) -> int:
    """``gputui VERB …`` for a scheduler verb; ``backend``: the scheduler to ask
    (default: the head, found as ``--socket`` and ``--hosts`` say); ``early``: a bare
    ``queue``'s Slurm, its listing already started (``slurm_front.early_queue``)."""
    # hosts.yaml's ui.lang for what parsing may say (--help, a usage error): read
    # only if something is looked up, from the --hosts given before the verb.
    i18n.configure_later(lambda: _ui_lang(hosts_named(argv)))
    if backend is None and early is not None:  # a bare ``queue``'s listing already runs
        backend = cast("SessionBackend", early)
    front = parser(only_verb(argv))  # the verb's own parser: the others cost 10 ms
    args, extra = front.parse_known_args(list(argv))
    if extra:
        misplaced = [e for e in extra if e.split("=")[0] in BEFORE_THE_VERB]
        if misplaced:
            name = misplaced[0].split("=")[0]
            front.error(
                _("{name} goes before the verb: gputui {name} {value} {verb}").format(
                    name=name, value=BEFORE_THE_VERB[name], verb=args.verb
                )
            )
        front.error(_("unrecognized arguments: {args}").format(args=" ".join(extra)))
    i18n.configure_later(lambda: _ui_lang(args.hosts))
    try:
        with _reached(args, backend) as scheduler:
            needs = VERBS[args.verb].needs
            if args.verb == "run" and scheduler.supports("srun"):
                needs = ("srun",)  # Slurm runs it: srun, in an allocation of its own
            elif args.verb == "run" and args.pty:
                needs = ("submit", "attach")  # a job on a GPU host, and its terminal
            from gputui.scheduler.client.backend import require  # once Slurm's squeue runs

            require(scheduler, needs)
            return handler(args.verb)(scheduler, args)
    except HeadError as exc:
        print(f"gputui {args.verb}: {said(exc, args.verb)}", file=sys.stderr)
        if exc.code == "usage":
            return EXIT_USAGE
        if exc.code in ("unreachable", "timeout", "config"):
            return EXIT_UNREACHABLE
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except (ConnectionError, EOFError, OSError) as exc:  # the head went away mid-answer
        lost = _("lost the head: {error}").format(error=exc)
        print(f"gputui {args.verb}: {lost}", file=sys.stderr)
        return EXIT_UNREACHABLE
