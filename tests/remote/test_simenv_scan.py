"""The simulator's /proc scan: new processes within ``list_interval``, exits at once."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gputui.remote.sim.env import EnvScanner


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _pids(scanner: EnvScanner) -> set[int]:
    return {p.pid for p in scanner.snapshot()}


def test_new_process_shows_up_at_the_next_listing(
    sim_process: Callable[..., subprocess.Popen[bytes]],
) -> None:
    clock = Clock()
    scanner = EnvScanner(min_interval=0.25, list_interval=2.0, clock=clock)
    scanner.snapshot()  # the first listing, before the process exists
    proc = sim_process("0")
    clock.now += 0.5
    assert proc.pid not in _pids(scanner)  # between listings only known pids are checked
    clock.now += 1.5
    assert proc.pid in _pids(scanner)  # list_interval after the last listing


def test_exited_process_drops_out_before_the_next_listing(
    sim_process: Callable[..., subprocess.Popen[bytes]],
) -> None:
    clock = Clock()
    proc = sim_process("1")
    scanner = EnvScanner(min_interval=0.25, list_interval=2.0, clock=clock)
    assert proc.pid in _pids(scanner)
    proc.kill()
    proc.wait(10)
    clock.now += 0.3
    assert proc.pid not in _pids(scanner)


def test_listing_does_not_reread_environ(
    sim_process: Callable[..., subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    scanner = EnvScanner(min_interval=0, list_interval=0, clock=clock)
    scanner.snapshot()
    proc = sim_process("0")
    calls: list[int] = []
    original = scanner._classify
    monkeypatch.setattr(scanner, "_classify", lambda pid: calls.append(pid) or original(pid))
    assert proc.pid in _pids(scanner)
    assert calls.count(proc.pid) == 1
    assert proc.pid in _pids(scanner)
    assert calls.count(proc.pid) == 1


def test_an_empty_environment_is_read_again(tmp_path: Path) -> None:
    """A process caught inside exec reads as an empty environment: not cached as 'no GPU'."""
    pid_dir = tmp_path / "4242"
    pid_dir.mkdir()
    fields = ["S"] + ["0"] * 18 + ["777"] + ["0"] * 10
    (pid_dir / "stat").write_text("4242 (train) " + " ".join(fields) + "\n")
    (pid_dir / "environ").write_bytes(b"")
    clock = Clock()
    scanner = EnvScanner(proc=str(tmp_path), min_interval=0, list_interval=0, clock=clock, scope="")
    assert _pids(scanner) == set()
    (pid_dir / "environ").write_bytes(b"PATH=/bin\0GPUTUI_SIM_GPU=0\0")
    assert _pids(scanner) == {4242}


def _fake_proc(root: Path, pid: int, env: bytes) -> None:
    (root / str(pid)).mkdir()
    fields = ["S"] + ["0"] * 18 + [str(pid)] + ["0"] * 10
    (root / str(pid) / "stat").write_text(f"{pid} (train) " + " ".join(fields) + "\n")
    (root / str(pid) / "environ").write_bytes(env)


def test_a_simulator_counts_only_the_processes_of_its_own_scope(tmp_path: Path) -> None:
    """Two simulators on one machine (two demos, test runs side by side) never take
    each other's processes: each counts only those of its GPUTUI_SIM_SCOPE, one
    without a scope only those without one."""
    _fake_proc(tmp_path, 101, b"GPUTUI_SIM_GPU=0\0")
    _fake_proc(tmp_path, 102, b"GPUTUI_SIM_GPU=0\0GPUTUI_SIM_SCOPE=a\0")
    _fake_proc(tmp_path, 103, b"GPUTUI_SIM_SCOPE=b\0GPUTUI_SIM_GPU=0\0")
    _fake_proc(tmp_path, 104, b"GPUTUI_SIM_GPU=0\0GPUTUI_SIM_SCOPE=\0")

    def seen(scope: str | None) -> set[int]:
        return _pids(EnvScanner(proc=str(tmp_path), min_interval=0, clock=Clock(), scope=scope))

    assert (seen(""), seen("a"), seen("b"), seen("c")) == ({101, 104}, {102}, {103}, set())
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUTUI_SIM_SCOPE", "b")
        assert seen(None) == {103}  # by default, the scope of the process it runs in
        mp.delenv("GPUTUI_SIM_SCOPE")
        assert seen(None) == {101, 104}
