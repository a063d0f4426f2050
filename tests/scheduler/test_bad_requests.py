"""Requests no honest client sends: each gets one clear line and changes nothing.

A real head (real SQLite file, real Unix socket; only the GPU hosts are scripted)
is sent malformed lines, hostile fields, impossible asks, huge lines and crowds of
silent connections. After each: the answer is ``ok: false`` with a one-line message
(or nothing at all for a blank line), the store is as it was, the head logged no
traceback, and the next good request on the same connection is answered.
"""

from __future__ import annotations

import itertools
import json
import socket
from collections.abc import Iterator
from typing import Any

import hostile
import pytest
from headthread import LineClient, ThreadedHead, poll, refusal, said_something
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Limits

LAYOUT = {"gpu01": 4, "gpu02": 2}


@pytest.fixture(scope="module")
def th(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedHead]:
    with ThreadedHead(tmp_path_factory.mktemp("head"), LAYOUT) as head:
        # Something in every table a refusal could disturb: a running job, a queued
        # one, an active claim.
        with LineClient(head.sock) as c:
            c.ok("submit", {"argv": ["train"], "gpus": 2, "host": "gpu02"})
            c.ok("claim", {"gpus": 1, "host": "gpu01"})
            c.ok("submit", {"argv": ["wait"], "gpus": 4})
        yield head
        assert head.problems == []


@pytest.fixture
def c(th: ThreadedHead) -> Iterator[LineClient]:
    with LineClient(th.sock) as client:
        yield client


def refused_unchanged(
    th: ThreadedHead, client: LineClient, line: bytes, code: str | None = None
) -> str:
    """Send ``line``; it must be refused (with ``code``) and leave the store as it was.
    Then the same connection must still serve ``whoami``. Returns the message."""
    before = th.snapshot()
    client.send(line)
    got_code, message = refusal(client.read())
    if code is not None:
        assert got_code == code, message
    assert th.snapshot() == before
    assert client.ok("whoami")["user"]
    assert th.problems == []
    return message


_rids = itertools.count(1)


def request(op: str, args: dict[str, Any] | None = None, **top: Any) -> bytes:
    """A request line (id 7; a fresh rid when the op needs one); ``top`` adds fields."""
    body: dict[str, Any] = {"id": 7, "op": op, "args": args or {}}
    if op in wire.MUTATING:
        body["rid"] = f"bad-{next(_rids)}"
    body.update(top)
    return json.dumps(body).encode()


# -- fields and counts -------------------------------------------------------------------


def test_unknown_fields_are_refused_by_name(th: ThreadedHead, c: LineClient) -> None:
    message = refused_unchanged(th, c, request("queue", user_id=0), "malformed")
    assert "unknown request field 'user_id'" in message
    message = refused_unchanged(th, c, request("submit", {"argv": ["x"], "bogus": 1}), "bad-args")
    assert message == "submit: bogus: unknown field"
    message = refused_unchanged(th, c, request("claim", {"gpus": 1, "gpu": 1}), "bad-args")
    assert message == "claim: gpu: unknown field"
    message = refused_unchanged(th, c, request("cancel", {"job_id": 1, "force": True}), "bad-args")
    assert message == "cancel: force: unknown field"


@pytest.mark.parametrize("count", [0, -1, -(2**63), 65, 2**64, True, False, 1.0, 2.5, "2", [1]])
@pytest.mark.parametrize("op", ["submit", "claim"])
def test_gpu_counts_must_be_whole_positive_numbers(
    th: ThreadedHead, c: LineClient, op: str, count: Any
) -> None:
    args: dict[str, Any] = {"gpus": count}
    if op == "submit":
        args["argv"] = ["python", "train.py"]
    message = refused_unchanged(th, c, request(op, args), "bad-args")
    assert message.startswith(f"{op}: gpus: "), message


def test_a_null_gpu_count_is_refused_for_a_job(th: ThreadedHead, c: LineClient) -> None:
    message = refused_unchanged(th, c, request("submit", {"argv": ["x"], "gpus": None}))
    assert message.startswith("submit: gpus: ")


