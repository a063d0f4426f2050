"""A scheduler verb runs on every shell call: it must not pay for the heavy imports,
nor for the modules of the other verbs.

Checked in fresh interpreters, with ``-X importtime`` (every module the process
imported, whatever imported it) for ``--help``, for a call that cannot reach the
head and for a real submission to a live head; and by ``sys.modules`` as the
process ends, for which of ``gputui.cli``'s verb modules each verb loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from headthread import ThreadedHead

HEAVY = frozenset(
    {"textual", "rich", "pydantic", "sqlalchemy", "sqlmodel", "alembic", "asyncssh", "yaml"}
)
"""The console's and the daemon's libraries; ``asyncio`` is checked apart (see below)."""


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Top-level names of every module ``gputui ARGS`` imported, and how it ended."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gputui.entry", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "package":
                names.add(name.split(".")[0])
    assert "gputui" in names, done.stderr[-2000:]
    return names, done


def other_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if not line.startswith("import time:")]


@pytest.mark.parametrize("verb", ["submit", "claim", "queue", "release", "run", "logs"])
def test_a_verbs_help_imports_nothing_heavy(verb: str) -> None:
    names, done = imported(verb, "--help")
    assert done.returncode == 0, other_lines(done)
    assert names & HEAVY == set()
    assert "asyncio" not in names


def test_version_imports_nothing_heavy() -> None:
    """``gputui --version`` took 0.2 s (1.7 s on a cold cache) for the console's parser
    and config models; it is answered before any of them is imported."""
    names, done = imported("--version")
    assert done.returncode == 0 and done.stdout.startswith("gputui "), other_lines(done)
    assert names & (HEAVY | {"asyncio", "argparse"}) == set()


def test_a_verb_that_cannot_reach_the_head_stays_light(tmp_path: Path) -> None:
    names, done = imported("--socket", str(tmp_path / "nobody.sock"), "queue")
    assert done.returncode == 3
    assert other_lines(done) == [
        f"gputui queue: head unreachable at {tmp_path / 'nobody.sock'}: "
        "no socket there; is `gputui head` running?"
    ]
    assert names & HEAVY == set()


def test_a_real_submission_stays_light(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 2}) as th:
        names, done = imported(
            "--socket", str(th.sock), "submit", "--json", "-g", "1", "python", "train.py"
        )
        assert done.returncode == 0, other_lines(done)
        job = json.loads(done.stdout)
        assert th.rows("SELECT name, gpus FROM job WHERE id = ?", job["id"]) == [("train.py", 1)]
    assert names & HEAVY == set()
    assert "asyncio" not in names


def test_importing_the_verbs_modules_loads_nothing_heavy() -> None:
    code = (
        "import json, sys; import gputui.cli.verbs, gputui.cli.jobs, gputui.cli.claims,"
        " gputui.cli.run; print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = {m.split(".")[0] for m in json.loads(done.stdout)}
    assert loaded & (HEAVY | {"asyncio"}) == set()
    assert not any(m.startswith("gputui.scheduler.head.daemon") for m in json.loads(done.stdout))


# -- each verb loads its own module, and no other verb's --------------------------------

VERB_MODULES = frozenset(
    f"gputui.cli.{name}"
    for name in (
        "verbs", "jobs", "claims", "run", "records", "policy", "usage", "drain", "forcefree",
        "history", "head", "console", "check_config", "demo", "health", "incident",
    )
)  # fmt: skip
"""The modules of ``gputui.cli`` that run a verb or a group of verbs (the shared ones,
``args``, ``tables``, ``listing``, ``here``, ..., are not in it)."""

NEVER_FOR_A_CLIENT = ("textual", "sqlalchemy", "sqlmodel", "alembic", "asyncssh", "asyncio")
"""What a scheduler verb never loads: the console, the store, SSH, the asyncio client."""

_LOADED_AT_EXIT = """\
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from gputui.entry import main
sys.exit(main(sys.argv[1:]))
"""


def loaded_at_exit(tmp_path: Path, *args: str) -> tuple[set[str], int]:
    """Every module ``gputui ARGS`` had loaded when it ended (``--help`` ends inside
    argparse: ``atexit`` still sees it), and its exit status."""
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _LOADED_AT_EXIT, str(out), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.exists(), done.stderr[-2000:]
    return set(json.loads(out.read_text())), done.returncode


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize(
    ("args", "modules"),
    [
        (["queue", "--help"], {"verbs"}),
        (["submit", "--help"], {"verbs"}),
        (["usage", "--help"], {"verbs"}),
        (["run", "--help"], {"verbs"}),
        (["queue"], {"verbs", "jobs"}),
        (["claims"], {"verbs", "claims"}),
        (["usage"], {"verbs", "usage"}),
        (["history", "--help"], {"verbs"}),
        (["history"], {"verbs", "history"}),
        (["force-free", "gpu01:0", "--reason", "stuck"], {"verbs", "forcefree"}),
    ],
)
def test_a_scheduler_verb_loads_its_own_module_and_no_other_verbs(
    tmp_path: Path, args: list[str], modules: set[str]
) -> None:
    loaded, code = loaded_at_exit(tmp_path, "--socket", str(tmp_path / "nobody.sock"), *args)
    assert code == (0 if "--help" in args else 3)  # --help, or the head is not there
    assert loaded & VERB_MODULES == {f"gputui.cli.{m}" for m in modules}
    assert top_level(loaded) & set(NEVER_FOR_A_CLIENT) == set()
    assert "gputui.scheduler.client.aio" not in loaded
    assert not any(
        m.startswith(
            ("gputui.scheduler.head.daemon", "gputui.config.models", "gputui.config.loader")
        )
        for m in loaded
    )


def test_gputui_head_help_loads_the_daemons_command_line_only(tmp_path: Path) -> None:
    loaded, code = loaded_at_exit(tmp_path, "head", "--help")
    assert code == 0
    assert loaded & VERB_MODULES == {"gputui.cli.head"}
    assert top_level(loaded) & {"textual", "asyncssh"} == set()


@pytest.mark.parametrize("command", ["check-config", "health", "incident", "demo", "helper"])
def test_a_console_commands_help_loads_none_of_the_commands(tmp_path: Path, command: str) -> None:
    """The console's parser knows every command; their modules (the health probe, the
    demo, the timeline) load only when one of them runs."""
    loaded, code = loaded_at_exit(tmp_path, command, "--help")
    assert code == 0
    assert loaded & VERB_MODULES == {"gputui.cli.console"}
    assert top_level(loaded) & {"textual", "asyncssh", "sqlalchemy", "sqlmodel"} == set()


def test_check_config_loads_its_own_module_and_not_the_probes(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("hosts:\n  - name: gpu01\n    sim: 2xa100-80gb\n")
    hosts.chmod(0o600)
    loaded, code = loaded_at_exit(tmp_path, "check-config", str(hosts))
    assert code == 0
    # (its themes' check loads Textual's, and its VIA column reads ssh_config with asyncssh)
    assert loaded & VERB_MODULES == {"gputui.cli.console", "gputui.cli.check_config"}
    assert top_level(loaded) & {"sqlalchemy", "sqlmodel"} == set()


@pytest.mark.parametrize(
    "argv", [["--help"], ["check-config", "--help"], ["health", "--help"], ["zzzz"]]
)
def test_the_consoles_help_loads_no_config_models_textual_or_asyncio(argv: list[str]) -> None:
    """``gputui --help`` took 0.25 s of CPU for the config models, Textual's themes and
    asyncio; the console loads them when it runs, not to say how it is used."""
    names, done = imported(*argv)
    assert done.returncode == (2 if argv == ["zzzz"] else 0), other_lines(done)
    assert names & HEAVY == set()
    assert "asyncio" not in names
