"""Talking to the head: a blocking client for the CLI (the console's asyncio one is
``gputui.scheduler.client.aio``, kept apart so a CLI call never imports asyncio).

Both speak the JSON lines of ``wire`` and import nothing heavy (no pydantic, no
SQL, no SSH), so a ``gputui submit`` starts in a few tens of milliseconds. A
mutating call carries a fresh request id; when the connection drops or the head
does not answer in time, the call is sent again once, on a new connection, with the
same id, and the head applies it once (its request log answers the retry with the
first result). A timeout is never read as a refusal: a request not answered may
still be applied, and the message says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gputui.locations import DEFAULT_SOCKET, SOCKET_ENV, LocationError, find_hosts

from . import ops

MUTATING = ops.MUTATING
"""The ops that change something (``ops.MUTATING``: one set for client and head)."""
_MAX_LINE = 64 * 1024 * 1024


class HeadError(Exception):
    """The head refused a request, or could not be reached: ``code`` and one line."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def unreachable(path: str | os.PathLike[str], exc: BaseException) -> HeadError:
    if isinstance(exc, FileNotFoundError):
        why = "no socket there; is `gputui head` running?"
    elif isinstance(exc, ConnectionRefusedError):
        why = "nobody is listening (a head that stopped?)"
    elif isinstance(exc, PermissionError):
        why = "permission denied on the socket or its directory"
    else:
        why = str(exc) or type(exc).__name__
    return HeadError("unreachable", f"head unreachable at {path}: {why}")


def may_still_apply(op: str, rid: str) -> HeadError:
    """A mutating request the head did not answer in time: not refused, maybe applied."""
    return HeadError(
        "timeout",
        f"the head did not answer {op} in time; it may still be applied later"
        f" (request id {rid}): check before asking again",
    )


def new_request_id() -> str:
    return uuid.uuid4().hex