def test_ten_megabyte_command_line_is_one_too_large_error(th: ThreadedHead, c: LineClient) -> None:
    before = th.snapshot()
    huge = request("submit", {"argv": ["python", "x" * (10 << 20)]})
    c.send(huge)
    answer = c.read()
    code, message = refusal(answer)
    assert (code, answer["id"]) == ("too-large", None)
    assert "1024 KiB" in message
    # The rest of the 10 MB line is skipped, not answered: the next answer is whoami's.
    assert c.ok("whoami")["user"]
    assert th.snapshot() == before
    # A command line just under the cap is judged on its own rules (256 KiB per job).
    message = refused_unchanged(th, c, request("submit", {"argv": ["x" * (600 << 10)]}), "bad-args")
    assert "argv.0" in message and "262144" in message


@pytest.mark.parametrize(
    ("op", "args", "code"),
    [
        ("cancel", {"job_id": 424242}, "unknown-job"),
        ("kill", {"job_id": 424242}, "unknown-job"),
        ("preempt", {"job_id": 424242}, "unknown-job"),
        ("requeue", {"job_id": 424242}, "unknown-job"),
        ("hold", {"job_id": 424242}, "unknown-job"),
        ("release_hold", {"job_id": 424242}, "unknown-job"),
        ("show", {"job_id": 424242}, "unknown-job"),
        ("logs", {"job_id": 424242}, "unknown-job"),
        ("wait", {"job_id": 424242}, "unknown-job"),
        ("cancel", {"job_id": 0}, "bad-args"),
        ("cancel", {"job_id": "1"}, "bad-args"),
        ("cancel", {"job_id": 2**60}, "bad-args"),
        ("release", {"claim_ids": [424242]}, "unknown-claim"),
        ("release", {"gpu_refs": ["gpu09:0"]}, "unknown-gpu"),
        ("release", {"gpu_refs": ["gpu02:1"]}, "unknown-claim"),
        ("release", {}, "bad-args"),
        ("claim", {"gpu_refs": ["GPU-nope"]}, "unknown-gpu"),
        ("claim", {"gpu_refs": ["gpu01:9"]}, "unknown-gpu"),
        ("claim", {"session": True, "resume": 424242}, "unknown-claim"),
        ("claim", {"resume": 1}, "bad-args"),
        ("claim", {"session": True, "resume": 0}, "bad-args"),
        ("claim", {"session": True, "resume": "1"}, "bad-args"),
        ("requeue", {"job_id": 1, "force": "yes"}, "bad-args"),
    ],
)
def test_unknown_ids_are_named(
    th: ThreadedHead, c: LineClient, op: str, args: dict[str, Any], code: str
) -> None:
    message = refused_unchanged(th, c, request(op, args), code)
    if code == "unknown-job":
        assert message == "no job 424242"


@pytest.mark.parametrize(
    ("op", "args", "names"),
    [
        ("submit", {"argv": ["x"], "pool": "h100"}, "no pool named 'h100' (pools: a100)"),
        ("submit", {"argv": ["x"], "host": "gpu99"}, "no host named 'gpu99' (hosts: gpu01, gpu02)"),
        ("claim", {"gpus": 1, "pool": "h100"}, "no pool named 'h100'"),
        ("claim", {"gpus": 1, "host": "gpu99"}, "no host named 'gpu99'"),
        ("submit", {"argv": ["x"], "gpus": 5}, "no host has more than 4"),
        ("submit", {"argv": ["x"], "gpus": 3, "host": "gpu02"}, "no host (host gpu02) has more"),
        ("submit", {"argv": ["x"], "gpus": 64}, "64 GPUs asked for"),
        ("claim", {"gpus": 5}, "no host has more than 4"),
        ("claim", {"gpus": 1, "model": "H100"}, "no host (model H100) has more than 0"),
        ("claim", {"gpu_refs": ["gpu01:0", "gpu02:0"]}, "different hosts"),
    ],
)
def test_impossible_asks_are_refused_not_queued(
    th: ThreadedHead, c: LineClient, op: str, args: dict[str, Any], names: str
) -> None:
    message = refused_unchanged(th, c, request(op, args), "impossible")
    assert names in message


def test_a_claim_that_cannot_wait_is_refused_when_busy(th: ThreadedHead, c: LineClient) -> None:
    message = refused_unchanged(
        th, c, request("claim", {"gpus": 4, "host": "gpu01", "wait": False}), "busy"
    )
    assert "not free now" in message


