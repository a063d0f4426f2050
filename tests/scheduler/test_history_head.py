"""``history`` through the running head and the real CLI: jobs that run and end on a
scripted host, metered by the daemon's meter (samples 10 s apart on a clock the test
moves, so every figure is known), each job's GPU-hours, busy share and energy adding
up to ``usage``'s for the same range, what the meter has not flushed yet included,
what it counted stored at shutdown, and the table in 80 columns.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, poll, refusal
from test_accounting_head import T0, Metered

from gputui.cli.history import HEADER
from gputui.scheduler.head.actions import run_key

GPUTUI = [sys.executable, "-m", "gputui.entry"]
LONG = "a-very-long-job-name-" * 6


def cli(sock: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(sock), COLUMNS=str(columns))
    return subprocess.run(
        [*GPUTUI, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def _state(c: LineClient, job_id: int) -> str:
    return str(c.ok("show", {"job_id": job_id})["job"]["state"])


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Metered, dict[str, int]]]:
    """Two jobs on gpu01's two GPUs for 60 s: ``busy`` computes at 100 W and exits 0,
    ``idle`` sits at 0 % and 40 W and exits 3; ``never`` is cancelled while queued.
    The meter never flushes in this head's life: every busy second and joule is
    still the meter's when ``history`` is asked."""
    with Metered(tmp_path_factory.mktemp("head"), meter_flush_s=3600.0) as m:
        th, hosts = m.th, m.th.hosts
        assert hosts is not None
        with LineClient(th.sock) as c:
            busy = c.ok("submit", {"argv": ["train"], "gpus": 1, "name": LONG, "cwd": "/"})
            busy_id = busy["job"]["id"]
            poll(lambda: _state(c, busy_id) in ("starting", "running"), what="busy placed")
            idle = c.ok("submit", {"argv": ["eval"], "gpus": 1, "name": "idle", "cwd": "/"})
            idle_id = idle["job"]["id"]
            poll(lambda: _state(c, idle_id) in ("starting", "running"), what="idle placed")
            never = c.ok("submit", {"argv": ["x"], "gpus": 2, "name": "never", "cwd": "/"})
            never_id = never["job"]["id"]
            gpus = {
                j: c.ok("show", {"job_id": j})["job"]["gpu_uuids"][0] for j in (busy_id, idle_id)
            }
            m.load(gpus[busy_id], 50, 100.0)
            m.load(gpus[idle_id], 0, 40.0)
            for gpu in gpus.values():
                m.held(gpu)
            for step in range(1, 7):
                m.sample_at(T0 + 10 * step, tuple(gpus.values()))
            c.ok("cancel", {"job_id": never_id}, rid="cancel-never")
            for job_id, code in ((busy_id, 0), (idle_id, 3)):
                th.in_loop(
                    lambda j=job_id, x=code: hosts.finish(
                        "gpu01", run_key(j, 1), exit_code=x, ended_at=T0 + 60
                    )
                )
            poll(lambda: _state(c, busy_id) == "completed", what="busy to end")
            poll(lambda: _state(c, idle_id) == "failed", what="idle to end")
            for gpu in gpus.values():
                m.held(gpu, False)
            m.sample_at(T0 + 70, tuple(gpus.values()))  # after the end: charged to no job
        yield m, {"busy": busy_id, "idle": idle_id, "never": never_id}


def _by_id(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(j["id"]): j for j in result["jobs"]}


def test_each_finished_job_has_its_exit_gpu_hours_busy_share_and_energy(
    ran: tuple[Metered, dict[str, int]],
) -> None:
    m, ids = ran
    with LineClient(m.th.sock) as c:
        result = c.ok("history", {"since": T0 - 3600, "until": T0 + 3600})
    jobs = _by_id(result)
    assert set(jobs) == {ids["busy"], ids["idle"], ids["never"]}
    assert [j["id"] for j in result["jobs"]] == sorted(jobs, reverse=True)  # newest end first
    busy, idle, never = jobs[ids["busy"]], jobs[ids["idle"]], jobs[ids["never"]]
    assert (busy["state"], busy["exit_code"]) == ("completed", 0)
    assert (idle["state"], idle["exit_code"]) == ("failed", 3)
    assert never["state"] == "cancelled" and never["gpu_h"] == 0.0
    assert busy["gpu_h"] == pytest.approx(60 / 3600, abs=1e-6)
    assert busy["busy_share"] == pytest.approx(1.0)
    assert busy["energy_kwh"] == pytest.approx(6000 / 3.6e6, abs=1e-6)  # 100 W x 60 s
    assert idle["gpu_h"] == pytest.approx(60 / 3600, abs=1e-6)
    assert idle["busy_share"] == 0.0
    assert idle["energy_kwh"] == pytest.approx(2400 / 3.6e6, abs=1e-6)  # 40 W x 60 s
    assert never["busy_share"] is None  # no GPU time: no share of it


def test_the_jobs_add_up_to_usage_for_the_same_range(ran: tuple[Metered, dict[str, int]]) -> None:
    m, _ = ran
    span = {"since": T0 - 3600, "until": T0 + 3600}
    with LineClient(m.th.sock) as c:
        jobs = c.ok("history", span)["jobs"]
        (total,) = c.ok("usage", {**span, "by": "user"})["totals"]
    near = len(jobs) * 1e-6  # each figure rounded to 6 places
    assert sum(j["gpu_h"] for j in jobs) == pytest.approx(total["alloc_gpu_h"], abs=near)
    assert sum(j["busy_gpu_h"] for j in jobs) == pytest.approx(total["busy_gpu_h"], abs=near)
    assert sum(j["energy_kwh"] for j in jobs) == pytest.approx(total["energy_kwh"], abs=near)


