"""``scripts/install-team`` (``make install-team``): one install every user of the
machine runs. It is installed into a temporary prefix, as root, and then run as a
second, freshly made Unix user who can read nothing of root's: ``--version``, a
real verb (``check-config`` on a hosts file of their own) and the head's unit, which
must start the team's install."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from realusers import User, as_user, made_users

from gputui import __version__

pytestmark = [pytest.mark.root]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-team"


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="gputui-team-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _run_as(user: User, argv: list[str], cwd: str) -> tuple[int, str, str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.timeout(300)
def test_a_team_install_runs_for_another_user(shared_dir: Path) -> None:
    prefix, bindir = shared_dir / "opt" / "gputui", shared_dir / "bin"
    build_files = ("build", "dist", "gputui.egg-info")
    before = {name for name in build_files if (ROOT / name).exists()}
    done = subprocess.run(
        [str(SCRIPT), "--prefix", str(prefix), "--bindir", str(bindir)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    gputui = bindir / "gputui"
    assert gputui.is_symlink() and os.readlink(gputui) == str(prefix / "bin" / "gputui")
    # Everyone reads (and runs) everything; only the installer writes.
    for path in [prefix, *prefix.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        assert mode & stat.S_IROTH, f"{path} is not world-readable"
        assert not mode & stat.S_IWOTH, f"{path} is world-writable"
        if path.is_dir():
            assert mode & stat.S_IXOTH, f"{path} is not world-searchable"
    # The wheel was built from a copy: the checkout got no build files.
    assert {name for name in build_files if (ROOT / name).exists()} == before

    with made_users(1, "gtt") as (user,):
        hosts = user.home / "hosts.yaml"
        hosts.write_text("hosts:\n  - {name: sim01, sim: 2xa100-80gb}\n", encoding="utf-8")
        os.chown(hosts, user.uid, user.gid)
        argv_version = [str(gputui), "--version"]
        argv_check = [str(gputui), "check-config", str(hosts)]
        argv_unit = [str(gputui), "head", "--print-unit"]
        version = as_user(user, _run_as, user, argv_version, str(user.home)).value
        check = as_user(user, _run_as, user, argv_check, str(user.home)).value
        unit = as_user(user, _run_as, user, argv_unit, str(user.home)).value
    assert version == (0, f"gputui {__version__}\n", ""), version
    assert check[0] == 0 and f"{hosts}: OK" in check[1], check
    assert "hosts     1 (1 simulated)" in check[1], check
    assert unit[0] == 0, unit
    assert f"ExecStart={prefix / 'bin' / 'gputui'} head" in unit[1], unit[1]


def test_an_interpreter_other_users_cannot_run_is_refused(shared_dir: Path) -> None:
    """A Python under a 0700 home (pyenv's, say) would give everyone else a venv that
    does not start: refused, saying why, before anything is installed."""
    hidden = shared_dir / "home"
    hidden.mkdir(mode=0o700)
    python = hidden / "python3"
    shutil.copy2(os.path.realpath(sys.executable), python)
    done = subprocess.run(
        [str(SCRIPT), "--prefix", str(shared_dir / "p"), "--python", str(python)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"other users cannot read {hidden} (mode drwx------)" in done.stderr, done.stderr
    assert not (shared_dir / "p").exists()
