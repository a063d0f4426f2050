"""Interactive jobs' terminals, through the helper: ``pty_open``, ``pty_send`` and
``pty_close``, and the ``pty`` messages that carry a terminal's output back.

The terminal itself is kept by the job's supervisor (``supervisor.Terminal``) on the
job directory's ``pty.sock``; the helper only connects to it and forwards, both ways,
one attachment per ``aid`` (chosen by the client). A reader thread per attachment
turns the supervisor's lines into ``pty`` messages; what the supervisor sends is
bounded by its window, which the far client's ``ack`` opens, so nothing piles up here.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import socket
import threading
from typing import Any, Callable

from .jobfs import JobStore, check_job_id, check_ns
from .ptyterm import PTY_SOCK, SIZE_MAX
from .signals import RequestError, bad_request
from .wire import OutputClosed

AID_MAX = 1 << 53  # the wire's fields.PTY_AID_MAX (a test holds them equal)
ATTACH_MAX = 64
"""Terminals one helper forwards at once."""
INPUT_MAX = 65536
"""Base64 characters of input one ``pty_send`` may carry."""
LINE_MAX = 1 << 17
SEND_TIMEOUT_S = 2.0
PENDING_MAX = 1 << 18
"""Input (as lines) queued for a job that does not read it, at most: more is refused."""

Send = Callable[[dict[str, Any]], None]


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise bad_request(f"{what} must be an integer {low}..{high}")
    return value


class Attachment:
    """One forwarded terminal: the socket to its supervisor, the thread reading it, and
    the thread writing to it (so a job that does not read its input never holds up the
    helper's loop, and keystrokes keep their order)."""

    def __init__(self, aid: int, sock: socket.socket) -> None:
        self.aid = aid
        self.sock = sock
        self.lock = threading.Lock()
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.wake = threading.Condition(self.lock)
        self.closed = False

    def write(self, msg: dict[str, Any]) -> None:
        """Queue one line for the supervisor; RequestError when too much waits already."""
        data = json.dumps(msg, separators=(",", ":")).encode("utf-8") + b"\n"
        with self.lock:
            if self.closed:
                raise RequestError("no-terminal", f"attachment {self.aid} is gone")
            if self.pending_bytes + len(data) > PENDING_MAX and msg.get("k") == "in":
                raise RequestError(
                    "busy",
                    f"the job has not read {self.pending_bytes} bytes of input yet;"
                    " this input is dropped",
                )
            self.pending.append(data)
            self.pending_bytes += len(data)
            self.wake.notify()

    def run_writer(self) -> None:
        """The writer thread: queued lines out, in order, until the attachment ends."""
        while True:
            with self.lock:
                while not self.pending and not self.closed:
                    self.wake.wait()
                if self.closed:
                    return
                data = b"".join(self.pending)
                self.pending.clear()
            try:
                self.sock.sendall(data)
            except OSError:
                self.end()
                return
            with self.lock:
                self.pending_bytes -= len(data)

    def end(self) -> None:
        with self.lock:
            self.closed = True
            self.wake.notify()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class Terminals:
    """The attachments of one helper."""

    def __init__(self, store: JobStore, send: Send) -> None:
        self.store = store
        self.send = send
        self.lock = threading.Lock()
        self.open_ones: dict[int, Attachment] = {}

    def open(self, req: dict[str, Any]) -> dict[str, Any]:
        ns = check_ns(req.get("ns"))
        job_id = check_job_id(req.get("job_id"))
        aid = _int(req.get("aid"), "aid", 1, AID_MAX)
        rows = _int(req.get("rows", 24), "rows", 1, SIZE_MAX)
        cols = _int(req.get("cols", 80), "cols", 1, SIZE_MAX)
        found = self.store.get(ns, job_id)
        if found is None:
            raise RequestError("unknown-job", f"no job {job_id} in namespace {ns}")
        public = found[0]
        if not public.get("pty"):
            raise RequestError("no-terminal", f"job {job_id} is not interactive (no --pty)")
        if public["state"] != "running":
            raise RequestError("no-terminal", f"job {job_id} is {public['state']}, not running")
        with self.lock:
            if aid in self.open_ones:
                raise bad_request(f"attachment {aid} is open already")
            if len(self.open_ones) >= ATTACH_MAX:
                raise RequestError(
                    "busy", f"{ATTACH_MAX} terminals are attached through this helper"
                )
        sock = self._connect(ns, job_id)
        attachment = Attachment(aid, sock)
        attachment.write({"k": "size", "rows": rows, "cols": cols})
        with self.lock:
            self.open_ones[aid] = attachment
        threading.Thread(target=attachment.run_writer, name="helper-pty-in", daemon=True).start()
        threading.Thread(
            target=self._forward, args=(attachment,), name="helper-pty", daemon=True
        ).start()
        return {"aid": aid, "job_id": job_id}

    def _connect(self, ns: str, job_id: int) -> socket.socket:
        path = os.path.join(self.store.root, ns, str(job_id))
        try:
            dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise RequestError("no-terminal", f"job {job_id}: {exc.strerror}") from None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.settimeout(SEND_TIMEOUT_S)
            sock.connect(f"/proc/self/fd/{dir_fd}/{PTY_SOCK}")
        except OSError as exc:
            sock.close()
            why = exc.strerror or type(exc).__name__
            raise RequestError("no-terminal", f"job {job_id}'s terminal: {why}") from None
        finally:
            os.close(dir_fd)
        sock.settimeout(None)
        return sock

    def write(self, req: dict[str, Any]) -> dict[str, Any]:
        """Input, a new window size, or an acknowledgement (any of them) for ``aid``."""
        aid = _int(req.get("aid"), "aid", 1, AID_MAX)
        with self.lock:
            attachment = self.open_ones.get(aid)
        if attachment is None:
            raise RequestError("no-terminal", f"attachment {aid} is not open")
        lines: list[dict[str, Any]] = []
        data = req.get("data")
        if data is not None:
            if not isinstance(data, str) or len(data) > INPUT_MAX:
                raise bad_request(f"data must be base64 of at most {INPUT_MAX} characters")
            try:
                base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise bad_request("data must be base64") from None
            lines.append({"k": "in", "d": data})
        if req.get("rows") is not None or req.get("cols") is not None:
            rows = _int(req.get("rows"), "rows", 1, SIZE_MAX)
            cols = _int(req.get("cols"), "cols", 1, SIZE_MAX)
            lines.append({"k": "size", "rows": rows, "cols": cols})
        if req.get("ack") is not None:
            lines.append({"k": "ack", "at": _int(req.get("ack"), "ack", 0, 1 << 62)})
        for line in lines:
            attachment.write(line)
        return {"aid": aid}

    def close(self, req: dict[str, Any]) -> dict[str, Any]:
        aid = _int(req.get("aid"), "aid", 1, AID_MAX)
        with self.lock:
            attachment = self.open_ones.get(aid)
        if attachment is not None:
            attachment.end()
        return {"aid": aid, "closed": attachment is not None}

    def _forward(self, attachment: Attachment) -> None:
        """The supervisor's lines as ``pty`` messages, until it or we hang up."""
        aid = attachment.aid
        closed: dict[str, Any] = {"type": "pty", "aid": aid, "kind": "closed", "why": "detached"}
        try:
            reader = attachment.sock.makefile("rb")
            while True:
                line = reader.readline(LINE_MAX)
                if not line.endswith(b"\n"):
                    break  # the end, or a line over the cap: either way, done
                message = _message(aid, line)
                if message is None:
                    break
                if message["kind"] == "closed":
                    closed = message
                    break
                self.send(message)
                if message["kind"] == "end":
                    closed = {}
                    break
        except (OSError, ValueError):
            pass
        except OutputClosed:
            closed = {}
        finally:
            with self.lock:
                self.open_ones.pop(aid, None)
            attachment.end()
            attachment.sock.close()
        if closed:
            with contextlib.suppress(OutputClosed):
                self.send(closed)


def _message(aid: int, line: bytes) -> dict[str, Any] | None:
    """A supervisor's line as a ``pty`` message; None for one that is not ours."""
    try:
        msg = json.loads(line.decode("utf-8"))
    except ValueError:
        return None
    if not isinstance(msg, dict):
        return None
    kind = msg.get("k")
    if kind == "out":
        out = {"type": "pty", "aid": aid, "kind": "out", "at": msg.get("at"), "data": msg.get("d")}
        if msg.get("skipped"):
            out["skipped"] = msg["skipped"]
        return out
    if kind == "end":
        return {
            "type": "pty",
            "aid": aid,
            "kind": "end",
            "exit_code": msg.get("exit_code"),
            "signal": msg.get("signal"),
            "why": msg.get("why"),
        }
    if kind == "detached":
        return {"type": "pty", "aid": aid, "kind": "closed", "why": str(msg.get("why"))[:64]}
    return None