class HeadClient:
    """A blocking connection to the head's socket (for one CLI process)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        timeout: float | None = 30.0,
        *,
        opener: Callable[[], socket.socket] | None = None,
    ) -> None:
        """``opener``: makes the connection instead of ``path`` (the head over SSH,
        ``headssh.ssh_socket``); called again for a retry after a drop."""
        self.path = os.fspath(path)
        self.timeout = timeout
        self.opener = opener
        self._sock: socket.socket | None = None
        self._file: Any = None
        self._ids = 0

    def __enter__(self) -> HeadClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        if self.opener is not None:
            sock = self.opener()
            sock.settimeout(self.timeout)
        else:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.path)
            except OSError as exc:
                sock.close()
                raise unreachable(self.path, exc) from None
        self._sock = sock
        self._file = sock.makefile("rb")

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = self._file = None

    def call(
        self,
        op: str,
        args: dict[str, Any] | None = None,
        *,
        timeout: float | None = -1.0,
        retry: bool = True,
        on_push: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Send one request; its result, or ``HeadError``. Retries a dropped mutating
        request once, with the same request id; ``retry=False`` for a request bound to
        this connection (a ``gputui run`` claim: it ends with the connection).
        ``on_push``: gets each progress push of this request (``force_free``'s steps)."""
        rid = new_request_id() if op in MUTATING else None
        attempts = 2 if rid is not None and retry else 1
        for attempt in range(attempts):
            try:
                return self._call_once(op, args or {}, rid, timeout, on_push)
            except (ConnectionError, BrokenPipeError, EOFError) as exc:
                self.close()
                if attempt + 1 >= attempts:
                    raise HeadError(
                        "unreachable", f"lost the head while asking {op}: {exc}"
                    ) from None
            except HeadError as exc:
                if exc.code != "timeout" or rid is None:
                    raise
                self.close()  # its answer, late, must not be read as the retry's
                if attempt + 1 >= attempts:
                    raise may_still_apply(op, rid) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _call_once(
        self,
        op: str,
        args: dict[str, Any],
        rid: str | None,
        timeout: float | None,
        on_push: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        if self._sock is None:
            self.connect()
        assert self._sock is not None
        if timeout != -1.0:
            self._sock.settimeout(timeout)
        self._ids += 1
        request: dict[str, Any] = {"id": self._ids, "op": op, "args": args}
        if rid is not None:
            request["rid"] = rid
        self._sock.sendall(json.dumps(request, separators=(",", ":")).encode() + b"\n")
        while True:
            message = self._read()
            if message.get("push"):
                if on_push is not None and message.get("id") == self._ids:
                    on_push(message)
                continue
            if message.get("id") not in (self._ids, None):
                continue
            return _result(message)

    def _read(self) -> dict[str, Any]:
        try:
            line = self._file.readline(_MAX_LINE)
        except TimeoutError:
            raise HeadError("timeout", "the head did not answer in time") from None
        except OSError as exc:
            raise ConnectionError(str(exc)) from None
        if not line:
            raise EOFError("the head closed the connection")
        try:
            message = json.loads(line)
        except ValueError:
            raise HeadError("protocol", "the head sent something that is not JSON") from None
        if not isinstance(message, dict):
            raise HeadError("protocol", "the head sent something that is not an object")
        return message

    @property
    def sock(self) -> socket.socket | None:
        """The open connection (None: not connected)."""
        return self._sock

    def message(self) -> dict[str, Any]:
        """The next message, whatever it is (``HeadError`` ``unreachable``: the
        connection is gone)."""
        try:
            return self._read()
        except (ConnectionError, EOFError) as exc:
            raise HeadError("unreachable", f"lost the head: {exc}") from None

    def pushes(self) -> Iterator[dict[str, Any]]:
        """After ``subscribe``: every pushed message, as it comes."""
        while True:
            try:
                message = self._read()
            except (ConnectionError, EOFError) as exc:
                raise HeadError("unreachable", f"lost the head: {exc}") from None
            if message.get("push"):
                yield message


def _result(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("ok") is True:
        result = message.get("result")
        return result if isinstance(result, dict) else {}
    err = message.get("error")
    if isinstance(err, dict):
        raise HeadError(str(err.get("code", "error")), str(err.get("message", "refused")))
    raise HeadError("protocol", "the head sent an answer without a result or an error")


LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def is_local_name(host: str) -> bool:
    """Whether ``head.host`` names this machine (short name or FQDN)."""
    name = host.lower()
    here = socket.gethostname().lower()
    return name in LOCAL_NAMES or name == here or name.split(".")[0] == here.split(".")[0]


def socket_path(explicit: str | None = None, config_file: str | None = None) -> Path:
    """Where the head's socket is: ``--socket``, ``$GPUTUI_HEAD_SOCKET``, hosts.yaml's
    ``head.socket`` (read with the bounded YAML reader only), then the default."""
    return head_place(explicit, config_file)[0]


def head_place(
    explicit: str | None = None, config_file: str | None = None
) -> tuple[Path, Path | None]:
    """(the head's socket, the hosts.yaml to reach it over SSH with, or None when it
    is reached directly). Over SSH when ``head.host`` is another machine and the
    socket is not here; ``--socket`` or ``$GPUTUI_HEAD_SOCKET`` always mean here."""
    if explicit:
        return Path(explicit).expanduser(), None
    env = os.environ.get(SOCKET_ENV)
    if env:
        return Path(env).expanduser(), None
    found = _config_head(config_file)
    if found is None:
        return Path(DEFAULT_SOCKET), None
    head, source = found
    sock = head.get("socket")
    path = Path(sock).expanduser() if isinstance(sock, str) and sock else Path(DEFAULT_SOCKET)
    host = head.get("host")
    if not isinstance(host, str) or not host or is_local_name(host) or os.path.exists(path):
        return path, None
    return path, source


def _config_head(config_file: str | None) -> tuple[dict[str, Any], Path] | None:
    """hosts.yaml's ``head:`` section and the file it is in: the file
    :func:`gputui.locations.find_hosts` finds (the one search order, trusted files only)."""
    try:
        path = find_hosts(config_file)
    except LocationError as exc:
        raise HeadError("config", exc.line) from None
    if path is None:
        return None
    try:
        if path.stat().st_size > (1 << 20):
            raise HeadError("config", f"{path} is over 1 MiB; not a hosts file")
        raw = path.read_bytes()
    except OSError as exc:
        raise HeadError("config", f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        from gputui.yamlbounds import Composer, Constructor

        composer = Composer(raw, str(path))
        root = composer.compose()
        if root is None:
            return None  # empty: no head there
        if composer.problems:
            raise ValueError
        data = Constructor().construct_document(root)
    except Exception:  # said in one line; the full loader says what is wrong, and where
        raise HeadError(
            "config", f"{path} is not a valid hosts file; `gputui check-config {path}` says why"
        ) from None
    head = data.get("head") if isinstance(data, dict) else None
    return (head, path) if isinstance(head, dict) else None
