"""Hostile strings from hosts are made display-safe."""

from __future__ import annotations

import pytest

from gputui.text import clean


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("python train.py", "python train.py"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b]0;pwned title\x07after", "after"),
        ("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "link"),
        ("a\x1bPdcs payload\x1b\\b", "ab"),
        ("bell\x07 and del\x7f", "bell and del"),
        ("line1\nline2\r\n\tx", "line1 line2 x"),
        ("\u202eevil\u202c", "evil"),
        ("c1\x9b31mx", "c1x"),
        (b"caf\xc3\xa9 \xff", "café \ufffd"),
        ("[bold]markup[/]", "[bold]markup[/]"),
        ("one\u2028two\u2029three", "onetwothree"),
        ("x" + "\u0301" * 50 + "y", "x\u0301\u0301y"),
        ("café", "café"),
        (None, ""),
    ],
)
def test_clean(raw: object, expected: str) -> None:
    assert clean(raw) == expected


def test_clean_caps_length() -> None:
    out = clean("x" * 10_000, 50)
    assert len(out) == 50 and out.endswith("…")


def test_clean_caps_before_regex_work() -> None:
    # A multi-megabyte name costs no more than a capped one.
    assert len(clean("\x1b[" * 1_000_000, 20)) <= 20
