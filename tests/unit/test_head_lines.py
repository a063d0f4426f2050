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


_PUSH = st.builds(
    lambda at, data: {"push": "pty", "job": 7, "kind": "out", "at": at, "data": data},
    st.integers(0, 1 << 40),
    st.text("ABCDabcd0123+/=", max_size=300),
)
_SCROLLBACK = {"push": "pty", "job": 7, "kind": "out", "at": 0, "data": "YmVmb3JlNQ=="}


@settings(max_examples=100)
@given(
    before=st.lists(_PUSH, max_size=5),
    after=st.lists(_PUSH, max_size=5),
    late=st.lists(_PUSH, max_size=5),
)
@example(before=[], after=[_SCROLLBACK], late=[])
def test_a_terminal_shows_every_push_whichever_read_brought_it(
    before: list[dict[str, object]], after: list[dict[str, object]], late: list[dict[str, object]]
) -> None:
    """Pushes sent before the attach's answer, in the same write after it (the
    scrollback that the helper sent right behind the answer), and after the attach
    returned: one ``messages`` call, once all were sent, hands every one over, in
    order. Lines a read brought behind the answer are held, and the socket is no
    longer readable for them: a terminal that waits for it to be would wait forever
    (the attach that showed nothing of its scrollback)."""
    ours, theirs = socket.socketpair()
    try:
        answer = {"id": 1, "ok": True, "result": {"attached": 7, "host": "sim01"}}
        lines = [*before, answer, *after]
        theirs.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        link = TerminalLink(ours)
        assert link.attach(7, 24, 80) == answer["result"]
        assert link.host == "sim01"
        theirs.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in late))
        assert list(link.messages()) == [*before, *after, *late]
        assert not select.select([link], [], [], 0)[0]  # nothing left to wake a waiter
    finally:
        ours.close()
        theirs.close()
