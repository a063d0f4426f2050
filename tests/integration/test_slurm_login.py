"""Slurm's commands on a login node over SSH (``slurm.login``), as the calling user.

A real OpenSSH sshd on loopback is the login node; the real test Slurm is reached from
it (its ``SLURM_CONF`` set for logins by the sshd, as a login node's own
``/etc/slurm`` would be). The Slurm backend runs ``ssh`` (OpenSSH's client, with the
user's own ``~/.ssh/config``) for each command, so the jobs are the login user's.
"""

from __future__ import annotations

import os
import pwd
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


def test_verbs_run_slurms_commands_on_the_login_node_as_the_user(
    slurm: SlurmCluster,
    sshd: Sshd,
    make_sshd: Callable[..., SshdProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The login node's own Slurm configuration, as /etc/slurm would give it.
    home = Path(pwd.getpwnam(sshd.user).pw_dir)
    (home / ".ssh").mkdir(mode=0o700, exist_ok=True)
    environment = home / ".ssh" / "environment"
    environment.write_text(f"SLURM_CONF={slurm.conf}\n", encoding="utf-8")
    for path in (home / ".ssh", environment):
        os.chown(path, sshd.uid, sshd.gid)
    login = make_sshd("PermitUserEnvironment yes")
    known = tmp_path / "known_hosts"
    client = tmp_path / "ssh_config"
    client.write_text(
        f"Host 127.0.0.1\n  IdentityFile {sshd.client_key_path}\n"
        f"  UserKnownHostsFile {known}\n  IdentitiesOnly yes\n",
        encoding="utf-8",
    )
    known.write_text(login.known_hosts_line(), encoding="utf-8")
    monkeypatch.delenv("SLURM_CONF", raising=False)  # only the login node knows Slurm
    conf = SlurmConfig.parse(
        {"login": f"{sshd.user}@127.0.0.1:{login.port}", "ssh_config": str(client)}
    )
    backend = SlurmBackend(Runner(conf.login, timeout_s=30, ssh_config=conf.ssh_config))
    job = backend.submit(argv=["sleep", "30"], gpus=1, cwd="/tmp")["job"]
    assert job["user"] == sshd.user  # Slurm's own word on whose it is
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
