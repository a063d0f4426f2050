"""The job pieces one at a time, in-process: logind, systemd-run, users, the store."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jobkit import NS, kill_jobs, launch_fields, script, wait_until

from gputui.remote import ptyterm, supervisor
from gputui.remote.jobfs import LIST_MAX, JobStore, jobs_root, whole_characters
from gputui.remote.jobops import JobService, supervisor_sources
from gputui.remote.launch import SIM_SCOPE, Logind, User, job_env, resolve_user
from gputui.remote.signals import RequestError
from gputui.remote.sim.env import ENV_SCOPE

SESSION_CGROUP = "0::/user.slice/user-1000.slice/session-4.scope\n"
SERVICE_CGROUP = "0::/system.slice/ssh.service\n"


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "jobs"
    yield root
    kill_jobs(root)


def _fake_bin(tmp_path: Path, kill: str, systemd_run_works: bool = True) -> Path:
    """``loginctl`` answering KillUserProcesses=<kill>, and a ``systemd-run`` that runs
    its command in place (as --scope does) and notes how it was called."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "loginctl").write_text(f"#!/bin/sh\necho KillUserProcesses={kill}\n")
    calls = tmp_path / "systemd-run.calls"
    if systemd_run_works:
        body = f'echo "$@" >> {calls}\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'
    else:
        body = f'echo "$@" >> {calls}\necho "Failed to connect to bus" >&2\nexit 1\n'
    (bin_dir / "systemd-run").write_text("#!/bin/sh\n" + body)
    for name in ("loginctl", "systemd-run"):
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _logind(tmp_path: Path, cgroup: str, bin_dir: Path) -> Logind:
    path = tmp_path / "cgroup"
    path.write_text(cgroup)
    return Logind(cgroup=str(path), path=str(bin_dir))


def test_logind_decides_when_a_scope_is_needed(tmp_path: Path) -> None:
    kills = _fake_bin(tmp_path / "a", "yes")
    spares = _fake_bin(tmp_path / "b", "no")
    assert _logind(tmp_path, SESSION_CGROUP, kills).method(1000) == "systemd-run"
    assert _logind(tmp_path, SESSION_CGROUP, kills).systemd_run is None  # not yet asked
    logind = _logind(tmp_path, SESSION_CGROUP, kills)
    logind.method(1000)
    assert logind.systemd_run == str(kills / "systemd-run")
    assert _logind(tmp_path, SESSION_CGROUP, kills).method(0) == "detached"  # root
    assert _logind(tmp_path, SERVICE_CGROUP, kills).method(1000) == "detached"  # no session
    assert _logind(tmp_path, SESSION_CGROUP, spares).method(1000) == "detached"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _logind(tmp_path, SESSION_CGROUP, empty).method(1000) == "detached"  # no systemd
    assert Logind(cgroup=str(tmp_path / "missing")).method(1000) == "detached"


class _ScopeNeeded(Logind):
    """What a non-root helper inside a KillUserProcesses session decides."""

    def method(self, euid: int) -> str:
        self.systemd_run = str(Path(self.path or "") / "systemd-run")
        return "systemd-run"


def test_launch_through_systemd_run_and_back_to_detached(tmp_path: Path, root: Path) -> None:
    scope = _ScopeNeeded(path=str(_fake_bin(tmp_path, "yes")))
    service = JobService(False, str(root), logind=scope)
    job = service.launch(launch_fields(1, script("print('in scope')")))
    assert (job["method"], job["already"]) == ("systemd-run", False)
    calls = (tmp_path / "systemd-run.calls").read_text()
    assert calls.startswith("--user --scope --quiet -- ")
    assert json.loads((root / NS / "1" / "state.json").read_text())["method"] == "systemd-run"
    wait_until(lambda: service.jobs({"ns": NS, "job_ids": [1]})["jobs"][0]["state"] == "exited")
    assert service.job_log({"ns": NS, "job_id": 1, "offset": 0})["data"] == "in scope\n"
    again = service.launch(launch_fields(1, script("pass")))
    assert (again["method"], again["already"]) == ("systemd-run", True)

    broken = tmp_path / "broken"
    broken.mkdir()
    failing = _ScopeNeeded(path=str(_fake_bin(broken, "yes", systemd_run_works=False)))
    job = JobService(False, str(root), logind=failing).launch(launch_fields(2, script("pass")))
    assert job["method"] == "detached" and job["state"] in ("running", "exited"), job
    assert (broken / "systemd-run.calls").exists()


