"""A stand-in helper that speaks the protocol from a script: a newer helper, a hostile
one, one that never answers a given op.

It runs as the host's ``python3`` (``Kit.fake_python``), so it goes through the real
SSH server, the real channel and the real decoder like the true helper: it reads the
payload line, says hello, sends a sample every ``interval`` seconds, sends the plan's
``after_hello`` lines once, and answers each request by its op from the plan's
``answers`` (``"silent"``: never answers; ``"exit"``: exits at once). Every request it
reads is appended, as JSON, to the plan's ``log`` file, so a test can see what the
client sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gputui.remote import HELPER_VERSION
from gputui.wire.messages import PROTOCOL_VERSION

UUID = "GPU-11111111-2222-3333-4444-555555555555"

_SCRIPT = r"""
import json, threading, time
PLAN = json.loads(PLAN_TEXT)
lock = threading.Lock()
def send(obj):
    with lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()
sys.stdin.buffer.readline()  # the payload: not needed here
send(PLAN["hello"])
for line in PLAN["after_hello"]:
    send(line)
def samples():
    seq = 0
    while True:
        seq += 1
        send({"type": "sample", "seq": seq, "time": time.time(), "gpus": PLAN["gpus"]})
        time.sleep(PLAN["interval"])
threading.Thread(target=samples, daemon=True).start()
calls = {}
for raw in sys.stdin.buffer:
    req = json.loads(raw)
    with open(PLAN["log"], "a") as log:
        log.write(json.dumps(req) + "\n")
    op = req.get("op")
    answers = PLAN["answers"].get(op, [{"ok": False, "code": "unsupported", "error": "no"}])
    n = calls.get(op, 0)
    calls[op] = n + 1
    answer = answers[min(n, len(answers) - 1)]
    if answer == "silent":
        continue
    if answer == "exit":
        os._exit(0)
    for line in answer.get("before", []):
        send(line)
    reply = {"type": "result", "id": req["id"], "ok": answer.get("ok", True)}
    for key in ("value", "code", "error"):
        if key in answer:
            reply[key] = answer[key]
    send(reply)
"""


def hello(hostname: str = "scripted") -> dict[str, Any]:
    return {
        "type": "hello",
        "protocol": PROTOCOL_VERSION,
        "helper_version": HELPER_VERSION,
        "hostname": hostname,
        "simulated": True,
        "gpus": [{"index": 0, "uuid": UUID, "name": "Scripted GPU"}],
    }


def job_state(job_id: int, state: str = "running", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": job_id,
        "state": state,
        "pid": 4000 + job_id,
        "start_ticks": 100 * job_id,
        "exit_code": None,
        "signal": None,
        "started_at": 1.7e9,
        "ended_at": None,
        "timed_out": False,
        "log_path": f"/jobs/ns/{job_id}/output.log",
        "error": None,
    }
    base.update(fields)
    return base


def plan_body(
    log: Path,
    *,
    after_hello: list[dict[str, Any]] | None = None,
    answers: dict[str, list[Any]] | None = None,
    interval: float = 0.1,
) -> str:
    """The body of a fake ``python3`` that follows this plan."""
    plan = {
        "hello": hello(),
        "after_hello": after_hello or [],
        "answers": answers or {},
        "interval": interval,
        "gpus": [{"index": 0, "uuid": UUID, "util_gpu": 5}],
        "log": str(log),
    }
    return f"PLAN_TEXT = {json.dumps(plan)!r}\n{_SCRIPT}"


def requests_seen(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
