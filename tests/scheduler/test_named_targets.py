"""A host or GPU that names nothing is refused with one line, the same for every op
that takes one (``gputui.scheduler.policy.lookup``): submit, claim, drain, force-free and
health name the hosts there are; drain and force-free name the host's GPUs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, refusal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputui.scheduler.server import wire

LAYOUT = {"gpu01": 4, "gpu02": 2}
HOSTS = "gpu01, gpu02"


@pytest.fixture(scope="module")
def th(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedHead]:
    with ThreadedHead(tmp_path_factory.mktemp("head"), LAYOUT) as head:
        yield head
        assert head.problems == []


def _refused(th: ThreadedHead, op: str, args: dict[str, Any]) -> tuple[str, str]:
    with LineClient(th.sock) as client:
        body: dict[str, Any] = {"id": 1, "op": op, "args": args}
        if op in wire.MUTATING:
            body["rid"] = f"t-{op}-{abs(hash(str(args)))}"
        client.send(json.dumps(body).encode())
        return refusal(client.read())


_FIXTURE = [HealthCheck.function_scoped_fixture]
_NAME = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True).filter(lambda n: n not in LAYOUT)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=_NAME)
def test_an_unknown_host_reads_the_same_in_every_op(th: ThreadedHead, name: str) -> None:
    said = f"no host named {name!r} (hosts: {HOSTS})"
    asks = [
        ("drain", {"target": name, "reason": "r"}, "unknown-host", said),
        ("drain", {"target": f"{name}:0", "reason": "r"}, "unknown-host", said),
        ("force_free", {"host": name, "gpu": "0", "reason": "r"}, "unknown-host",
         f"force-free: {said}"),
        ("health", {"hosts": [name]}, "unknown-host", said),
        ("submit", {"argv": ["x"], "host": name}, "impossible", said),
        ("claim", {"gpus": 1, "host": name}, "impossible", said),
    ]  # fmt: skip
    for op, args, code, message in asks:
        assert _refused(th, op, args) == (code, message), op


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ref=st.integers(4, 99).map(str) | st.from_regex(r"GPU-[0-9a-f]{6}", fullmatch=True))
def test_an_unknown_gpu_reads_the_same_in_drain_and_force_free(th: ThreadedHead, ref: str) -> None:
    said = f"no GPU 'gpu01:{ref}' (GPUs of gpu01: 0, 1, 2, 3)"
    assert _refused(th, "drain", {"target": f"gpu01:{ref}", "reason": "r"}) == ("unknown-gpu", said)
    got = _refused(th, "force_free", {"host": "gpu01", "gpu": ref, "reason": "r"})
    assert got == ("unknown-gpu", f"force-free: {said}")