def test_only_root_starts_jobs_as_someone_else() -> None:
    with pytest.raises(RequestError) as info:
        resolve_user("root", euid=4242)
    assert info.value.code == "not-permitted" and "cannot start jobs as root" in info.value.message
    user, switch = resolve_user("root", euid=0)
    assert (user.uid, switch) == (0, False)
    with pytest.raises(RequestError) as info:
        resolve_user("no-such-user-gputui", euid=0)
    assert info.value.code == "bad-request"
    me, switch = resolve_user(None, os.geteuid())
    assert (me.uid, switch) == (os.geteuid(), False)


def test_jobs_root_follows_the_contract() -> None:
    assert jobs_root({"GPUTUI_JOBS_ROOT": "/srv/j"}, euid=0) == "/srv/j"
    assert jobs_root({}, euid=0) == "/var/lib/gputui/jobs"
    assert jobs_root({"XDG_STATE_HOME": "/x/state"}, euid=1000) == "/x/state/gputui/jobs"
    home = os.path.expanduser("~")
    assert jobs_root({"XDG_STATE_HOME": "rel"}, euid=1000) == f"{home}/.local/state/gputui/jobs"


def test_whole_characters_never_cuts_a_sequence() -> None:
    text = "aé✓🔥"
    data = text.encode()
    for end in range(len(data) + 1):
        kept = whole_characters(data[:end])
        assert data.startswith(kept) and kept.decode() == text[: len(kept.decode())]
        assert end - len(kept) < 4
    assert whole_characters(b"\xf0\x9f") == b"\xf0\x9f"  # nothing whole: passed on as is


def test_the_supervisor_sources_are_the_modules_themselves() -> None:
    assert supervisor_sources() == [
        Path(ptyterm.__file__).read_text(encoding="utf-8"),
        Path(supervisor.__file__).read_text(encoding="utf-8"),
    ]
    compile(supervisor.BOOTSTRAP, "<bootstrap>", "exec")


def _plant(root: Path, job_id: int, **raw: object) -> Path:
    folder = root / NS / str(job_id)
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps(raw))
    return folder / "state.json"


def test_lost_needs_the_same_boot_and_a_live_supervisor(tmp_path: Path) -> None:
    root = tmp_path / "jobs"  # planted states name this very process: no kill_jobs here
    me = supervisor.proc_stat(os.getpid())
    assert me is not None
    alive = {"supervisor_pid": os.getpid(), "supervisor_ticks": me[1], "state": "running"}
    _plant(root, 1, **alive, boot_id=supervisor.boot_id())
    _plant(root, 2, **alive, boot_id="another-boot")
    _plant(root, 3, **dict(alive, supervisor_ticks=me[1] + 1))
    stale = _plant(root, 4)
    stale.write_bytes(b'{"state": "runn')  # torn, and old
    os.utime(stale, (time.time() - 60, time.time() - 60))
    (root / NS / "5").mkdir()
    (root / NS / "5" / "state.json").write_bytes(b"")  # torn, but fresh: starting
    states = {j["job_id"]: j["state"] for j in JobStore(str(root)).jobs(NS)}
    assert states == {1: "running", 2: "lost", 3: "lost", 4: "lost", 5: "starting"}


def test_a_listing_is_capped_and_skips_what_is_not_a_job(tmp_path: Path) -> None:
    root = tmp_path / "jobs"
    base = root / NS
    base.mkdir(parents=True)
    for job_id in range(1, LIST_MAX + 11):
        (base / str(job_id)).mkdir()
        (base / str(job_id) / "state.json").write_text('{"state": "exited", "exit_code": 0}')
    for junk in ("007", "x1", "9" * 17, "forgotten.tmp"):
        (base / junk).mkdir()
    (base / "forgotten").write_text("1\n2\nnonsense\n-3\n")
    listed = [j["job_id"] for j in JobStore(str(root)).jobs(NS)]
    assert listed == list(range(11, LIST_MAX + 11))
    assert [j["exit_code"] for j in JobStore(str(root)).jobs(NS, [1, 12])] == [0, 0]


def test_a_simulated_job_is_its_own_simulators_whatever_the_request_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The helper's simulator scope (see simenv) goes to the jobs it starts in sim
    mode, over any a request names; a real job gets none from the helper."""
    user = User("u", 1000, 1000, "/home/u", "/bin/sh")
    asked = {"GPUTUI_SIM_SCOPE": "theirs"}
    monkeypatch.setenv("GPUTUI_SIM_SCOPE", "mine")
    assert job_env(user, asked, ["GPU-1"], 7, True)["GPUTUI_SIM_SCOPE"] == "mine"
    assert "GPUTUI_SIM_SCOPE" not in job_env(user, {}, ["GPU-1"], 7, False)
    monkeypatch.delenv("GPUTUI_SIM_SCOPE")
    assert "GPUTUI_SIM_SCOPE" not in job_env(user, asked, ["GPU-1"], 7, True)
    assert SIM_SCOPE == ENV_SCOPE