# -- framing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "code", "answer_id"),
    [
        (b"{not json", "malformed", None),
        (b'{"id": 3, "op": "whoami"', "malformed", None),
        (b"\xff\xfe\x00garbage", "malformed", None),
        (b"[1, 2, 3]", "malformed", None),
        (b'"whoami"', "malformed", None),
        (b"null", "malformed", None),
        (b"12", "malformed", None),
        (b'{"op": "whoami", "args": {}}', "malformed", None),
        (b'{"id": "3", "op": "whoami"}', "malformed", None),
        (b'{"id": true, "op": "whoami"}', "malformed", None),
        (b'{"id": -1, "op": "whoami"}', "malformed", -1),
        (b'{"id": 1.5, "op": "whoami"}', "malformed", None),
        (b'{"id": 9007199254740993, "op": "whoami"}', "malformed", 9007199254740993),
        (b'{"id": 3}', "unknown-op", 3),
        (b'{"id": 3, "op": "drop_tables"}', "unknown-op", 3),
        (b'{"id": 3, "op": ["whoami"]}', "unknown-op", 3),
        (b'{"id": 3, "op": "queue", "rid": 5}', "malformed", 3),
        (b'{"id": 3, "op": "queue", "rid": ["a"]}', "malformed", 3),
        (b'{"id": 3, "op": "submit", "args": {"argv": ["x"]}}', "malformed", 3),
        (b'{"id": 3, "op": "cancel", "rid": "", "args": {"job_id": 1}}', "malformed", 3),
        (b'{"id": 3, "op": "cancel", "rid": 7, "args": {"job_id": 1}}', "malformed", 3),
        (b'{"id": 3, "op": "cancel", "rid": "' + b"r" * 65 + b'", "args": {}}', "malformed", 3),
        (b'{"id": 3, "op": "queue", "args": []}', "malformed", 3),
        (b'{"id": 3, "op": "queue", "args": "all"}', "malformed", 3),
        # NaN, Infinity and overflowing numbers are not JSON (RFC 8259): the parser refuses them.
        (b'{"id": 3, "op": "queue", "args": {"limit": NaN}}', "malformed", None),
        (b'{"id": 3, "op": "audit", "args": {"since": Infinity}}', "malformed", None),
        (b'{"id": 3, "op": "audit", "args": {"since": 1e999}}', "malformed", None),
        (b'{"id": 3, "op": "queue", "args": {"limit": ' + b"9" * 5000 + b"}}", "malformed", None),
        (b"[" * 100_000 + b"]" * 100_000, "malformed", None),
        (b'{"id": 3, "op": "queue", "args": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", None, None),
    ],
    ids=lambda value: repr(value)[:48] if isinstance(value, bytes) else None,
)
def test_malformed_lines_get_one_clear_error(
    th: ThreadedHead, c: LineClient, line: bytes, code: str | None, answer_id: int | None
) -> None:
    before = th.snapshot()
    c.send(line)
    answer = c.read()
    got, message = refusal(answer)
    assert got == (code or got), message
    assert answer["id"] == answer_id
    assert th.snapshot() == before
    assert c.ok("whoami")["user"]
    assert th.problems == []


def test_strings_that_cannot_be_stored_are_refused(th: ThreadedHead, c: LineClient) -> None:
    """A lone surrogate (``\\ud800``) is valid JSON but no UTF-8 string: stored, it would
    fail the head's write; asked for, its query. Either way the head must say no."""
    cases = [
        request("submit", {"argv": ["x"], "name": "\ud800"}),
        request("submit", {"argv": ["x"], "cwd": "/tmp/\udfff"}),
        request("submit", {"argv": ["x"], "project": "p\ud800"}),
        request("claim", {"gpus": 1, "note": "\ud83d"}),
        request("queue", {"user": "\ud800"}),
        request("claims", {"user": "\ud800"}),
        request("cancel", {"job_id": 1}, rid="\ud800"),
        request("queue", {}, rid="\ud800"),
    ]
    for line in cases:
        refused_unchanged(th, c, line)


def test_env_keys_in_errors_are_shown_escaped(th: ThreadedHead, c: LineClient) -> None:
    message = refused_unchanged(
        th, c, request("submit", {"argv": ["x"], "env": {"A\n\x1b[2J": 5}}), "bad-args"
    )
    assert message == "submit: env.A\\u000a\\u001b[2J: Input should be a valid string"
    message = refused_unchanged(th, c, request("audit", {"\x1f\u202e": 0}), "bad-args")
    assert message == "audit: \\u001f\\u202e: unknown field"


