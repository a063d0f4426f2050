"""Slurm's commands on a login node over SSH (``slurm.login``), as the calling user.

A real OpenSSH sshd on loopback is the login node; the real test Slurm is reached from
it (its ``SLURM_CONF`` set for logins by the sshd, as a login node's own
``/etc/slurm`` would be). The Slurm backend runs ``ssh`` (OpenSSH's client, with the
user's own ``~/.ssh/config``) for each command, so the jobs are the login user's.
"""

from __future__ import annotations

import os
import pwd
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Sshd, SshdProcess
from slurmcluster import SlurmCluster

from gputui.config.slurm import SlurmConfig
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm.backend import SlurmBackend
from gputui.scheduler.client.slurm.runner import Runner

pytestmark = pytest.mark.sshd


@pytest.fixture
def login(
    slurm: SlurmCluster,
    sshd: Sshd,
    make_sshd: Callable[..., SshdProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[SlurmBackend, Path]:
    """The Slurm backend on a login node over SSH, as ``sshd.user``; its known_hosts."""
    # The login node's own Slurm configuration, as /etc/slurm would give it.
    home = Path(pwd.getpwnam(sshd.user).pw_dir)
    (home / ".ssh").mkdir(mode=0o700, exist_ok=True)
    environment = home / ".ssh" / "environment"
    environment.write_text(f"SLURM_CONF={slurm.conf}\n", encoding="utf-8")
    for path in (home / ".ssh", environment):
        os.chown(path, sshd.uid, sshd.gid)
    node = make_sshd("PermitUserEnvironment yes")
    known = tmp_path / "known_hosts"
    client = tmp_path / "ssh_config"
    client.write_text(
        f"Host 127.0.0.1\n  IdentityFile {sshd.client_key_path}\n"
        f"  UserKnownHostsFile {known}\n  IdentitiesOnly yes\n",
        encoding="utf-8",
    )
    known.write_text(node.known_hosts_line(), encoding="utf-8")
    monkeypatch.delenv("SLURM_CONF", raising=False)  # only the login node knows Slurm
    conf = SlurmConfig.parse(
        {"login": f"{sshd.user}@127.0.0.1:{node.port}", "ssh_config": str(client)}
    )
    return SlurmBackend(Runner(conf.login, timeout_s=30, ssh_config=conf.ssh_config)), known


def _workdir(slurm: SlurmCluster, sshd: Sshd) -> Path:
    """A directory of the user's own for a job's output (``slurm-<id>.out``). Never a
    shared one such as /tmp: a fresh test Slurm numbers its jobs from 1 again, and a
    ``slurm-1.out`` an earlier run's user left there cannot be opened by this one,
    which Slurm reports as the job's launch failing (JobLaunchFailure)."""
    work = Path(tempfile.mkdtemp(dir=slurm.jobs))
    os.chown(work, sshd.uid, sshd.gid)
    return work


def _until_launched(slurm: SlurmCluster, job_id: int, output: Path) -> None:
    """Until Slurm has launched the job: its output file made (by the job, as its
    user); failing at once if the job ends instead."""
    deadline = time.monotonic() + 60
    while not output.exists():
        said = slurm.cmd("squeue", "-h", "-t", "all", "-j", str(job_id), "-o", "%T %r").stdout
        state = said.split()[:1]
        assert state in (["PENDING"], ["RUNNING"]), f"job {job_id} did not start: {said.strip()}"
        assert time.monotonic() < deadline, f"job {job_id} still {said.strip()} after 60 s"
        time.sleep(0.05)  # polling slurmctld until a deadline


def test_verbs_run_slurms_commands_on_the_login_node_as_the_user(
    slurm: SlurmCluster, sshd: Sshd, login: tuple[SlurmBackend, Path]
) -> None:
    backend, known = login
    work = _workdir(slurm, sshd)
    job = backend.submit(argv=["sleep", "30"], gpus=1, cwd=str(work))["job"]
    assert job["user"] == sshd.user  # Slurm's own word on whose it is
    output = work / f"slurm-{job['id']}.out"
    _until_launched(slurm, job["id"], output)  # as the user, its output in their directory
    assert output.stat().st_uid == sshd.uid
    listed = {j["id"]: j for j in backend.queue()["jobs"]}
    assert job["id"] in listed
    assert backend.cancel(job["id"])["job"]["state"] in ("CANCELLED", "COMPLETING")
    owner = slurm.cmd("squeue", "-h", "-t", "all", "-j", str(job["id"]), "-o", "%u").stdout
    assert owner.strip() == sshd.user
    # A login node that refuses us: one line, naming ssh's reason.
    known.write_text("", encoding="utf-8")
    with pytest.raises(HeadError) as refused:
        backend.queue()
    assert "\n" not in refused.value.message and "squeue" in refused.value.message


LOG = (
    "caf\u00e9 \u20ac \U0001f600\n".encode() + b"\xff\xfe \xe2\x82 x\n" + "\u00e9\u20ac\n".encode()
)
"""A job's output with characters of 2, 3 and 4 bytes, bytes that are not UTF-8, and
a character cut short: read over SSH in chunks that cut them anywhere."""


def test_logs_over_ssh_follow_by_bytes_and_print_what_the_file_says(
    slurm: SlurmCluster, sshd: Sshd, login: tuple[SlurmBackend, Path]
) -> None:
    backend, _ = login
    work = _workdir(slurm, sshd)
    (work / "out.bin").write_bytes(LOG)
    os.chmod(work / "out.bin", 0o644)
    job = backend.submit(argv=["cat", str(work / "out.bin")], gpus=1, cwd=str(work))["job"]
    backend.wait(job["id"], timeout=60)
    for chunk in (5, None):  # reads that cut characters; one read of it all
        printed, offset = [], 0
        while True:
            answer = backend.logs(job["id"], offset=offset, max_bytes=chunk)
            printed.append(answer["data"])
            assert answer["offset"] > offset or answer["offset"] == answer["size"]
            offset = answer["offset"]
            if offset >= answer["size"]:
                break
        assert offset == len(LOG)
        assert "".join(printed) == LOG.decode("utf-8", "replace")
