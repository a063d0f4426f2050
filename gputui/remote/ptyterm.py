"""An interactive job's terminal, kept by its supervisor as tmux keeps a session.

Shipped with ``supervisor`` (run ahead of it, in one namespace: see its ``BOOTSTRAP``),
so stdlib only and nothing of the helper's. The job runs on a pty of its own; the
supervisor keeps its last output in a ring, and serves one attached client (the
helper) on the job directory's ``pty.sock``: JSON lines, output as base64 with its
offset, and a window of output sent but not yet acknowledged, so a slow client is sent
less, never made to hold more, and the job never waits on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .supervisor import Job

PTY_SOCK = "pty.sock"
"""The attach socket in the job directory: mode 0600, so only the helper's user (the
supervisor's own) may connect; who may attach is the head's decision."""
RING_MAX = 65536
"""Scrollback a reattach is shown: the job's last this many bytes of output."""
WINDOW = 65536
"""Output sent to the attached client and not yet acknowledged, at most. A slow client
is sent less, never made to hold more; what it missed stays in the ring (or is
overwritten there, and it is told how much was skipped). The job never waits."""
PEER_LINE_MAX = 65536
INPUT_MAX = 16384
"""Typed bytes the job has not read yet, at most: then the client is not read."""
CHUNK = 16384
SIZE_MAX = 10000
DRAIN_MAX = 1 << 20


def set_size(fd: int, rows: int, cols: int) -> None:
    """The terminal's size (TIOCSWINSZ): the kernel tells the job (SIGWINCH)."""
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Ring:
    """The job's last ``cap`` bytes of output, addressed by offset from its start."""

    def __init__(self, cap: int = RING_MAX) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.end = 0

    @property
    def start(self) -> int:
        return self.end - len(self.buf)

    def add(self, data: bytes) -> None:
        self.buf += data
        self.end += len(data)
        extra = len(self.buf) - self.cap
        if extra > 0:
            del self.buf[:extra]

    def since(self, at: int, limit: int) -> tuple[int, bytes]:
        """(where they start, up to ``limit`` bytes from ``at``): from the ring's start
        when ``at`` was overwritten already."""
        at = max(at, self.start)
        offset = at - self.start
        return at, bytes(self.buf[offset : offset + limit])


class Peer:
    """The attached client (the helper, for the head): its socket and its cursors."""

    def __init__(self, sock: Any, at: int) -> None:
        self.sock = sock
        self.rbuf = bytearray()
        self.wbuf = bytearray()
        self.sent = at
        """Output up to here is sent (or skipped)."""
        self.acked = at
        """... and up to here the client said it has shown."""


