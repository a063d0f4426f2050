"""What the demo prints while it starts (``gputui.demo.progress``): a line per host
and state for a small demo, a count at each quarter for a big one, and an export
line a shell reads back as the socket it names, whatever that path holds."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gputui.cli.demo import DEMO_WELCOME, WELCOME_W, welcome_text
from gputui.demo.progress import MANY, SOCKET_ENV, StartLines, export_line


def _run(hosts: list[str], order: list[int]) -> list[str]:
    out = io.StringIO()
    report = StartLines(out, hosts)
    report("head", "starting")
    report("head", "ready", "in /tmp/x")
    for name in hosts:
        report(name, "connecting")
    for i in order:
        report(hosts[i], "ready", "5 GPUs")
    return out.getvalue().splitlines()


def test_a_small_demo_gets_a_line_per_host_and_state() -> None:
    lines = _run(["gpu01", "gpu02"], [1, 0])
    assert lines == [
        "  head   starting",
        "  head   ready       in /tmp/x",
        "  gpu01  connecting",
        "  gpu02  connecting",
        "  gpu02  ready       5 GPUs",
        "  gpu01  ready       5 GPUs",
    ]


@given(st.integers(MANY + 1, 256).flatmap(lambda n: st.permutations(range(n))))
def test_a_big_demo_gets_a_count_at_each_quarter(order: list[int]) -> None:
    total = len(order)
    lines = _run([f"gpu{i + 1:03d}" for i in range(total)], order)
    hosts = [line for line in lines if line.startswith("  hosts")]
    assert hosts[0] == f"  hosts  connecting  {total} hosts"
    assert hosts[-1] == f"  hosts  ready       {total}/{total} ready"
    assert len(hosts) <= 5
    counts = [int(line.split()[-2].split("/")[0]) for line in hosts[1:]]
    assert counts == sorted(counts)
    assert all(len(line) <= 80 for line in lines)


@given(st.text(st.characters(blacklist_characters="\0"), min_size=1, max_size=200))
def test_the_export_line_gives_the_shell_back_the_socket_path(path: str) -> None:
    assert shlex.split(export_line(path)) == ["export", f"{SOCKET_ENV}={path}"]


def test_the_intro_is_whole_at_80_columns() -> None:
    # Seen in tmux at 80x24: the intro was one long line on the notices screen,
    # which never wraps: "... c claims the selected GPU (the export line is copie".
    export = export_line(Path("/tmp/gputui-demo-abcdefgh/head/head.sock"))
    quick = "job 6 (quick-test) of yours ends in ~20 s"
    text = welcome_text(quick, export)
    lines = text.splitlines()
    assert all(len(line) <= WELCOME_W <= 80 for line in lines), lines
    assert lines[-1] == export  # alone on its line, for a mouse
    assert f"Watch {quick}." in lines
    for key in ("c claims", "n enqueues", "Q shows", ":usage", "Ctrl+P"):
        assert key in text
    assert welcome_text(None, None).splitlines() == list(DEMO_WELCOME)
