"""Hostile strings from hosts are made display-safe."""

from __future__ import annotations

import unicodedata

import hostile
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.common.text import cells, clean, cut, error_line, fit
from gputui.wire import fields


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


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # An OSC with no terminator loses its introducer, not the rest of the line.
        ("run \x1b]0;title python train.py --lr 3", "run title python train.py --lr 3"),
        ("a\x1b]52;c;ZXZpbA==\x07b", "ab"),
        ("a\x9d0;c1 title\x9cb", "ab"),
        ("a\x1b_apc payload\x1b\\b", "ab"),
        ("x\x1bcy", "xy"),
        # Characters terminals draw at different widths are removed.
        ("\u3164\u115f\u1160\uffa0name", "name"),
        ("👍🏽 ok\ufe0f", "👍 ok"),
        ("\U0001f1fa\U0001f1f8 flag", " flag"),
        ("\u0301\u0301start", "start"),
        ("a\u20ddb", "ab"),
        ("\ue000private\U000e0041", "private"),
    ],
)
def test_clean_hostile(raw: str, expected: str) -> None:
    assert clean(raw) == expected


def test_clean_cuts_by_display_cells() -> None:
    out = clean("日本語のプロセス名", 7)
    assert out == "日本語…" and cells(out) == 7
    assert cut("日本語", 4) == "日…"
    assert fit("日本", 6) == "日本  "
    assert cells(fit("e\u0301" * 20, 10)) == 10


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(st.text(), st.binary().map(lambda b: b.decode("latin-1")), st.binary()),
    st.integers(1, 300),
)
def test_clean_is_safe_bounded_and_stable(raw: str | bytes, limit: int) -> None:
    out = clean(raw, limit)
    assert hostile.is_safe_text(out)
    assert cells(out) <= limit
    assert clean(out, limit) == out  # cleaning twice changes nothing more


@settings(max_examples=300)
@given(
    words=st.text(max_size=2000),
    kind=st.sampled_from([ValueError, OSError, RuntimeError, KeyError]),
    limit=st.integers(10, 400),
)
def test_error_line_is_one_safe_line_that_says_something(
    words: str, kind: type[Exception], limit: int
) -> None:
    """A failure's own words (a driver's, the system's) as one line of at most
    ``limit`` cells, nothing a terminal acts on; its type's name when it has none."""
    exc = kind(words)
    line = error_line(exc, limit)
    assert line, (words, kind)
    assert cells(line) <= limit
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in line), line
    assert line == line.strip()
    if not clean(str(exc)).strip():
        assert line == cut(kind.__name__, limit)


_near_the_caps = st.sampled_from([127, 128, 129, 511, 512, 513]).flatmap(
    lambda n: st.text(
        alphabet=st.characters(min_codepoint=32, max_codepoint=127), min_size=n, max_size=n
    )
)


@given(st.text(max_size=600) | _near_the_caps)
def test_the_wire_text_validators_clean_as_clean_does(text: str) -> None:
    """``ShortText`` and ``LongText`` test for plain text before calling ``clean``:
    the answer is ``clean``'s whatever the text."""
    assert fields._short(text) == clean(text, 128)
    assert fields._long(text) == clean(text, 512)
