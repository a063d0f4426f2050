"""The ``gputui`` command: picks the verb's module before importing anything heavy.

Scheduler verbs (``submit``, ``queue``, …) run on every shell call, so they must
not pay for the console's imports (Textual, pydantic config models, asyncssh):
they go to ``gputui.cli.verbs``; ``gputui head`` loads the daemon
(``gputui.cli.head``); everything else is the console's command line
(``gputui.cli.console``). Each of those imports a verb's own module only when it
runs.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable

_TAKES_VALUE = ("--hosts", "--socket", "--theme", "--database", "--metrics", "--lang")
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

    from gputui.cli.args import VERBS, wrap_cells
    from gputui.common.i18n import _
    from gputui.common.printable import shown

    known = [*CONSOLE_COMMANDS, "head", *VERBS]
    near = difflib.get_close_matches(verb, known, n=3, cutoff=0.6)
    word = repr(shown(verb, 40))
    if near:
        first = _("unknown command {word}; did you mean: {names}?").format(
            word=word, names=", ".join(near)
        )
    else:
        first = _("unknown command {word}").format(word=word)
    lists = (
        _("console commands: {names}").format(names=", ".join(CONSOLE_COMMANDS)),
        _("scheduler verbs: {names}").format(names=", ".join(["head", *VERBS])),
    )
    return "\n".join([first, *(_indented(t, wrap_cells) for t in lists)])


def _indented(text: str, wrap_cells: Callable[[str, int], list[str]]) -> str:
    """A list wrapped to 78 cells: two spaces before its first line, four before the
    rest (English as ``textwrap`` wraps it; other languages by display cells)."""
    if text.isascii():
        import textwrap

        return textwrap.fill(text, 78, initial_indent="  ", subsequent_indent="    ")
    lines = wrap_cells(text, 74)
    return "\n".join(("  " if i == 0 else "    ") + line for i, line in enumerate(lines))


def _language(globals_: list[str]) -> tuple[list[str], str | None]:
    """The global options without ``--lang LANG`` (or ``--lang=LANG``), and its value
    (None: not given). Every parser lists it for its help; it is taken here, once."""
    rest: list[str] = []
    lang = None
    items = iter(globals_)
    for item in items:
        if item == "--lang":
            lang = next(items, "")
        elif item.startswith("--lang="):
            lang = item.partition("=")[2]
        else:
            rest.append(item)
    return rest, lang


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    verb = verb_of(args)
    globals_ = _before(args, verb)
    if any(a == "--lang" or a.startswith("--lang=") for a in globals_):
        from gputui.common import i18n

        rest, lang = _language(globals_)
        try:
            i18n.choose(lang)
        except ValueError as exc:
            return _usage_error(str(exc))
        args = rest + args[len(globals_) :]
        globals_ = rest
    if "--version" in globals_:  # before any import: the console's parser costs 0.1 s
        from gputui import __version__

        print(f"gputui {__version__}")
        return 0
    if verb is not None and verb not in CONSOLE_COMMANDS and verb != "head":
        early = None
        if verb == "queue":  # a bare one on Slurm: squeue runs while the parsers load
            from gputui.cli.slurm_front import early_queue

            early = early_queue(args)
        from gputui.cli.args import VERBS

        if verb not in VERBS:
            return _usage_error(unknown_verb(verb))
        if "--theme" in globals_ or any(a.startswith("--theme=") for a in globals_):
            from gputui.common.i18n import _

            return _usage_error(
                _(
                    "--theme is for the console (gputui --theme NAME); `gputui {verb}` has no"
                    " colours to theme"
                ).format(verb=verb)
            )
        from gputui.cli import verbs

        return verbs.main(args, early=early)
    if verb == "head":
        from gputui.cli import head

        at = args.index("head")
        rest = args[:at] + args[at + 1 :]
        return head.main(rest)
    from gputui.cli import console

    return console.main(args)


QUICK_EXIT = frozenset({"queue"})
"""Verbs whose process ends without Python's teardown (``entry`` only; ``main`` returns
as usual): a listing holds nothing to clean up (no file, lock or handler left to
run), and freeing its views and every module one by one took about 15 ms of a
``gputui queue`` of 2,000 jobs, a command run on every shell prompt."""


def entry() -> None:
    """Console-script entry point."""
    code = main()
    if verb_of(sys.argv[1:]) in QUICK_EXIT:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> NoReturn:
    """What was printed, written out; then the process ends at once (``os._exit``). A
    reader gone (``gputui queue | head``) is not an error, as in the verbs; output that
    cannot be written (a full disk) is one line and exit 120, as Python's own exit
    says it."""
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader left, or the stream is closed
            pass
        except OSError as exc:
            line = f"gputui: cannot write the output: {exc.strerror or exc}\n"
            with contextlib.suppress(OSError):
                os.write(2, line.encode(errors="replace"))
            code = 120
    os._exit(code)


if __name__ == "__main__":
    entry()
