"""``gputui head --metrics ADDR:PORT`` and ``head.metrics``: a real head process serves
``/metrics`` and lets the port go when it stops; a bad value or a port in use is one
line and exit 2, before the head serves anything.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from headthread import poll
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from test_durability import HeadProcess

from gputui.cli import head as head_cli
from gputui.common.listen import parse_listen
from gputui.config.loader import ConfigError, parse_config


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def run_head(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputui.entry", "head", "--hosts", str(config), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "value",
    ["9400", "localhost", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:x", "::1:9400",
     "[nope]:9400", "999.1.1.1:80", "a b:80", "host:-1", "", "[::1]"],
)  # fmt: skip
def test_a_bad_metrics_flag_is_one_line_and_exit_2(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert head_cli.main(["--metrics", value]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("gputui head: --metrics: "), err


@given(st.text(max_size=40))
def test_any_text_is_an_address_and_port_or_one_line(text: str) -> None:
    try:
        addr, port = parse_listen(text)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert 1 <= port <= 65535 and addr


def test_a_bad_head_metrics_setting_names_the_file_and_the_field() -> None:
    with pytest.raises(ConfigError) as bad:
        parse_config("head:\n  metrics: 'localhost:99999'\n", "hosts.yaml")
    assert bad.value.lines == ["hosts.yaml:2: head.metrics: port 99999 is not from 1 to 65535"]
    assert parse_config("head:\n  metrics: '[::1]:9400'\n", "h").head.metrics == "[::1]:9400"
    assert parse_config("head: {}\n", "h").head.metrics is None  # off by default


def test_a_port_in_use_is_refused_with_one_line(tmp_path: Path) -> None:
    head = HeadProcess(tmp_path)
    with taken_port() as port:
        done = run_head(head.config, "--metrics", f"127.0.0.1:{port}")
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.startswith(f"gputui head: cannot serve metrics on 127.0.0.1:{port}: ")
    assert done.stderr.count("\n") == 1, done.stderr
    assert not head.sock.exists()  # refused before it served its socket


def test_a_head_serves_metrics_from_its_setting_and_lets_the_port_go(tmp_path: Path) -> None:
    port = free_port()
    head = HeadProcess(tmp_path, head=f"  metrics: 127.0.0.1:{port}\n")
    head.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=15) as answer:
            text = answer.read().decode()
        names = {f.name for f in text_string_to_metric_families(text)}
        assert {"gputui_hosts", "gputui_hosts_up", "gputui_gpus"} <= names
    finally:
        head.stop()
    assert head.process is not None and head.process.returncode == 0
    log = head.log.read_text()
    assert f"gputui head: metrics on http://127.0.0.1:{port}/metrics\n" in log
    with socket.socket() as again:  # the port was let go
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        again.bind(("127.0.0.1", port))


def test_the_flag_overrides_the_setting(tmp_path: Path) -> None:
    with taken_port() as taken:
        head = HeadProcess(tmp_path, head=f"  metrics: 127.0.0.1:{taken}\n")
        port = free_port()
        argv = ["head", "--hosts", str(head.config), "--metrics", f"127.0.0.1:{port}"]
        with head.log.open("ab") as log:
            head.process = subprocess.Popen(
                [sys.executable, "-m", "gputui.entry", *argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        try:
            poll(lambda: _serves(head, port), timeout=30, what="the head to serve /metrics")
        finally:
            head.stop()
        assert head.process.returncode == 0, head.log.read_text()


def _serves(head: HeadProcess, port: int) -> bool:
    assert head.process is not None
    if head.process.poll() is not None:
        raise AssertionError(f"gputui head exited: {head.log.read_text()[-2000:]}")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False