def test_blank_lines_are_ignored(th: ThreadedHead, c: LineClient) -> None:
    c.send(b"\n \n\t\r\n")
    assert c.ok("whoami")["user"]


# -- crowds ------------------------------------------------------------------------------


def test_a_silent_client_does_not_hold_up_others(th: ThreadedHead, c: LineClient) -> None:
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        silent.connect(str(th.sock))
        half.connect(str(th.sock))
        half.sendall(b'{"id": 1, "op": "submit", "args": {"argv": ["half a line')
        job = c.ok("submit", {"argv": ["sleep", "1"], "gpus": 1})["job"]
        assert c.ok("show", {"job_id": job["id"]})["job"]["id"] == job["id"]
        c.ok("cancel", {"job_id": job["id"]})
        for sock in (silent, half):
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)  # still open, and nothing was said to it
    finally:
        silent.close()
        half.close()
    assert c.ok("whoami")["user"]


def test_500_idle_connections_while_another_client_works(th: ThreadedHead, c: LineClient) -> None:
    """One user's 500 idle connections: those over the per-user cap are told why and
    closed; the rest cost nothing to anyone; another client works all along."""
    idle: list[socket.socket] = []
    cap = Limits().per_user
    try:
        for _ in range(500):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            idle.append(sock)
            sock.connect(str(th.sock))
        ids = []
        for n in range(20):
            job = c.ok("submit", {"argv": ["job", str(n)], "gpus": 1, "host": "gpu01"})["job"]
            ids.append(job["id"])
        queued = {j["id"] for j in c.ok("queue")["jobs"]}
        assert set(ids) <= queued
        for job_id in ids:
            c.ok("cancel", {"job_id": job_id})
        over = 500 - (cap - 1)  # c holds one of the user's connections

        def told() -> list[socket.socket]:
            return [sock for sock in idle if said_something(sock)]

        poll(lambda: len(told()) == over, what=f"{over} connections over the cap told why")
        refused = [json.loads(sock.makefile("rb").readline())["error"] for sock in told()]
        assert {r["code"] for r in refused} == {"busy"}
        assert "the most one user may (head.max_connections_per_user)" in refused[0]["message"]
    finally:
        for sock in idle:
            sock.close()
    assert c.ok("whoami")["user"]
    assert th.problems == []


# -- anything at all ---------------------------------------------------------------------

# Ops whose valid form has no immediate answer (``wait`` on a live job) or that start
# a push stream (``subscribe``) are left out; every other op is drawn.
DRAWN_OPS = sorted(set(wire.ARGS) - {"wait", "subscribe"})


def _fields(op: str) -> list[str]:
    return sorted(wire.ARGS[op].model_fields)


def _args(op: str) -> st.SearchStrategy[Any]:
    names = _fields(op)
    values = st.one_of(
        hostile.any_json,
        st.integers(-3, 70),
        st.sampled_from(["gpu01", "gpu02", "a100", "gpu01:0", "GPU-gpu01-0000", "/tmp", "x"]),
        st.lists(st.sampled_from(["python", "gpu01:1", "", "\x00"]), max_size=3),
    )
    known = (
        st.dictionaries(st.sampled_from(names), values, max_size=len(names))
        if names
        else st.just({})
    )
    return st.one_of(known, known, st.dictionaries(hostile.hostile_text, values, max_size=3))


@st.composite
def hostile_request(draw: st.DrawFn) -> bytes:
    op = draw(st.one_of(st.sampled_from(DRAWN_OPS), hostile.any_json))
    body: dict[str, Any] = {
        "id": draw(st.one_of(st.integers(0, 2**53), st.integers(0, 2**53), hostile.any_json)),
        "op": op,
    }
    if draw(st.booleans()):
        body["rid"] = draw(st.one_of(st.text(min_size=1, max_size=64), hostile.any_json))
    args = _args(op) if isinstance(op, str) and op in wire.ARGS else hostile.any_json
    body["args"] = draw(st.one_of(args, args, args, hostile.any_json))
    if draw(st.integers(0, 9)) == 0:
        body[draw(hostile.hostile_text)] = draw(hostile.any_json)
    if draw(st.integers(0, 9)) == 0:
        body.pop(draw(st.sampled_from(sorted(body))))
    return json.dumps(body).encode()