def killpg(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
    except OSError:
        return False
    return True


def _session_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read(4096)
        return int(data[data.rfind(b")") + 1 :].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def _signal_session(sid: int, sig: int) -> None:
    """``sig`` to every process of session ``sid``: a shell's jobs have process groups
    of their own, and they are the job too."""
    killpg(sid, sig)
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid != sid and _session_of(pid) == sid:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)


class Terminal:
    """An interactive job's pty, kept by its supervisor as tmux keeps a session: the
    output ring, at most one attached client on ``pty.sock`` (a new one takes over),
    the idle limit."""

    def __init__(self, job: Job, log_fd: int) -> None:
        self.job = job
        self.log_fd = log_fd
        self.master, self.slave = os.openpty()
        try:
            set_size(self.master, 24, 80)
            self.listener = self._listen()
        except OSError:
            os.close(self.master)
            os.close(self.slave)
            raise
        self.ring = Ring()
        self.peer: Peer | None = None
        self.inbuf = bytearray()
        self.last_active = time.monotonic()
        self.eof = False

    def _listen(self) -> Any:
        import socket

        with contextlib.suppress(FileNotFoundError):
            os.unlink(PTY_SOCK, dir_fd=self.job.dir_fd)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        old = os.umask(0o177)
        try:  # through the directory's descriptor: no path length limit, no symlink
            sock.bind(f"/proc/self/fd/{self.job.dir_fd}/{PTY_SOCK}")
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(old)
        sock.listen(4)
        sock.setblocking(False)
        return sock

    def child_started(self) -> None:
        os.close(self.slave)  # the job holds it: EIO on the master once all of it is gone
        os.set_blocking(self.master, False)

    def close(self) -> None:
        for fd in (self.master, self.log_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError):
            os.close(self.slave)
        if self.peer is not None:
            self.peer.sock.close()
        self.listener.close()
        with contextlib.suppress(OSError):
            os.unlink(PTY_SOCK, dir_fd=self.job.dir_fd)

    # -- the loop ----------------------------------------------------------------------

    def serve(self, pid: int, record_end: Callable[[str | None], dict[str, Any]]) -> None:
        """Run the terminal until the job ends; then record how (``record_end``, given
        what ended it: ``time``, ``idle``, ``stopped`` or None), and tell the client."""
        import select

        spec = self.job.spec
        grace = float(spec.get("grace_s") or 0.0)
        limit, idle = spec.get("time_limit_s"), spec.get("idle_s")
        term_at = time.monotonic() + float(limit) if limit else None
        kill_at: float | None = None
        why: str | None = None
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        for sig in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD, signal.SIGTERM})
        poller = select.poll()
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            now = time.monotonic()
            if why is None:
                if term_at is not None and now >= term_at:
                    why = "time"
                elif idle and now - self.last_active >= float(idle):
                    why = "idle"
                if why is not None:
                    self._hang_up(pid)
                    kill_at = now + grace
            if kill_at is not None and now >= kill_at:
                kill_at = None
                _signal_session(pid, signal.SIGKILL)
            wakes = [t for t in (kill_at,) if t is not None]
            if why is None:
                wakes += [t for t in (term_at,) if t is not None]
                if idle:
                    wakes.append(self.last_active + float(idle))
            timeout = max(0.0, min(wakes) - now) if wakes else None
            fds = self._register(poller, wake_r)
            try:
                ready = poller.poll(None if timeout is None else int(timeout * 1000) + 1)
            finally:
                for fd in fds:
                    poller.unregister(fd)
            for fd, events in ready:
                if fd == wake_r:
                    if self._woken(wake_r) and kill_at is None:
                        why = why or "stopped"  # the host shuts down, or someone stops us
                        self._hang_up(pid)
                        kill_at = time.monotonic() + grace
                else:
                    self._ready(fd, events)
            self._pump()
        _signal_session(pid, signal.SIGKILL)
        self._drain()
        ended = record_end(why)
        self._tell_end(ended, why)
        signal.set_wakeup_fd(-1)
        os.close(wake_r)
        os.close(wake_w)
        self.close()

    def _register(self, poller: Any, wake_r: int) -> list[int]:
        import select

        fds: dict[int, int] = {wake_r: select.POLLIN, self.listener.fileno(): select.POLLIN}
        if not self.eof:
            fds[self.master] = select.POLLIN | (select.POLLOUT if self.inbuf else 0)
        peer = self.peer
        if peer is not None:
            mask = select.POLLIN if len(self.inbuf) < INPUT_MAX else 0
            fds[peer.sock.fileno()] = mask | (select.POLLOUT if peer.wbuf else 0)
        for fd, mask in fds.items():
            poller.register(fd, mask)
        return list(fds)

    def _woken(self, wake_r: int) -> bool:
        """Read the signals that woke us; True when one was SIGTERM."""
        term = False
        with contextlib.suppress(OSError):
            while True:
                data = os.read(wake_r, 64)
                if not data:
                    break
                term = term or signal.SIGTERM in data
        return term

    def _hang_up(self, pid: int) -> None:
        """A shell leaves on SIGHUP (it ignores SIGTERM): both, to the whole session."""
        _signal_session(pid, signal.SIGHUP)
        _signal_session(pid, signal.SIGTERM)
        _signal_session(pid, signal.SIGCONT)

    def _ready(self, fd: int, events: int) -> None:
        import select

        if fd == self.listener.fileno():
            self._accept()
        elif fd == self.master:
            if events & select.POLLOUT and self.inbuf:
                try:
                    del self.inbuf[: os.write(self.master, self.inbuf[:CHUNK])]
                except BlockingIOError:
                    pass
                except OSError:
                    self.inbuf.clear()
            if events & (select.POLLIN | select.POLLHUP | select.POLLERR):
                self._read_master()
        elif self.peer is not None and fd == self.peer.sock.fileno():
            if events & select.POLLOUT:
                self._send()
            if events & (select.POLLIN | select.POLLHUP | select.POLLERR) and self.peer:
                self._read_peer()

    def _read_master(self) -> bool:
        try:
            data = os.read(self.master, CHUNK)
        except BlockingIOError:
            return False
        except OSError:  # EIO: every holder of the terminal is gone
            data = b""
        if not data:
            self.eof = True
            return False
        self.ring.add(data)
        self.last_active = time.monotonic()
        with contextlib.suppress(OSError):
            os.write(self.log_fd, data)
        return True

    def _drain(self) -> None:
        """What the job wrote last (it ended): into the ring and the log."""
        total = 0
        while not self.eof and total < DRAIN_MAX and self._read_master():
            total += CHUNK

    # -- the attached client -------------------------------------------------------------

    def _accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        old = self.peer
        if old is not None:  # a new attach takes over (the old one lost its way)
            self._line(old, {"k": "detached", "why": "attached elsewhere"})
            self._send()
            old.sock.close()
        self.peer = Peer(sock, self.ring.start)

    def _drop(self) -> None:
        if self.peer is not None:
            self.peer.sock.close()
            self.peer = None

    def _read_peer(self) -> None:
        peer = self.peer
        assert peer is not None
        try:
            data = peer.sock.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop()
            return
        peer.rbuf += data
        while self.peer is peer:
            end = peer.rbuf.find(b"\n")
            if end < 0:
                if len(peer.rbuf) > PEER_LINE_MAX:
                    self._drop()
                return
            line = bytes(peer.rbuf[:end])
            del peer.rbuf[: end + 1]
            self._on_line(peer, line)

    def _on_line(self, peer: Peer, line: bytes) -> None:
        import base64
        import binascii

        try:
            msg = json.loads(line.decode("utf-8"))
            kind = msg["k"]
            if kind == "in":
                data = base64.b64decode(msg["d"], validate=True)
                self.inbuf += data
                self.last_active = time.monotonic()
            elif kind == "size":
                rows, cols = msg["rows"], msg["cols"]
                if all(type(v) is int and 1 <= v <= SIZE_MAX for v in (rows, cols)):
                    set_size(self.master, rows, cols)
            elif kind == "ack":
                at = msg["at"]
                if type(at) is int:
                    peer.acked = max(peer.acked, min(at, peer.sent))
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
            self._drop()  # not our client's language: it goes, the job stays
        except OSError:
            pass

    def _line(self, peer: Peer, msg: dict[str, Any]) -> None:
        peer.wbuf += json.dumps(msg, separators=(",", ":")).encode("utf-8") + b"\n"

    def _pump(self) -> None:
        """Output the client has room for (``WINDOW``), then whatever can be sent."""
        import base64

        peer = self.peer
        if peer is None:
            return
        while len(peer.wbuf) < 2 * CHUNK and peer.sent < self.ring.end:
            room = WINDOW - (peer.sent - peer.acked)
            if room <= 0:
                break
            at, data = self.ring.since(peer.sent, min(CHUNK, room))
            msg: dict[str, Any] = {"k": "out", "at": at, "d": base64.b64encode(data).decode()}
            if at > peer.sent:  # overwritten before this slow client took it
                msg["skipped"] = at - peer.sent
                peer.acked += at - peer.sent
            self._line(peer, msg)
            peer.sent = at + len(data)
        self._send()

    def _send(self) -> None:
        peer = self.peer
        if peer is None or not peer.wbuf:
            return
        try:
            del peer.wbuf[: peer.sock.send(peer.wbuf)]
        except BlockingIOError:
            pass
        except OSError:
            self._drop()

    def _tell_end(self, ended: dict[str, Any], why: str | None) -> None:
        """The client sees the rest of the output (as its window allows) and the end."""
        import select

        peer = self.peer
        if peer is None:
            return
        deadline = time.monotonic() + 2.0
        while self.peer is peer and time.monotonic() < deadline:
            self._pump()
            if self.peer is not peer or (peer.sent >= self.ring.end and not peer.wbuf):
                break
            left = max(0.0, deadline - time.monotonic())
            writing = [peer.sock] if peer.wbuf else []
            if select.select([peer.sock], writing, [], left)[0]:
                self._read_peer()  # an ack opens the window
        if self.peer is not peer:
            return
        fields = {k: ended[k] for k in ("exit_code", "signal")}
        self._line(peer, {"k": "end", "why": why, **fields})
        with contextlib.suppress(OSError):
            peer.sock.setblocking(True)
            peer.sock.settimeout(2.0)
            peer.sock.sendall(bytes(peer.wbuf))
        self._drop()
