"""A line from the head is read one way by both blocking readers: the CLI's client
(``HeadClient``) and an attached terminal's (``TerminalLink``). A JSON object is a
message; anything else (not JSON, or JSON that is not an object) is one ``protocol``
error naming what it was, from both. Real sockets (a socket pair per reader)."""

from __future__ import annotations

import json
import select
import socket

from hypothesis import example, given, settings
from hypothesis import strategies as st

from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.sync import HeadClient
from gputui.scheduler.client.terminal import TerminalLink

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
LINES = st.one_of(
    _JSON.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" ")),
)


def _read(reader: str, line: bytes) -> object:
    """What ``reader`` makes of ``line``: the message, or ``(code, message)``."""
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(line + b"\n")
        if reader == "client":
            client = HeadClient("unused", timeout=5.0, opener=lambda: ours)
            client.connect()
            try:
                return client.message()
            except HeadError as exc:
                return (exc.code, str(exc))
            finally:
                client.close()
        link = TerminalLink(ours)
        assert select.select([link], [], [], 5.0)[0]
        try:
            return list(link.messages())
        except HeadError as exc:
            return (exc.code, str(exc))
    finally:
        ours.close()
        theirs.close()


@settings(max_examples=150)
@given(LINES)
@example(b"\x000")  # bytes json.loads would take for UTF-16: "0" without the newline
@example(b"\xff{}")
@example(b"[" * 50_000)  # nested past the parser's depth
def test_the_client_and_the_terminal_read_a_line_alike(line: bytes) -> None:
    client, terminal = _read("client", line), _read("terminal", line)
    try:
        value = json.loads(line.decode("utf-8"))  # the wire is UTF-8
    except (ValueError, RecursionError):
        assert client == terminal == ("protocol", "the head sent something that is not JSON")
        return
    if isinstance(value, dict):
        assert client == value and terminal == [value]
    else:
        assert client == terminal == ("protocol", "the head sent something that is not an object")
