"""The ``:`` line's words: parsing, ``:claim`` by the CLI's rules, completion, history."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gputui.cli.args import parser as cli_parser
from gputui.common.argtypes import MAX_GPUS, gpu_count
from gputui.scheduler.server.arg_types import MAX_GPUS_PER_JOB
from gputui.ui.command_history import MAX_ENTRIES, CommandHistory, history_path
from gputui.ui.commands import (
    Order,
    Refused,
    claim_parser,
    complete,
    completions,
    parse,
)

SORTS = ["host", "util", "mem", "temp", "power", "free"]
THEMES = ["gputui-dark", "gputui-light"]


def p(text: str) -> Order | Refused:
    return parse(text, SORTS, THEMES)


def test_views_and_quit_parse_with_or_without_the_colon() -> None:
    for text in ("queue", ":queue", " :usage ", "health", "audit", "help"):
        assert isinstance(p(text), Order)
    assert p(":q") == Order("quit") and p("q!") == Order("quit") == p("exit")
    assert p("sort util") == Order("sort", "util")
    assert p("filter alice a100") == Order("filter", "alice a100")


def test_claim_takes_what_gputui_claim_takes() -> None:
    assert p(":claim 2 --pool a100") == Order(
        "claim", claim={"gpus": 2, "pool": "a100", "note": "", "wait": True}
    )
    order = p(":claim -g 2 --pool a100 --for 2h --note 'eval run'")
    assert order == Order(
        "claim",
        claim={"gpus": 2, "pool": "a100", "duration_s": 7200.0, "note": "eval run", "wait": True},
    )
    assert p("claim gpu01:1 --no-wait") == Order(
        "claim", claim={"gpu_refs": ["gpu01:1"], "note": "", "wait": False}
    )
    assert p(":claim 2 --mig 1g.10gb") == Order(
        "claim", claim={"gpus": 2, "mig": "1g.10gb", "note": "", "wait": True}
    )
    assert isinstance(p(":claim --mig 'no such'"), Refused)


def test_bad_claims_are_one_line_from_the_cli_rules() -> None:
    cases = {
        "claim -g 100": "must be 1 to 64 GPUs, not 100",
        "claim 0": "must be 1 to 64 GPUs, not 0",
        "claim -5": "must be 1 to 64 GPUs, not -5",  # a count, not a GPU named "-5"
        "claim -g two": "not a number of GPUs: 'two'",
        "claim --for soon": "not a duration",
        "claim --for 400d": "--for at most 366 days",
        "claim --for 9999d": "not a duration: '9999d' (more than 10 years)",
        "claim --bogus": "unrecognized arguments: --bogus",
        "claim --json": "--json is for the command line",
        "claim --pool 'a\x1bb'": "--pool must be printable",
    }
    for text, said in cases.items():
        refused = p(text)
        assert isinstance(refused, Refused), text
        assert said in refused.line and "\n" not in refused.line, (text, refused.line)


def test_an_unknown_command_gets_one_clear_line() -> None:
    refused = p(":queu")
    assert isinstance(refused, Refused)
    assert refused.line == "unknown command :queu; did you mean :queue? (:help lists them)"
    assert isinstance(p("sort speed"), Refused) and isinstance(p("queue now"), Refused)
    assert isinstance(p(""), Refused) and isinstance(p("'unclosed"), Refused)


@given(st.text(max_size=600))
def test_any_line_parses_or_is_refused_in_one_line(text: str) -> None:
    result = p(text)
    if isinstance(result, Refused):
        assert result.line and "\n" not in result.line and len(result.line) < 400
    assert completions(text, SORTS, THEMES) is not None
    complete(text, SORTS, THEMES)


def test_completion() -> None:
    assert complete("qu", SORTS, THEMES) is None  # queue or quit
    assert complete("que", SORTS, THEMES) == "queue"
    assert complete("so", SORTS, THEMES) == "sort "
    assert complete("sort u", SORTS, THEMES) == "sort util"
    assert complete("sort ", SORTS, THEMES) is None  # six keys: nothing common to add
    assert completions("q", SORTS, THEMES) == ["q!", "quit", "queue"]


def test_history_is_kept_capped_and_private(tmp_path: Path) -> None:
    path = history_path({"XDG_STATE_HOME": str(tmp_path / "state")})
    assert path == tmp_path / "state" / "gputui" / "commands"
    assert history_path({}, home=tmp_path) == tmp_path / ".local/state/gputui/commands"
    history = CommandHistory(path)
    for i in range(MAX_ENTRIES + 5):
        history.add(f"sort {i}")
    history.add("sort 7")  # again: moves to the end, once
    again = CommandHistory(path)
    assert again.problem is None
    assert len(again.entries) == MAX_ENTRIES and again.entries[-1] == "sort 7"
    assert again.entries.count("sort 7") == 1
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_a_bad_history_file_is_ignored_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "commands"
    for content in (b"\xff\xfe not utf-8\n", b"ok\n" + b"x" * 70_000, b"bad\x1b[2Jline\n"):
        path.write_bytes(content)
        history = CommandHistory(path)
        assert history.entries == []
        assert history.problem is not None and "\n" not in history.problem
        assert str(path) in history.problem
        history.add("queue")  # not written over: the user may want to look at it
        assert path.read_bytes() == content
    path.unlink()
    os.symlink(tmp_path / "elsewhere", path)
    assert CommandHistory(path).problem is not None


def _flags(p: argparse.ArgumentParser) -> set[tuple[tuple[str, ...], str]]:
    return {(tuple(a.option_strings), a.dest) for a in p._actions if a.dest != "help"}


def test_the_console_claim_takes_the_clis_flags_and_limits() -> None:
    """The console cannot import the CLI (it sits below it): the same flags, the
    same GPU limit, the same duration reader, held equal here."""
    sub = next(a for a in cli_parser()._actions if isinstance(a, argparse._SubParsersAction))
    cli = sub.choices["claim"]
    assert _flags(claim_parser()) == _flags(cli)
    types = {a.dest: a.type for a in cli._actions}
    assert {a.dest: a.type for a in claim_parser()._actions}["duration"] is types["duration"]
    assert {a.dest: a.type for a in claim_parser()._actions}["gpus"] is types["gpus"] is gpu_count
    assert MAX_GPUS == MAX_GPUS_PER_JOB
