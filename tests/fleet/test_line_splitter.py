"""Splitting the helper's stdout into lines, with a cap, however it is chunked."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.fleet.failures import HelperFailure
from gputui.fleet.session import LineSplitter, encryption_preference


def _split(chunks: list[bytes], limit: int = 64) -> tuple[list[bytes], bytes | None]:
    lines: list[bytes] = []
    splitter = LineSplitter(lines.append, limit)
    for chunk in chunks:
        splitter.feed(chunk)
    return lines, splitter.end()


def test_one_line_per_chunk() -> None:
    assert _split([b'{"a":1}\n', b'{"b":2}\n']) == ([b'{"a":1}', b'{"b":2}'], None)


def test_many_lines_in_one_chunk_and_blank_lines_kept() -> None:
    assert _split([b"a\nb\n\nc\n"]) == ([b"a", b"b", b"", b"c"], None)


def test_line_across_chunks() -> None:
    assert _split([b"ab", b"cd", b"e\nf", b"g\n"]) == ([b"abcde", b"fg"], None)


def test_every_byte_its_own_chunk() -> None:
    data = b"first\nsecond line\nthird\n"
    assert _split([bytes([c]) for c in data]) == ([b"first", b"second line", b"third"], None)


def test_unterminated_last_line_comes_out_at_the_end() -> None:
    assert _split([b"a\nrest"]) == ([b"a"], b"rest")


def test_a_partial_line_over_the_cap_is_refused() -> None:
    lines: list[bytes] = []
    splitter = LineSplitter(lines.append, limit=10)
    splitter.feed(b"ok\n0123456")
    with pytest.raises(HelperFailure, match="over 10 bytes"):
        splitter.feed(b"789abc")
    assert lines == [b"ok"]


def test_an_unterminated_flood_in_one_chunk_is_refused() -> None:
    splitter = LineSplitter(lambda line: None, limit=10)
    with pytest.raises(HelperFailure):
        splitter.feed(b"x" * 11)


def test_sink_errors_propagate() -> None:
    def sink(line: bytes) -> None:
        raise ValueError(line.decode())

    with pytest.raises(ValueError, match="boom"):
        LineSplitter(sink).feed(b"boom\n")


def test_aes_gcm_offered_first_and_every_default_kept() -> None:
    from asyncssh.encryption import get_default_encryption_algs

    prefs = encryption_preference()
    assert prefs[0] == "aes128-gcm@openssh.com"
    assert sorted(prefs) == sorted(a.decode() for a in get_default_encryption_algs())


@settings(max_examples=300)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    limit=st.integers(min_value=0, max_value=30),
)
def test_no_line_over_the_cap_reaches_the_sink_however_chunked(
    lines: list[bytes], cuts: list[int], limit: int
) -> None:
    """Lines (some over the cap) cut into chunks anywhere: every line up to the first
    one over the cap comes out whole and in order, and that one is refused, never
    passed on (whether it came whole in one chunk or in pieces)."""
    data = b"".join(line + b"\n" for line in lines)
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    got: list[bytes] = []
    splitter = LineSplitter(got.append, limit)
    over = next((i for i, line in enumerate(lines) if len(line) > limit), None)
    try:
        for chunk in chunks:
            splitter.feed(chunk)
    except HelperFailure:
        assert over is not None
        assert got == lines[:over]
    else:
        assert over is None
        assert got == lines
    assert all(len(line) <= limit for line in got)
