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

_TAKES_VALUE = ("--hosts", "--socket", "--theme", "--database", "--metrics")
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


CONSOLE_COMMANDS = ("console", "check-config", "demo", "health", "incident", "helper")
"""The console parser's commands (``cli.console``; a test holds them to it)."""


def _before(args: list[str], verb: str | None) -> list[str]:
    """The global options: what comes before the verb."""
    return args if verb is None else args[: args.index(verb)]


def _usage_error(line: str) -> int:
    print(f"gputui: {line}", file=sys.stderr)
    return 2


def unknown_verb(verb: str) -> str:
    """The line for a word that is no command: every command, and the nearest ones."""
    import difflib
    import textwrap

    from gputui.cli.args import VERBS
    from gputui.common.printable import shown

    known = [*CONSOLE_COMMANDS, "head", *VERBS]
    near = difflib.get_close_matches(verb, known, n=3, cutoff=0.6)
    hint = f"; did you mean: {', '.join(near)}?" if near else ""
    lists = (
        f"console commands: {', '.join(CONSOLE_COMMANDS)}",
        f"scheduler verbs: head, {', '.join(VERBS)}",
    )
    wrapped = [textwrap.fill(t, 78, initial_indent="  ", subsequent_indent="    ") for t in lists]
    return "\n".join([f"unknown command {shown(verb, 40)!r}{hint}", *wrapped])


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verb = verb_of(args)
    globals_ = _before(args, verb)
    if "--version" in globals_:  # before any import: the console's parser costs 0.1 s
        from gputui import __version__

        print(f"gputui {__version__}")
        return 0
    if verb is not None and verb not in CONSOLE_COMMANDS and verb != "head":
        from gputui.cli.args import VERBS

        if verb not in VERBS:
            return _usage_error(unknown_verb(verb))
        if "--theme" in globals_ or any(a.startswith("--theme=") for a in globals_):
            return _usage_error(
                f"--theme is for the console (gputui --theme NAME); `gputui {verb}` has no"
                " colours to theme"
            )
        from gputui.cli import verbs

        return verbs.main(args)
    if verb == "head":
        from gputui.cli import head

        at = args.index("head")
        rest = args[:at] + args[at + 1 :]
        return head.main(rest)
    from gputui.cli import console

    return console.main(args)


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
