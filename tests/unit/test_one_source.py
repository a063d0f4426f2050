"""Rules kept in one place: where two parts of gputui must agree on a rule, they
import one definition, or (where one part cannot import the other) a test here
proves that they agree."""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from gputui import entry
from gputui.cli import args, console, head
from gputui.health import board, head_answer
from gputui.scheduler.client import aio, ops, sync
from gputui.scheduler.head.watch import health
from gputui.scheduler.server import wire


def _value_options(parser: argparse.ArgumentParser) -> set[str]:
    """The options of a parser's top level that take a value (``--hosts FILE``)."""
    return {
        name
        for action in parser._actions
        if action.option_strings and action.nargs != 0
        for name in action.option_strings
    }


_PARSERS = (console.parser(), args.parser(), head.parser())


def test_the_entry_point_skips_every_global_option_that_takes_a_value() -> None:
    wanted = set().union(*(_value_options(p) for p in _PARSERS))
    assert set(entry._TAKES_VALUE) == wanted


_VALUE = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=8).filter(
    lambda v: not v.startswith("-")
)


@given(
    options=st.lists(
        st.tuples(st.sampled_from(sorted(_value_options(args.parser()))), _VALUE),
        max_size=3,
    ),
    verb=st.sampled_from(["queue", "claim", "release", "cancel", "show"]),
)
def test_the_entry_point_finds_the_verb_the_parser_finds(
    options: list[tuple[str, str]], verb: str
) -> None:
    """Whatever the global options' values (a value may look like a verb), the word
    the entry point dispatches on is the verb the scheduler CLI's parser reads."""
    argv = [item for pair in options for item in pair] + [verb, "1"]
    parsed, _ = args.parser().parse_known_args(argv)
    assert entry.verb_of(argv) == parsed.verb == verb


@given(value=_VALUE)
def test_a_daemon_option_before_head_still_starts_the_head(value: str) -> None:
    for name in sorted(_value_options(head.parser())):
        assert entry.verb_of([name, value, "head"]) == "head"


def test_client_and_head_share_one_set_of_mutating_ops() -> None:
    """A retry is safe only when the client sends a request id for exactly the ops
    the head keeps answers for."""
    assert sync.MUTATING is aio.MUTATING is wire.MUTATING is ops.MUTATING
    assert wire.MUTATING.issubset(wire.ARGS)


def test_the_board_and_the_heads_answers_judge_worst_by_one_rule() -> None:
    assert health.worst is head_answer.worst is board.worst


def test_every_reader_of_the_heads_answers_checks_numbers_one_way() -> None:
    """One range-checked reader of an untrusted time, number and string: no copy
    that forgot the finiteness check (``1e300``, NaN) or the int too big for a float."""
    from gputui.cli import flagged, tables
    from gputui.common import text, untrusted
    from gputui.ui.head import flags as head_flags
    from gputui.ui.head import usage_view
    from gputui.ui.head import view as head_view

    assert head_answer._time is head_view._time is head_flags._time is untrusted.epoch
    assert usage_view._epoch is untrusted.epoch
    assert tables.number is flagged._number is untrusted.number
    assert head_answer._int is untrusted.integer
    for module in (head_answer, head_view, head_flags, usage_view):
        assert module._text is text.clean_str


def test_the_helpers_own_copies_of_shared_limits_agree_with_the_clients() -> None:
    """The helper is shipped alone and imports nothing of gputui, so it keeps its own
    copy of each limit it shares with the client; here they are held equal."""
    from gputui.remote import gpureset, holders, jobfs, jobops, launch, ptyops, supervisor
    from gputui.remote import wire as remote_wire
    from gputui.remote.sim import spec as simspec
    from gputui.wire import fields
    from gputui.wire import ops as protocol_ops

    assert fields.MAX_GPUS == simspec.MAX_GPUS
    assert protocol_ops.MAX_HOLDERS == holders.MAX_HOLDERS
    assert protocol_ops.DEFAULT_TIMEOUT_S == gpureset.DEFAULT_TIMEOUT_S
    assert protocol_ops.MIN_TIMEOUT_S == gpureset.MIN_TIMEOUT_S
    assert protocol_ops.MAX_TIMEOUT_S == gpureset.MAX_TIMEOUT_S
    assert protocol_ops.MAX_JOBS == jobfs.LIST_MAX
    assert protocol_ops.MAX_LOG_BYTES == jobops.LOG_READ_MAX
    assert protocol_ops.MAX_REQUEST_BYTES == remote_wire.MAX_REQUEST_BYTES
    assert protocol_ops.JOB_ID_MAX == supervisor.JOB_ID_MAX
    assert fields.PTY_AID_MAX == ptyops.AID_MAX
    assert launch.SCRIPT == supervisor.SCRIPT


def test_a_script_has_one_size_limit_from_the_cli_to_the_host() -> None:
    """One definition above the helper (``jobscript``), the helper's copy equal to it."""
    from gputui.common import jobscript
    from gputui.remote import launch

    assert jobscript.MAX_SCRIPT_BYTES == launch.SCRIPT_MAX == 256 * 1024


def test_the_helper_checks_images_environments_and_runtimes_as_the_head_does() -> None:
    """The helper's own copy of the container and environment rules (it is shipped
    alone) is the head's, pattern for pattern."""
    from gputui.common import jobenv
    from gputui.remote import containers

    assert containers.IMAGE_RE.pattern == jobenv.IMAGE_PATTERN
    assert containers.IMAGE_MAX == jobenv.IMAGE_MAX
    assert containers.CONDA_NAME_RE.pattern == jobenv.CONDA_NAME_PATTERN
    assert containers.ENV_NAME_RE.pattern == jobenv.ENV_NAME_PATTERN
    assert containers.ENV_PATH_MAX == jobenv.ENV_PATH_MAX
    assert containers.RUNTIMES == jobenv.RUNTIMES


@given(user=st.text(max_size=8), admin=st.booleans(), doing=st.sampled_from(["x", "force-free"]))
def test_the_console_words_an_admins_only_action_one_way(
    user: str, admin: bool, doing: str
) -> None:
    from pathlib import Path

    from gputui.ui.head.view import Me

    said = Me(uid=1, user=user, admin=admin).refused(doing)
    assert said == (None if admin else f"only admins {doing} ({user} is not one)")
    ui = Path(entry.__file__).parent / "ui"
    built = [p.name for p in ui.rglob("*.py") if "only admins" in p.read_text()]
    assert built == ["view.py"]
