"""The sanitiser at its edges: every escape form, every dropped range at both ends,
combining-mark counting, and ``cut``/``fit`` at widths 0, exact and one short.

Written against a mutation pass over ``gputui/common/text.py``: each test here fails for at
least one small change to the sanitiser that the broader suites let through.
"""

from __future__ import annotations

import hostile
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.common.text import cells, clean, cut, fit


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # CSI with private parameters, intermediate bytes and the last final bytes.
        ("a\x1b[?25lb", "ab"),
        ("a\x1b[>0;1cb", "ab"),
        ("a\x1b[2 qb", "ab"),
        ("a\x1b[2~b", "ab"),
        ("a\x1b[1{b", "ab"),
        ("a\x9b?1049hb", "ab"),
        # SOS and PM, 7-bit and 8-bit; DCS and APC 8-bit; every terminator.
        ("a\x1bXsos payload\x1b\\b", "ab"),
        ("a\x1b^pm payload\x07b", "ab"),
        ("a\x90dcs payload\x9cb", "ab"),
        ("a\x98sos payload\x9cb", "ab"),
        ("a\x9epm payload\x1b\\b", "ab"),
        ("a\x9fapc payload\x07b", "ab"),
        # A sequence ends at its first terminator, whichever it is.
        ("a\x1b]0;t\x1b\\mid\x07b", "amidb"),
        ("a\x1b]0;t\x9cmid\x07b", "amidb"),
        ("a\x1b]0;t\x07mid\x1b\\b", "amidb"),
    ],
)
def test_every_escape_form_is_removed_with_its_payload(raw: str, expected: str) -> None:
    assert clean(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a\tb", "a b"),
        ("a\vb\fc", "a b c"),
        ("a \t\r\n b", "a   b"),
        ("a\x85b\x9cc", "abc"),  # C1 controls
        ("a\ud800b\udfffc", "abc"),  # lone surrogates
        ("a\u0378b\U000e0080c", "abc"),  # unassigned
    ],
)
def test_whitespace_and_other_controls(raw: str, expected: str) -> None:
    assert clean(raw) == expected


# Both ends of every range terminals draw at different widths (those the Unicode
# categories alone would keep).
DROPPED = [
    0x115F,
    0x1160,
    0x11FF,
    0x3164,
    0xD7B0,
    0xFFA0,
    0xFE00,
    0xFE0F,
    0xE0100,
    0xE01EF,
    0x1F1E6,
    0x1F1FF,
    0x1F3FB,
    0x1F3FF,
]
# Their printable neighbours, kept.
KEPT = [0x115E, 0x1200, 0x3163, 0x3165, 0xD7A3, 0xFF9F, 0xFFA1, 0xFE10, 0x1F200, 0x1F3FA]


@pytest.mark.parametrize("code", DROPPED, ids=hex)
def test_each_end_of_each_dropped_range_is_dropped(code: int) -> None:
    assert clean(f"a{chr(code)}b") == "ab"
    assert clean(f"ü{chr(code)}") == "ü"


@pytest.mark.parametrize("code", KEPT, ids=hex)
def test_the_neighbours_of_the_dropped_ranges_are_kept(code: int) -> None:
    assert clean(f"a{chr(code)}b") == f"a{chr(code)}b"


@pytest.mark.parametrize("base", ["a", "ñ", "日"])
def test_every_character_gets_its_own_two_marks(base: str) -> None:
    """The count starts again at each base character, ASCII or not."""
    two = "\u0301\u0302"
    assert clean(f"ü{two}{base}{two}") == f"ü{two}{base}{two}"
    assert clean(f"ü{two}\u0303{base}{two}\u0303") == f"ü{two}{base}{two}"


def test_cut_and_fit_at_zero_and_exact_widths() -> None:
    for width in (0, -3):
        assert cut("abc", width) == ""
        assert fit("abc", width) == ""
        assert clean("abc\x07", width) == ""
    assert cut("abc", 3) == "abc" and fit("abc", 3) == "abc"
    assert cut("abcd", 3) == "ab…"
    assert cut("日本", 4) == "日本" and cut("日本語", 5) == "日本…"
    assert clean("ab\x07c", 3) == "abc"


def test_cut_measures_graphemes_as_rich_draws_them() -> None:
    # "❤" + VS16 is one character wide per code point, two cells as Rich draws it.
    text = "ab❤\ufe0fcd"
    assert cells(text) == 6
    for width in range(1, 7):
        out = cut(text, width)
        assert cells(out) <= width, (width, out)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from(hostile.WIDTH_TRAPS + "ab❤\ufe0f\u200d👨")), st.integers(0, 30))
def test_cut_is_a_prefix_within_width_and_fit_fills_it(raw: str, width: int) -> None:
    text = clean(raw, 1000)  # as the screen gets it
    out = cut(text, width)
    assert cells(out) <= width
    if cells(text) <= width:
        assert out == text
    else:
        assert out == "" if width == 0 else out.endswith("…")
        assert text.startswith(out[:-1])
    assert cells(fit(text, width)) == max(width, 0)


def test_byte_input_is_read_far_enough_for_the_longest_clusters() -> None:
    # A four-byte letter with two two-byte marks: eight bytes for one cell.
    cluster = "\U00010000\u0301\u0302"
    assert cells(cluster) == 1
    assert clean((cluster * 20).encode(), 20) == cluster * 20


def test_a_long_accented_name_is_shown_cut() -> None:
    name = "e\u0301\u0302" * 40  # three characters a cell
    out = clean(name, 20)
    assert out == "e\u0301\u0302" * 19 + "…"
