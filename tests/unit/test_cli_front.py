"""What a new user meets before any verb runs: a typo'd command, an option in the
wrong place, ``--version``, ``--help`` saying how the head is found, and a hosts.yaml
named on the command line (or by ``$GPUTUI_HOSTS``) that is not there."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui import __version__, entry
from gputui.cli import args, console

SAMPLE_ARGS: dict[str, list[str]] = {
    "claim": ["-g", "1"],
    "submit": ["--", "true"],
    "run": ["--", "true"],
    "show": ["1"],
    "attach": ["1"],
    "logs": ["1"],
    "wait": ["1"],
    "explain": ["1"],
    **{name: ["1"] for name in ("cancel", "kill", "preempt", "requeue", "hold", "release-hold")},
    "drain": ["h1", "--reason", "x"],
    "undrain": ["h1"],
    "unfence": ["h1:0", "--reason", "x"],
    "force-free": ["h1:0", "--reason", "x"],
    "notify": ["show"],
    "book": ["--for", "1h"],
    "unbook": ["1"],
}
"""The least each scheduler verb needs to get past its parser."""


def test_the_console_commands_are_the_ones_the_entry_point_knows() -> None:
    sub = next(a for a in console.parser()._actions if a.dest == "command")
    assert tuple(sub.choices) == entry.CONSOLE_COMMANDS  # type: ignore[arg-type]


def test_a_typo_lists_every_command_and_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    assert entry.main(["queu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui: unknown command 'queu'; did you mean: queue")
    words = err.replace(",", " ").split()
    assert {"submit", "claims", "force-free", "head", "health", "check-config"} <= set(words)
    assert all(len(line) <= 80 for line in err.splitlines())
    assert entry.main(["zzzzzz"]) == 2
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize("theme", [["--theme", "X"], ["--theme=gputui-dark"]])
def test_a_theme_before_a_scheduler_verb_is_named_as_the_problem(
    theme: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert entry.main([*theme, "queue"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputui: --theme is for the console") and "`gputui queue`" in err
    assert "invalid choice" not in err


def test_version_prints_before_any_parser(capsys: pytest.CaptureFixture[str]) -> None:
    assert entry.main(["--version"]) == 0
    assert capsys.readouterr().out == f"gputui {__version__}\n"
    assert entry.main(["--hosts", "/nowhere.yaml", "--version"]) == 0


@pytest.mark.parametrize("argv", [["--help"], ["queue", "--help"], ["claim", "--help"]])
def test_help_says_how_the_head_is_found(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        entry.main(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--socket PATH" in out and "$GPUTUI_HEAD_SOCKET" in out
    found = out[out.index("finding the head") :]
    order = ["1. --socket", "2. $GPUTUI_HEAD_SOCKET", "3. hosts.yaml", "4. /run/gputui/head.sock"]
    assert sorted(order, key=found.index) == order
    assert args.finding_the_head(str).splitlines()[0] in out


def _every_command() -> list[list[str]]:
    verbs = [[name, *SAMPLE_ARGS.get(name, [])] for name in args.VERBS]
    return [*verbs, [], ["console"], ["check-config"], ["helper", "--once"], ["head", "--check"]]


@pytest.mark.parametrize("command", _every_command(), ids=lambda c: " ".join(c) or "(none)")
@pytest.mark.parametrize("named_by", ["--hosts", "$GPUTUI_HOSTS"])
def test_a_named_hosts_file_that_is_not_there_is_a_usage_error_for_every_command(
    command: list[str],
    named_by: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Even with a socket given, a typo never falls back to another head: one line
    naming the file, exit 2, and no connection tried (the socket is not there)."""
    missing = tmp_path / "hsots.yaml"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUTUI_HEAD_SOCKET", raising=False)
    front = (
        ["--socket", str(tmp_path / "head.sock")] if command and command[0] in args.VERBS else []
    )
    if named_by == "--hosts":
        front += ["--hosts", str(missing)]
    else:
        monkeypatch.setenv("GPUTUI_HOSTS", str(missing))
    assert entry.main([*front, *command]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].endswith(
        f"{missing}: no such file" + ("" if named_by == "--hosts" else " (named by $GPUTUI_HOSTS)")
    ), err


@pytest.mark.parametrize("command", [["health"], ["incident", "h1"]])
def test_health_and_incident_say_it_with_their_could_not_run_status(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Their exit 2 means "critical" to a monitor: a missing file is their 3."""
    missing = tmp_path / "hsots.yaml"
    assert entry.main(["--hosts", str(missing), *command]) == 3
    assert capsys.readouterr().err == f"gputui {command[0]}: {missing}: no such file\n"


@pytest.mark.parametrize("late", [["--socket", "/x/head.sock"], ["--hosts=h.yaml"]])
def test_a_global_option_after_the_verb_is_said_to_go_before_it(
    late: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Seen as a new user: `gputui claims --socket PATH` answered only "unrecognized
    # arguments: --socket PATH".
    with pytest.raises(SystemExit) as ended:
        entry.main(["claims", *late])
    assert ended.value.code == 2
    name = late[0].split("=")[0]
    said = capsys.readouterr().err.splitlines()[-1]
    assert f"error: {name} goes before the verb: gputui {name} " in said
    assert said.endswith(" claims")
    with pytest.raises(SystemExit):
        entry.main(["claims", "--nonsense"])
    assert capsys.readouterr().err.splitlines()[-1].endswith("unrecognized arguments: --nonsense")
