"""The ``gputui`` command: picks the verb's module before importing anything heavy.

Scheduler verbs (``submit``, ``queue``, …) run on every shell call, so they must
not pay for the console's imports (Textual, pydantic config models, asyncssh):
they go to ``gputui.cli.verbs``; ``gputui head`` loads the daemon
(``gputui.cli.head``); everything else is the console's command line
(``gputui.cli.console``). Each of those imports a verb's own module only when it
runs.
"""

from __future__ import annotations

import sys

_TAKES_VALUE = ("--hosts", "--socket", "--theme", "--database")
"""Every option before the verb that takes a value, in any of the parsers this picks
from (``cli.console``, ``cli.args``, ``cli.head``): a test holds them to it."""


def verb_of(argv: list[str]) -> str | None:
    """The first word of ``argv`` that is not a global option or its value."""
    items = iter(argv)
    for item in items:
        if item in _TAKES_VALUE:
            next(items, None)
        elif item.startswith("-"):
            continue
        else:
            return item
    return None


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verb = verb_of(args)
    if verb == "head":
        from gputui.cli import head

        at = args.index("head")
        rest = args[:at] + args[at + 1 :]
        return head.main(rest)
    from gputui.cli.args import VERBS

    if verb in VERBS and "--theme" not in args:
        from gputui.cli import verbs

        return verbs.main(args)
    from gputui.cli import console

    return console.main(args)


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
