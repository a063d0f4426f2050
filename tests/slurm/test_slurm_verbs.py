"""gputui's verbs against a real single-node Slurm (``tests/slurmcluster.py``).

Each verb runs as a user would run it (``gputui VERB`` with a hosts.yaml whose
``slurm:`` section selects the Slurm backend); what Slurm then holds is read back
with Slurm's own commands, never through gputui. Permissions are Slurm's: a second
real Unix user's ``gputui cancel`` of the first user's job is refused by Slurm.
"""

from __future__ import annotations

import io
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from realusers import as_user, made_users
from slurmcluster import SlurmCluster

from gputui.cli import verbs

pytestmark = pytest.mark.root


@pytest.fixture
def hosts(slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = slurm.root / "hosts.yaml"
    path.write_text(
        "slurm:\n  refresh_s: 2\n  qos:\n    normal: normal\n  partitions:\n    a100: gpu\n",
        encoding="utf-8",
    )
    os.chmod(path, 0o644)
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.chdir(slurm.jobs)
    yield path


def gputui(hosts: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = verbs.main(["--hosts", str(hosts), *argv])
    return code, out.getvalue(), err.getvalue()


def state_of(slurm: SlurmCluster, job: int) -> str:
    return slurm.cmd("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T").stdout.strip()


def until(what: object, deadline_s: float = 30.0) -> None:
    """Poll ``what()`` (a question to Slurm) until it is true, or fail."""
    assert callable(what)
    end = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < end, "Slurm never got there"
        time.sleep(0.05)  # polling slurmctld until a deadline


def submit(hosts: Path, *argv: str) -> int:
    code, out, err = gputui(hosts, "submit", *argv)
    assert code == 0, err
    return int(out.strip())


def test_a_submitted_job_shows_in_queue_with_slurms_state_and_runs_on_its_gpus(
    slurm: SlurmCluster, hosts: Path
) -> None:
    job = submit(hosts, "-g", "2", "--name", "train", "--", "sh", "-c", "sleep 60")
    until(lambda: state_of(slurm, job) == "RUNNING")
    code, out, err = gputui(hosts, "queue")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.split()[:1] == [str(job)])
    assert "RUNNING" in row and "train" in row and " 2 " in row
    held = slurm.cmd("scontrol", "show", "job", "-d", str(job)).stdout
    assert "gres:gpu:2" in held or "gpu:2" in held
    code, out, _ = gputui(hosts, "show", str(job))
    assert code == 0
    assert "RUNNING" in out


def test_a_second_job_waits_with_slurms_reason(slurm: SlurmCluster, hosts: Path) -> None:
    first = submit(hosts, "-g", "4", "--", "sleep", "60")
    until(lambda: state_of(slurm, first) == "RUNNING")
    second = submit(hosts, "-g", "1", "--", "sleep", "60")
    until(lambda: slurm.cmd("squeue", "-h", "-j", str(second), "-o", "%r").stdout.strip() != "None")
    code, out, _ = gputui(hosts, "queue")
    assert code == 0
    row = next(line for line in out.splitlines() if line.split()[:1] == [str(second)])
    assert "PENDING" in row and "Resources" in row and "sleep" in row


def test_cancel_hold_release_and_requeue_change_slurms_state(
    slurm: SlurmCluster, hosts: Path
) -> None:
    blocker = submit(hosts, "-g", "4", "--", "sleep", "120")
    until(lambda: state_of(slurm, blocker) == "RUNNING")
    waiting = submit(hosts, "-g", "1", "--", "sleep", "60")
    assert gputui(hosts, "hold", str(waiting))[0] == 0
    reason = slurm.cmd("squeue", "-h", "-j", str(waiting), "-o", "%r").stdout.strip()
    assert reason in ("JobHeldUser", "JobHeldAdmin")  # root's hold is an admin's
    assert gputui(hosts, "release-hold", str(waiting))[0] == 0
    until(
        lambda: (
            not slurm.cmd("squeue", "-h", "-j", str(waiting), "-o", "%r")
            .stdout.strip()
            .startswith("JobHeld")
        )
    )
    code, out, err = gputui(hosts, "requeue", str(blocker))
    assert code == 0, err
    until(lambda: state_of(slurm, blocker) in ("PENDING", "REQUEUED", "CONFIGURING", "RUNNING"))
    restarts = slurm.cmd("scontrol", "show", "job", str(blocker)).stdout
    assert "Restarts=1" in restarts
    code, out, err = gputui(hosts, "cancel", str(waiting))
    assert code == 0, err
    until(lambda: state_of(slurm, waiting) == "CANCELLED")
    assert f"job {waiting}: " in out


def test_drain_and_undrain_change_the_nodes_state(slurm: SlurmCluster, hosts: Path) -> None:
    code, _out, err = gputui(hosts, "drain", slurm.node, "--reason", "fan failing")
    assert code == 0, err
    node = slurm.cmd("sinfo", "-h", "-N", "-o", "%T|%E").stdout.strip()
    state = node.split("|")[0].rstrip("*~#!%$@^-")  # Slurm marks e.g. not responding: *
    assert state in ("drained", "draining") and "fan failing" in node
    code, _, err = gputui(hosts, "drain", f"{slurm.node}:1", "--reason", "one card")
    assert code == 2 and "cannot drain one GPU" in err and len(err.splitlines()) == 1
    assert gputui(hosts, "undrain", slurm.node, "--reason", "fan replaced")[0] == 0
    until(lambda: slurm.cmd("sinfo", "-h", "-N", "-o", "%T").stdout.strip() == "idle")


def test_wait_returns_the_jobs_exit_code_and_logs_read_its_output(
    slurm: SlurmCluster, hosts: Path
) -> None:
    job = submit(hosts, "-g", "1", "--", "sh", "-c", "echo hello from slurm; exit 3")
    code, _, err = gputui(hosts, "wait", str(job))
    assert code == 3, err
    code, out, err = gputui(hosts, "logs", str(job))
    assert code == 0, err
    assert out == "hello from slurm\n"
    ok = submit(hosts, "-g", "1", "--", "true")
    assert gputui(hosts, "wait", str(ok))[0] == 0


def test_logs_follow_reads_the_output_until_the_job_ends(slurm: SlurmCluster, hosts: Path) -> None:
    script = "for i in 1 2 3; do echo line $i; sleep 0.3; done"
    job = submit(hosts, "-g", "1", "--", "sh", "-c", script)
    code, out, err = gputui(hosts, "logs", "-f", str(job))
    assert code == 0, err
    assert out == "line 1\nline 2\nline 3\n"


def test_another_user_cannot_cancel_your_job_and_sees_slurms_reason(
    slurm: SlurmCluster, hosts: Path
) -> None:
    job = submit(hosts, "-g", "1", "--", "sleep", "60")
    env = {"PATH": "/usr/bin:/bin", "SLURM_CONF": str(slurm.conf)}
    with made_users(1) as (mallory,):
        env["HOME"] = str(mallory.home)
        ran = as_user(mallory, gputui, hosts, "cancel", str(job), env=env)
    code, _, err = ran.value
    assert code == 1
    assert state_of(slurm, job) in ("RUNNING", "PENDING")
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Access/permission denied" in lines[0], err


def test_a_verb_slurm_cannot_do_says_so_in_one_line(slurm: SlurmCluster, hosts: Path) -> None:
    code, _, err = gputui(hosts, "audit")
    assert code == 1
    assert err.strip() == "gputui audit: the Slurm scheduler cannot show an audit trail"


def test_a_bad_slurm_section_is_one_line_naming_it(slurm: SlurmCluster, tmp_path: Path) -> None:
    bad = tmp_path / "hosts.yaml"
    bad.write_text("slurm:\n  refresh_s: 0.1\n", encoding="utf-8")
    code, _, err = gputui(bad, "queue")
    assert code == 3
    assert len(err.strip().splitlines()) == 1 and "slurm.refresh_s" in err


def test_explain_shows_a_pending_jobs_reason_and_its_factors(
    slurm: SlurmCluster, hosts: Path
) -> None:
    blocker = submit(hosts, "-g", "4", "--time", "30m", "--", "sleep", "120")
    until(lambda: state_of(slurm, blocker) == "RUNNING")
    waiting = submit(hosts, "-g", "2", "--time", "10m", "--name", "waiter", "--", "sleep", "60")
    until(
        lambda: slurm.cmd("squeue", "-h", "-j", str(waiting), "-o", "%r").stdout.strip() != "None"
    )
    factors = slurm.cmd("sprio", "-h", "-j", str(waiting), "-o", "%Y|%A").stdout.strip()
    code, out, err = gputui(hosts, "explain", str(waiting))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"job {waiting} (waiter) of root: PENDING"
    assert "reason: Resources: no node has enough free GPUs" in lines[1]
    total = factors.split("|")[0]
    assert any(line.startswith(f"  priority (sprio): {total} = age ") for line in lines), out
    share = "fair share (sshare): 1.000  account root" if slurm.accounting else "not kept"
    assert any(share in line for line in lines), out
    assert any("estimated start (squeue --start)" in line for line in lines), out
    code, out, _ = gputui(hosts, "explain", str(blocker))
    assert code == 0 and f"job {blocker} (sleep) of root: RUNNING" in out


def test_claim_is_an_allocation_that_env_names_and_release_ends(
    slurm: SlurmCluster, hosts: Path
) -> None:
    code, out, err = gputui(hosts, "claim", "-g", "2", "--note", "notebook")
    assert code == 0, err
    m = re.match(r"claim c(\d+): gpu(\d), gpu(\d) on (\S+)", out)
    assert m is not None, out
    job = int(m.group(1))
    assert state_of(slurm, job) == "RUNNING"
    assert slurm.cmd("squeue", "-h", "-j", str(job), "-o", "%j|%k").stdout.strip() == (
        "gputui-claim|notebook"
    )
    code, out, _ = gputui(hosts, "claims")
    assert code == 0 and f"c{job}" in out
    code, out, err = gputui(hosts, "env")
    assert code == 0 and out.strip() == f"export SLURM_JOB_ID={job}", (out, err)
    code, out, err = gputui(hosts, "release", f"c{job}")
    assert code == 0 and f"released c{job}" in out, err
    until(lambda: state_of(slurm, job) in ("CANCELLED", "COMPLETED", ""))
    code, out, err = gputui(hosts, "env")
    assert code == 1 and "no allocation of yours" in err
    code, out, err = gputui(hosts, "claim", "-g", "9", "--no-wait")
    assert code == 1 and len(err.strip().splitlines()) == 1, err


def test_run_is_srun_its_exit_is_the_commands_and_its_gpus_are_slurms(
    slurm: SlurmCluster, hosts: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    code, _, err = gputui(
        hosts, "run", "-g", "2", "--", "sh", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES; exit 4"
    )
    assert code == 4, err
    out = capfd.readouterr().out
    assert "CVD=0,1" in out
    code, _, err = gputui(hosts, "run", "-g", "1", "--", "-x")
    assert code == 2 and "not an option" in err


def test_usage_and_report_count_gpu_hours_from_slurms_accounting(
    slurm: SlurmCluster, hosts: Path
) -> None:
    if not slurm.accounting:
        pytest.skip("Slurm accounting not installed (Debian packages slurmdbd and mariadb-server)")
    job = submit(hosts, "-g", "2", "--", "sleep", "2")
    code, _, err = gputui(hosts, "wait", str(job))
    assert code == 0, err

    def recorded() -> bool:
        out = slurm.cmd("sacct", "-X", "-n", "-P", "-j", str(job), "-o", "State,Elapsed").stdout
        return out.startswith("COMPLETED|")

    until(recorded)
    elapsed = slurm.cmd("sacct", "-X", "-n", "-P", "-j", str(job), "-o", "ElapsedRaw").stdout
    want = 2 * int(elapsed.strip()) / 3600
    code, out, err = gputui(hosts, "usage", "--json", "--since", "1d")
    assert code == 0, err
    body = json.loads(out)
    root = next(r for r in body["totals"] if r["key"] == "root")
    assert root["alloc_gpu_h"] >= want - 1e-6 and root["busy_gpu_h"] is None
    code, out, err = gputui(hosts, "usage", "--since", "1d")
    assert code == 0 and "not known: busy hours" in out, err
    line = next(line for line in out.splitlines() if line.startswith("root"))
    assert line.split()[2] == "-"  # busy: not kept by Slurm, never a 0
    code, out, err = gputui(hosts, "report")
    assert code == 0 and "GPU report (Slurm)" in out, err
    # Among the top users: first or not, by the jobs the other tests on this cluster
    # ran before this one (their users' jobs, however long they ran, against root's).
    top = next(line for line in out.splitlines() if line.startswith("- Top users: "))
    assert re.search(r"[:,] root \d+\.\d GPU-h", top), top


def test_run_pty_asks_srun_for_slurms_own_terminal() -> None:
    """``gputui run --pty`` on Slurm is ``srun --pty`` (Slurm keeps the terminal; the
    head's own ``attach`` is for the head's jobs)."""
    from gputui.scheduler.client.slurm.backend import SlurmBackend
    from gputui.scheduler.client.slurm.runner import Runner

    backend = SlurmBackend(Runner("local"))
    assert "--pty" in backend.srun_argv(["bash"], gpus=1, pty=True)
    assert "--pty" not in backend.srun_argv(["bash"], gpus=1)
