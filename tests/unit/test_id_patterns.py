"""Names and ids are checked whole: a valid one with a newline (or anything) after it
is refused everywhere, the way ``fullmatch`` checks (``match`` with ``$`` lets
"name\\n" through, since ``$`` also matches before a final newline).

One rule for the whole package: no pattern in it ends in ``$``, except those that
search within a line of text (their ``$`` is the line's end there).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gputui.config.models import HostConfig
from gputui.config.scheduler import OffHours
from gputui.remote import jobfs, launch, signals, supervisor
from gputui.remote.signals import RequestError
from gputui.wire.ops import NAMESPACE

PACKAGE = Path(__file__).resolve().parents[2] / "gputui"
LINE_SEARCHES = {
    ("remote/kernlog.py", "_XID_RE"),
    ("remote/kernlog.py", "_SXID_RE"),
}
"""Patterns that search a line of text for something in it (not a check of a value)."""


def _compiled_patterns() -> list[tuple[str, str, str]]:
    """(file, name, pattern) of every ``NAME = re.compile("...")`` in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            call = node.value
            if not (isinstance(call.func, ast.Attribute) and call.func.attr == "compile"):
                continue
            if not call.args or not isinstance(call.args[0], ast.Constant):
                continue
            pattern = call.args[0].value
            target = node.targets[0]
            if isinstance(pattern, str) and isinstance(target, ast.Name):
                found.append((str(path.relative_to(PACKAGE)), target.id, pattern))
    return found


def test_no_pattern_in_the_package_ends_in_a_dollar() -> None:
    patterns = _compiled_patterns()
    assert len(patterns) > 20  # the scan sees them
    ends = {
        (file, name)
        for file, name, pattern in patterns
        if pattern.endswith("$") and not pattern.endswith("\\$")
    }
    assert ends == LINE_SEARCHES, "check a whole value with fullmatch and no ^...$"


def test_the_helpers_namespace_rule_is_the_heads() -> None:
    """The helper runs alone on a host (it imports nothing of the package), so its
    namespace pattern is its own copy: the same as the one the head checks with."""
    assert rf"\A{supervisor.NS_RE.pattern}\Z" == NAMESPACE.pattern


def _refuses(check: Callable[[str], Any], value: str) -> bool:
    try:
        check(value)
    except (ValueError, RequestError, ValidationError):
        return True
    return False


def _host(name: str) -> Any:
    return HostConfig(name=name)


def _clock(value: str) -> Any:
    return OffHours(start=value, end="06:00")


def _ns(value: str) -> Any:
    return jobfs.check_ns(value)


def _spec_ns(value: str) -> Any:
    if not supervisor._valid({"ns": value, "job_id": 1, "root": "/", "argv": ["true"]}):
        raise ValueError(value)


def _launch_user(name: str) -> Any:
    try:
        return launch.resolve_user(name, 0)
    except RequestError as exc:
        if "login name" in str(exc):
            raise
        return None  # a well-formed name that is not an account here


def _gpu_uuids(value: str) -> Any:
    return launch._check_gpus([value])


def _signal_uuid(value: str) -> Any:
    try:
        signals.validate({"pid": 1234, "signal": "TERM", "gpu_uuid": value})
    except RequestError as exc:
        if "gpu_uuid" in str(exc):
            raise


CHECKS: list[tuple[str, str, Callable[[str], Any]]] = [
    ("host name", r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", _host),
    ("off-hours clock", r"([01]\d|2[0-3]):([0-5]\d)", _clock),
    ("jobs namespace", NAMESPACE.pattern.removeprefix(r"\A").removesuffix(r"\Z"), _ns),
    ("supervisor namespace", supervisor.NS_RE.pattern, _spec_ns),
    ("login name", r"[a-z_][a-z0-9_]{0,30}", _launch_user),
    ("GPU uuid", r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", _gpu_uuids),
    ("signal's GPU uuid", signals.UUID_RE.pattern, _signal_uuid),
]


@pytest.mark.parametrize(("what", "pattern", "check"), CHECKS, ids=[c[0] for c in CHECKS])
@given(data=st.data())
def test_a_valid_id_passes_and_the_same_with_anything_after_it_does_not(
    what: str, pattern: str, check: Callable[[str], Any], data: st.DataObject
) -> None:
    value = data.draw(st.from_regex(re.compile(pattern), fullmatch=True), label=what)
    assert not _refuses(check, value), f"{what}: {value!r} refused"
    # A newline (what ``$`` lets through) or another character no id may hold, then anything.
    tail = data.draw(st.sampled_from(["\n", "\r", " ", "\t", "\x00"]), label="after")
    extra = value + tail + data.draw(st.text(max_size=5), label="then")
    assert _refuses(check, extra), f"{what}: {extra!r} accepted"
