"""A scheduler verb builds only its own parser (``args.parser(verb)``, chosen by
``args.only_verb``): for any command line it lets through, what is printed and how
it ends must be what every verb's parser gives, in English and in Chinese."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui import entry
from gputui.cli import args
from gputui.common import i18n


@pytest.fixture(autouse=True)
def _language_reset() -> Iterator[None]:
    i18n.reset()
    yield
    i18n.reset()


def outcome(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[Any, str, str]:
    """What parsing ``argv`` gave (the values, or the exit status), and what it printed."""
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            ns, extra = parser.parse_known_args(argv)
            result: Any = (vars(ns), extra)
        except SystemExit as exc:
            result = ("exit", exc.code)
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("lang", ["en", "zh_CN"])
@pytest.mark.parametrize("verb", list(args.VERBS))
def test_a_verbs_own_parser_reads_as_every_verbs_parser(lang: str, verb: str) -> None:
    i18n.choose(lang)
    full, one = args.parser(), args.parser(verb)
    [own] = args.verbs_of(one)
    everyone = {p.prog.removeprefix("gputui "): p for p in args.verbs_of(full)}
    assert set(everyone) == set(args.VERBS)
    assert own.prog == f"gputui {verb}"
    assert own.format_help() == everyone[verb].format_help()
    assert one.format_usage() == full.format_usage()


def test_only_a_plain_command_line_gets_one_verbs_parser() -> None:
    assert args.only_verb(["queue", "--all"]) == "queue"
    assert args.only_verb(["--hosts", "h.yaml", "--socket=s", "--lang", "zh", "claim"]) == "claim"
    assert args.only_verb(["--hosts", "queue", "claims"]) == "claims"  # queue: the file
    for argv in (["-h", "queue"], ["--he", "queue"], ["--", "queue"], ["--hos", "x", "queue"]):
        assert args.only_verb(argv) is None  # every verb's parser: -h lists them all
    assert args.only_verb(["queu"]) is None
    assert args.only_verb(["--hosts"]) is None
    assert args.only_verb([]) is None


BEFORE = st.sampled_from(
    ["--hosts", "--socket", "--lang", "--hosts=h.yaml", "--socket=/s", "--lang=en", "-h",
     "--help", "--he", "--so", "--", "x", "h.yaml", "queue"]
)  # fmt: skip
AFTER = st.sampled_from(
    ["--help", "-h", "--json", "--all", "--user", "1", "12_7", "h1:0", "--reason", "r", "-g",
     "0", "2", "--for", "2h", "--", "true", "--bogus", "--hosts", "--socket=/s", "set", "show",
     "--al", "-o", "%i", "--from", "now", "x"]
)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    before=st.lists(BEFORE, max_size=4),
    verb=st.sampled_from(list(args.VERBS)),
    after=st.lists(AFTER, max_size=5),
    lang=st.sampled_from(["en", "zh_CN"]),
)
def test_any_command_line_one_parser_takes_ends_as_with_every_verbs_parser(
    before: list[str], verb: str, after: list[str], lang: str
) -> None:
    argv = [*before, verb, *after]
    chosen = args.only_verb(argv)
    if chosen is None:
        return  # every verb's parser, as before
    assert chosen == entry.verb_of(argv)  # the verb the entry point sends the call for
    i18n.reset()
    i18n.choose(lang)
    assert outcome(args.parser(chosen), argv) == outcome(args.parser(), argv)
