"""``gputui queue`` in front of a real Slurm (``tests/slurmcluster.py``) is a new
process on every shell call: its cost over ``squeue`` is its start-up. It loads the
queue verb's own modules and none of the console's (Textual, Rich), the store's
(SQLModel, SQLAlchemy, Alembic), the config models' (pydantic), SSH's or asyncio;
and it starts ``squeue`` before it loads what only reading the answer needs (the
verb's module, the backend protocols), so those load while Slurm answers.

Checked in a fresh interpreter, by ``sys.modules`` when ``squeue`` is started (an
audit hook on ``subprocess.Popen``) and when the process ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from slurmcluster import SlurmCluster

pytestmark = pytest.mark.root

NEVER_FOR_A_VERB = frozenset(
    {"textual", "rich", "pydantic", "sqlalchemy", "sqlmodel", "alembic", "asyncssh", "asyncio"}
)

_WATCHED = """\
import atexit, json, sys
out = sys.argv.pop(1)
seen = {}

def hook(event, args):
    if event == "subprocess.Popen" and "squeue" in str(args[1]) and "squeue" not in seen:
        seen["squeue"] = sorted(sys.modules)
        seen["argv"] = [str(a) for a in args[1]]

sys.addaudithook(hook)
atexit.register(lambda: open(out, "w").write(json.dumps({**seen, "end": sorted(sys.modules)})))
from gputui.entry import main
sys.exit(main(sys.argv[1:]))
"""


def test_gputui_queue_on_slurm_loads_the_verbs_modules_only_and_asks_slurm_first(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    job = int(slurm.cmd("sbatch", "--parsable", "-H", "-J", "held", "--wrap", "true").stdout)
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("slurm:\n  refresh_s: 2\n", encoding="utf-8")
    os.chmod(hosts, 0o644)
    out = tmp_path / "modules.json"

    def queue(*args: str, listed_here: bool = True) -> dict[str, list[str]]:
        done = subprocess.run(
            [sys.executable, "-c", _WATCHED, str(out), "--hosts", str(hosts), "queue", *args],
            env={**os.environ, **slurm.env},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        if listed_here:
            listed = [line.split()[:1] for line in done.stdout.splitlines()]
            assert [str(job)] in listed, done.stdout
        else:
            assert [j["id"] for j in json.loads(done.stdout)] == [job]
        seen: dict[str, list[str]] = json.loads(out.read_text())
        return seen

    seen = queue()
    at_end = set(seen["end"])
    assert {m.split(".")[0] for m in at_end} & NEVER_FOR_A_VERB == set()
    assert {m for m in at_end if m.startswith("gputui.cli.")} <= {
        "gputui.cli.args", "gputui.cli.verbs", "gputui.cli.jobs", "gputui.cli.tables",
        "gputui.cli.layout", "gputui.cli.listing", "gputui.cli.qformat", "gputui.cli.flagged",
        "gputui.cli.slurm_front",
    }  # fmt: skip
    assert not any(m.startswith(("gputui.config.models", "gputui.config.loader")) for m in at_end)
    at_squeue = set(seen["squeue"])
    assert "gputui.cli.jobs" not in at_squeue
    assert "gputui.scheduler.client.backend" not in at_squeue
    # The next call finds hosts.yaml as it was read: no YAML is loaded, and a bare
    # ``queue`` starts ``squeue`` before its command line is parsed.
    again = set(queue()["squeue"])
    assert "yaml" not in again
    assert "argparse" not in again  # nor the verbs' command line
    # Slurm's commands run here: squeue starts before the section's model, the Slurm
    # backend and its parsers load (its command line holds nothing from hosts.yaml).
    for later in ("dataclasses", "gputui.config.slurm", "gputui.scheduler.client.slurm.parse"):
        assert later not in again, later
    # With options, the parser first, then the same listing.
    assert "yaml" not in set(queue("--all")["squeue"])
    # The table asks Slurm only for what it shows (no group name looked up for each
    # job); ``--json`` gives every field.
    fmt = seen["argv"][-1]
    assert "%u" in fmt and "%j" in fmt and "%g" not in fmt and "%k" not in fmt
    assert "%g" not in queue("--all")["argv"][-1]
    whole = queue("--json", listed_here=False)["argv"][-1]
    assert "%g" in whole and "%k" in whole


_ENDS = """\
import atexit, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("torn down"))
from gputui.entry import entry
entry()
"""


def test_the_gputui_command_prints_the_whole_queue_and_skips_the_teardown(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """``gputui queue`` as its console script runs it (``entry``): every line written
    out, and the process ends without Python's teardown (``entry.QUICK_EXIT``)."""
    jobs = [
        int(slurm.cmd("sbatch", "--parsable", "-H", "-J", f"held{i}", "--wrap", "true").stdout)
        for i in range(3)
    ]
    hosts = tmp_path / "hosts.yaml"
    hosts.write_text("slurm:\n  refresh_s: 2\n", encoding="utf-8")
    marker = tmp_path / "teardown"
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-c", _ENDS, str(marker), "--hosts", str(hosts), "queue"],
        env={**buffered, **slurm.env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].split()[:2] == ["JOBID", "USER"]
    assert [int(line.split()[0]) for line in lines[1:]] == jobs
    assert not marker.exists()
    # Output that cannot be written: one line and Python's exit status for it.
    with open("/dev/full", "w") as full:
        failed = subprocess.run(
            [sys.executable, "-c", _ENDS, str(marker), "--hosts", str(hosts), "queue"],
            env={**buffered, **slurm.env},
            cwd=tmp_path,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert failed.returncode == 120
    assert failed.stderr == "gputui: cannot write the output: No space left on device\n"
    assert not marker.exists()
    # Any other command ends as Python ends.
    subprocess.run(
        [sys.executable, "-c", _ENDS, str(marker), "--version"], check=True, capture_output=True
    )
    assert marker.read_text() == "torn down"