hostile_line = st.one_of(
    hostile_request(),
    hostile_request(),
    hostile_request(),
    st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ")),
    hostile.any_json.map(lambda v: json.dumps(v).encode()),
)


def _expected_refusal(line: bytes) -> str | None:
    """The code the wire layer itself refuses ``line`` with (None: it is well formed)."""
    try:
        wire.decode_request(line)
    except wire.Refusal as refusal_:
        return refusal_.code
    return None


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(line=hostile_line)
def test_anything_gets_one_line_or_nothing_and_the_head_goes_on(
    th: ThreadedHead, line: bytes
) -> None:
    with LineClient(th.sock) as client:
        expected = _expected_refusal(line)
        before = th.snapshot() if expected is not None else None
        client.send(line)
        if line.strip():
            answer = client.read()
            if expected is not None:
                code, _ = refusal(answer)
                assert code == expected
                assert th.snapshot() == before
            else:
                assert answer["id"] == json.loads(line)["id"]
                if answer["ok"] is True:
                    assert isinstance(answer["result"], dict)
                else:
                    refusal(answer)
        assert client.ok("whoami")["user"]
    assert th.problems == []


def test_the_head_survives_everything_above(th: ThreadedHead, c: LineClient) -> None:
    job = c.ok("submit", {"argv": ["after", "all", "that"], "gpus": 1})["job"]
    assert c.ok("show", {"job_id": job["id"]})["job"]["name"] == "after"
    assert c.ok("cancel", {"job_id": job["id"]})["job"]["id"] == job["id"]
    assert th.problems == []


def test_a_request_sent_twice_at_once_is_applied_once(th: ThreadedHead, c: LineClient) -> None:
    """Both copies arrive in one read, so they land in one commit batch: the second
    gets the first's answer, and the request beside them is not lost with them."""
    first = {"id": 51, "op": "submit", "rid": "twice-at-once", "args": {"argv": ["twice"]}}
    other = {"id": 53, "op": "claim", "rid": "beside-them", "args": {"gpus": 1}}
    lines = [json.dumps(first), json.dumps({**first, "id": 52}), json.dumps(other)]
    c.send("\n".join(lines).encode())
    answers = {a["id"]: a for a in (c.read(), c.read(), c.read())}
    assert answers[51]["ok"] is True, answers[51]
    assert answers[52] == {**answers[51], "id": 52}
    assert answers[53]["ok"] is True, answers[53]
    job_id = answers[51]["result"]["job"]["id"]
    assert th.rows("SELECT id FROM job WHERE name = 'twice'") == [(job_id,)]
    c.ok("cancel", {"job_id": job_id})
    c.ok("release", {"claim_ids": [answers[53]["result"]["claim"]["id"]]})
    assert th.problems == []


# -- terminals (``attach``, ``pty_in``, ``detach``) ----------------------------------------


@pytest.mark.parametrize(
    ("op", "args", "code", "said"),
    [
        ("attach", {"job_id": 424242}, "unknown-job", "no job 424242"),
        ("attach", {"job_id": 0}, "bad-args", "attach: job_id:"),
        ("attach", {"job_id": 1, "rows": 0}, "bad-args", "attach: rows:"),
        ("attach", {"job_id": 1, "cols": 10**9}, "bad-args", "attach: cols:"),
        ("attach", {"job_id": 1, "shell": "/bin/sh"}, "bad-args", "attach: shell: unknown field"),
        ("pty_in", {"data": "not base64!"}, "bad-args", "pty_in: data:"),
        ("pty_in", {"data": "QQ==" * 20000}, "bad-args", "pty_in: data:"),
        ("pty_in", {"rows": 30}, "bad-args", "pty_in: args: give rows and cols together"),
        ("pty_in", {"ack": -1}, "bad-args", "pty_in: ack:"),
        ("pty_in", {"data": "aGkK"}, "not-attached", "no terminal is attached here"),
    ],
)
def test_terminal_requests_are_checked_before_anything_is_forwarded(
    th: ThreadedHead, c: LineClient, op: str, args: dict[str, Any], code: str, said: str
) -> None:
    message = refused_unchanged(th, c, request(op, args), code)
    assert message.startswith(said), message


def test_a_detach_with_nothing_attached_says_so(th: ThreadedHead, c: LineClient) -> None:
    assert c.ok("detach") == {"detached": False}
