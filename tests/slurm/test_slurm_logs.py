"""``logs -f`` on Slurm: the follower's offset counts the bytes of the file it read.

A log is read in chunks from an offset (the job's ``StdOut``, here or on a login
node); each answer's text is what the bytes it used decode to, and a UTF-8 character
cut by the chunk's end waits for the next read. Whatever the bytes (not UTF-8 at
all, characters cut anywhere) and however they are chunked, the follower prints
exactly what the whole file decodes to, and ends on its size.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gputui.scheduler.client.slurm.backend import whole_chars

TEXTY = st.lists(
    st.binary(max_size=6) | st.text(max_size=4).map(lambda t: t.encode("utf-8")), max_size=40
).map(b"".join)


def follow(data: bytes, chunks: list[int]) -> tuple[str, int]:
    """Read ``data`` as ``logs -f`` does, with reads of the sizes ``chunks`` gives (4 or
    more bytes each), until the offset reaches its end; the text printed, the offset."""
    printed: list[str] = []
    offset, i = 0, 0
    while offset < len(data):
        want = chunks[i % len(chunks)]
        i += 1
        read = data[offset : offset + want]
        text, used = whole_chars(read, last=offset + len(read) >= len(data))
        assert used > 0  # every read moves on
        assert used >= len(read) - 3  # and holds back at most a cut character
        printed.append(text)
        offset += used
    return "".join(printed), offset


@given(TEXTY, st.lists(st.integers(4, 16), min_size=1, max_size=8))
def test_any_bytes_in_any_chunks_print_what_the_whole_file_decodes_to(
    data: bytes, chunks: list[int]
) -> None:
    text, offset = follow(data, chunks)
    assert offset == len(data)
    assert text == data.decode("utf-8", "replace")


@given(st.text(min_size=1, max_size=30), st.integers(0, 40))
def test_a_character_cut_by_the_read_is_not_printed_until_it_is_whole(text: str, cut: int) -> None:
    data = text.encode("utf-8")
    head = data[: min(cut, len(data))]
    shown, used = whole_chars(head, last=False)
    assert data.startswith(head[:used]) and text.startswith(shown)
    assert "\ufffd" not in shown or "\ufffd" in text