def test_state_limit_and_range_filter(ran: tuple[Metered, dict[str, int]]) -> None:
    m, ids = ran
    span = {"since": T0 - 3600, "until": T0 + 3600}
    with LineClient(m.th.sock) as c:
        failed = c.ok("history", {**span, "states": ["failed", "timeout"]})
        one = c.ok("history", {**span, "limit": 1})
        before = c.ok("history", {"since": T0 - 7200, "until": T0 - 3600})
        bad = [
            c.ask("history", {**span, "limit": 0}),
            c.ask("history", {**span, "limit": 10_001}),
            c.ask("history", {**span, "states": ["running"]}),
            c.ask("history", {"since": T0, "until": T0 - 1}),
            c.ask("history", {"since": 0.0, "until": 400 * 86400.0}),
            c.ask("history", {**span, "user": "a\x1bb"}),
        ]
    assert [j["id"] for j in failed["jobs"]] == [ids["idle"]] and not failed["more"]
    assert len(one["jobs"]) == 1 and one["more"]
    assert before["jobs"] == []
    for answer in bad:
        assert refusal(answer)[0] == "bad-args", answer


def test_what_the_meter_counted_is_on_the_job_rows_after_shutdown(tmp_path: Path) -> None:
    """No flush in this head's life: a clean stop stores each job's share with the
    usage rows, in the same transaction."""
    with Metered(tmp_path, meter_flush_s=3600.0) as m:
        hosts = m.th.hosts
        assert hosts is not None
        with LineClient(m.th.sock) as c:
            job_id = c.ok("submit", {"argv": ["t"], "gpus": 1, "cwd": "/"})["job"]["id"]
            gpu = poll(lambda: c.ok("show", {"job_id": job_id})["job"]["gpu_uuids"], what="GPU")[0]
        m.load(gpu, 30, 200.0)
        m.held(gpu)
        for step in range(1, 4):
            m.sample_at(T0 + 10 * step, (gpu,))
        assert m.th.rows("SELECT busy_gpu_s, energy_j FROM job") == [(0.0, 0.0)]
    assert m.th.rows("SELECT busy_gpu_s, energy_j FROM job") == [(30.0, 6000.0)]
    assert m.th.rows("SELECT SUM(busy_gpu_s), SUM(energy_j) FROM usage") == [(30.0, 6000.0)]


def test_the_cli_table_fits_80_columns(ran: tuple[Metered, dict[str, int]]) -> None:
    m, ids = ran
    done = cli(m.th.sock, "history", "--since", "2d")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert lines[0].startswith("Jobs that ended ")
    assert lines[1].split() == list(HEADER)
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    name = rows[str(ids["busy"])][2]
    assert name.startswith("a-very-long") and name.endswith("…")
    assert rows[str(ids["busy"])][3:5] == ["completed", "0"]
    assert rows[str(ids["busy"])][-3:] == ["0.02", "100%", "0.00"]
    assert rows[str(ids["idle"])][3:5] == ["failed", "3"]
    assert rows[str(ids["idle"])][-2:] == ["0%", "0.00"]
    assert rows["TOTAL"] == ["TOTAL", "0.03", "50%", "0.00"]
    wide = cli(m.th.sock, "history", "--since", "2d", columns=200)
    assert LONG in wide.stdout


def test_the_cli_json_and_state_codes(ran: tuple[Metered, dict[str, int]]) -> None:
    m, ids = ran
    done = cli(m.th.sock, "history", "--since", "2d", "--state", "CA,F", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {j["id"] for j in result["jobs"]} == {ids["idle"], ids["never"]}
    limited = cli(m.th.sock, "history", "--since", "2d", "--limit", "1")
    assert limited.returncode == 0
    assert limited.stderr.startswith("gputui history: the newest 1 shown; more ended then")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--since", "garbage"], "--since: not a date: 'garbage'"),
        (["--until", "2024-13-45"], "--until: not a date: '2024-13-45'"),
        (["--since", "2020-01-01", "--until", "2024-01-01"], "spans over 366 days"),
        (["--state", "running"], "--state: 'running' is not one of completed, failed"),
        (["--limit", "0"], "--limit: 1 to 10000, not 0"),
        (["--limit", "many"], "--limit: not a number: 'many'"),
        (["--user", "x", "--all-users"], "--user or --all-users, not both"),
    ],
)
def test_bad_history_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], said: str
) -> None:
    """Checked before the head is asked (there is none here: that would be exit 3)."""
    done = cli(tmp_path / "nobody.sock", "history", *args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("gputui history: ") and said in line, line


def test_a_user_no_account_has_is_a_usage_error(ran: tuple[Metered, dict[str, int]]) -> None:
    m, _ = ran
    done = cli(m.th.sock, "history", "--user", "nosuchuser-xyz")
    assert done.returncode == 2
    assert done.stderr.strip() == "gputui history: no such user: nosuchuser-xyz"
