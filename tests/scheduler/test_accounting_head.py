"""Accounting through the running head and the real CLI: samples counted by the
daemon's meter, allocations charged as the head frees them, an idle claim released
and counted (allocated, never busy), ``gputui usage`` whose CSV and JSON carry the
same numbers, ``gputui report``, and bad input refused in one line.

The head runs on a clock the test moves (samples 10 s apart, on demand), so every
figure is known in advance; the CLI is a process of its own on the head's socket.
"""

from __future__ import annotations

import csv
import grp
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, poll, refusal
from test_cli_imports import HEAVY, imported, other_lines

from gputui.config.scheduler import Accounting, Quota, SchedulerConfig
from gputui.scheduler.head.actions import Rules, run_key
from gputui.scheduler.policy.accounting import hour_of

GPUTUI = [sys.executable, "-m", "gputui.entry"]
GROUP = grp.getgrgid(os.getgid()).gr_name
PRICES = Accounting(price_per_kwh=0.30, gpu_hour_rate={"a100": 2.0})
SCHED = SchedulerConfig(accounting=PRICES, quotas=[Quota(group=GROUP, gpu_hours_per_week=0.01)])
T0 = float(hour_of(time.time()))
"""The start of this hour: inside the CLI's own default range (the last 7 days)."""


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def cli(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GPUTUI_HEAD_SOCKET=str(sock))
    return subprocess.run(
        [*GPUTUI, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


class Metered:
    """A head on a moved clock, with one 2-GPU host whose samples come on demand."""

    def __init__(self, tmp: Path, **settings: Any) -> None:
        self.clock = Clock(T0)
        self.th = ThreadedHead(
            tmp,
            {"gpu01": 2},
            clock=self.clock,
            rules=Rules(claim_idle_s=120.0, sched=SCHED),
            **settings,
        )

    def __enter__(self) -> Metered:
        self.th.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.th.__exit__(None, None, None)

    @property
    def meter(self) -> Any:
        assert self.th.head is not None
        return self.th.head.meter

    def sample_at(self, t: float, uuids: tuple[str, ...]) -> None:
        """Move the clock to ``t`` and send a sample; back once the meter counted it."""

        def send() -> None:
            self.clock.t = t
            assert self.th.hosts is not None
            self.th.hosts.sample_again("gpu01")

        self.th.in_loop(send)
        poll(
            lambda: all(self.meter.meter._last.get(u) == t for u in uuids),
            what=f"the meter to count the sample at T0+{t - T0:g}",
        )

    def load(self, uuid: str, util: int, watts: float) -> None:
        """From the next sample on, GPU ``uuid`` of gpu01 reads ``util`` % at ``watts``."""
        hosts = self.th.hosts
        assert hosts is not None
        index = int(uuid.rsplit("-", 1)[1])

        def put() -> None:
            hosts.util.setdefault("gpu01", {})[index] = util
            hosts.power.setdefault("gpu01", {})[index] = watts

        self.th.in_loop(put)

    def held(self, uuid: str, yes: bool = True) -> None:
        """Wait until ``uuid`` is (or is no longer) held by a live allocation."""

        def live() -> bool:
            holder = self.meter.holders.get(uuid)
            return holder is not None and holder.until is None

        poll(lambda: live() == yes, what=f"{uuid} held={yes}")


@pytest.fixture
def worked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Metered, dict[str, Any]]]:
    """A job (project p1) that computes for 60 s at 100 W on one GPU, and a claim
    that sits idle at 40 W on the other until the head releases it at 120 s."""
    with Metered(tmp_path_factory.mktemp("head"), meter_flush_s=30.0) as m:
        th, hosts = m.th, m.th.hosts
        assert hosts is not None
        a, b = hosts.uuid("gpu01", 0), hosts.uuid("gpu01", 1)
        with LineClient(th.sock) as c:
            job = c.ok("submit", {"argv": ["train"], "gpus": 1, "project": "p1", "cwd": "/"})
            job_id = job["job"]["id"]
            placed = poll(
                lambda: c.ok("show", {"job_id": job_id})["job"]["gpu_uuids"], what="a GPU"
            )
            job_gpu = placed[0]
            claim_gpu = b if job_gpu == a else a
            m.load(job_gpu, 50, 100.0)
            m.load(claim_gpu, 0, 40.0)
            claim = c.ok("claim", {"gpus": 1, "wait": False})["claim"]
            assert claim["state"] == "active" and claim["gpu_uuids"] == [claim_gpu]
            m.held(job_gpu)
            m.held(claim_gpu)
            for step in range(1, 7):
                m.sample_at(T0 + 10 * step, (job_gpu, claim_gpu))
            th.in_loop(lambda: hosts.finish("gpu01", run_key(job_id, 1)))
            poll(
                lambda: c.ok("show", {"job_id": job_id})["job"]["state"] == "completed",
                what="the job to end",
            )
            m.held(job_gpu, False)
            for step in range(7, 12):  # the job's GPU goes on computing, for nobody
                m.sample_at(T0 + 10 * step, (job_gpu, claim_gpu))
            th.in_loop(lambda: setattr(m.clock, "t", T0 + 120))  # idle for 120 s: released
            released = poll(
                lambda: [
                    x for x in c.ok("claims", {"all": True})["claims"] if x["state"] == "expired"
                ],
                what="the idle claim to be released",
            )
            assert released[0]["released_at"] == T0 + 120
            m.held(claim_gpu, False)
            m.sample_at(T0 + 130, (job_gpu, claim_gpu))
        yield m, {"job": job_id, "job_gpu": job_gpu, "claim_gpu": claim_gpu}


ME = {
    # job: 60 s allocated and busy, 100 W x 60 s = 6000 J (the samples after its end
    # count for nobody); claim: 120 s allocated, never busy, 40 W x 120 s = 4800 J (its
    # last sample came after it was released: charged up to the release, not past it).
    "alloc_gpu_h": 180 / 3600,
    "busy_gpu_h": 60 / 3600,
    "energy_kwh": 10800 / 3.6e6,
    "cost": 10800 / 3.6e6 * 0.30 + 180 / 3600 * 2.0,
}


def _close(found: dict[str, Any], wanted: dict[str, float]) -> None:
    for name, value in wanted.items():
        assert found[name] == pytest.approx(value, abs=2e-6), name


def test_the_head_counts_a_job_and_an_idle_claim(worked: tuple[Metered, dict[str, Any]]) -> None:
    m, _ = worked
    me = m.th.rows("SELECT user FROM job")[0][0]
    with LineClient(m.th.sock) as c:
        result = c.ok("usage", {"by": "user", "hourly": True})
        by_project = c.ok("usage", {"by": "project"})
    assert [t["key"] for t in result["totals"]] == [me]
    _close(result["totals"][0], ME)
    assert [(r["key"], r["day"]) for r in result["rows"]] == [
        (me, time.strftime("%Y-%m-%d", time.localtime(T0)))
    ]
    (hour,) = result["hours"]  # every GPU present 130 s; the job's GPU busy all along
    _close(hour, {"gpu_h": 260 / 3600, "alloc_gpu_h": 180 / 3600, "busy_gpu_h": 130 / 3600})
    assert hour["hour"] == T0
    job, claim = sorted(by_project["totals"], key=lambda t: t["key"], reverse=True)
    assert (job["key"], claim["key"]) == ("p1", "")
    _close(job, {"alloc_gpu_h": 60 / 3600, "busy_gpu_h": 60 / 3600, "energy_kwh": 6000 / 3.6e6})
    _close(claim, {"alloc_gpu_h": 120 / 3600, "busy_gpu_h": 0.0, "energy_kwh": 4800 / 3.6e6})


def test_the_meter_is_stored_about_every_flush_interval(
    worked: tuple[Metered, dict[str, Any]],
) -> None:
    m, _ = worked

    # The clock moved past the flush interval: the meter's counts are stored (once the
    # last flush is in, the stored rows hold what the head answers).
    def stored() -> tuple[Any, ...]:
        usage = m.th.rows("SELECT SUM(alloc_gpu_s), SUM(busy_gpu_s), SUM(energy_j) FROM usage")
        cluster = m.th.rows(
            "SELECT SUM(gpu_s), SUM(alloc_gpu_s), SUM(busy_gpu_s), SUM(energy_j) FROM clusterhour"
        )
        return (*usage[0], *cluster[0])

    m.th.in_loop(lambda: setattr(m.clock, "t", T0 + 200))
    # user: 60 + 120 s allocated, 60 s busy, 10800 J; cluster: 2 GPUs x 130 s present,
    # the job's GPU busy throughout, 100 W x 130 s + 40 W x 130 s.
    final = (180.0, 60.0, 10800.0, 260.0, 180.0, 130.0, 18200.0)
    poll(lambda: stored() == pytest.approx(final), what="the meter's counts in the file")


def _csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


FIELDS = ("alloc_gpu_h", "busy_gpu_h", "energy_kwh", "cost")


@pytest.mark.parametrize("by", ["user", "project"])
def test_the_csv_and_the_json_carry_the_same_numbers(
    worked: tuple[Metered, dict[str, Any]], by: str
) -> None:
    m, _ = worked
    sock = m.th.sock
    as_json = cli(sock, "usage", "--by", by, "--json")
    as_csv = cli(sock, "usage", "--by", by, "--csv")
    daily = cli(sock, "usage", "--by", by, "--csv", "--daily")
    for done in (as_json, as_csv, daily):
        assert done.returncode == 0 and done.stderr == "", done.stderr
    result = json.loads(as_json.stdout)
    totals = _csv(as_csv.stdout)
    assert [r[by] for r in totals] == [t["key"] for t in result["totals"]]
    for row, total in zip(totals, result["totals"], strict=True):
        assert {f: float(row[f]) for f in FIELDS} == {f: total[f] for f in FIELDS}
        assert row["currency"] == "EUR" and float(row["alloc_gpu_h"]) > 0
    days = _csv(daily.stdout)
    assert [(r["day"], r[by]) for r in days] == [(r["day"], r["key"]) for r in result["rows"]]
    for row, want in zip(days, result["rows"], strict=True):
        assert {f: float(row[f]) for f in FIELDS} == {f: want[f] for f in FIELDS}


def test_the_table_shows_each_key_and_a_total(worked: tuple[Metered, dict[str, Any]]) -> None:
    m, _ = worked
    done = cli(m.th.sock, "usage", "--by", "project")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("GPU usage by project, ")
    assert lines[1].split() == [
        "PROJECT",
        "GPU-H",
        "ALLOC",
        "GPU-H",
        "BUSY",
        "BUSY%",
        "KWH",
        "COST",
        "EUR",
    ]
    cells = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert cells["(none)"][:3] == ["0.03", "0.00", "0%"]  # the idle claim: allocated, not busy
    assert cells["p1"][:3] == ["0.02", "0.02", "100%"]
    assert cells["TOTAL"] == ["0.05", "0.02", "33%", "0.00", f"{ME['cost']:.2f}"]


def test_the_weekly_report_is_short_and_names_the_group_over_quota(
    worked: tuple[Metered, dict[str, Any]],
) -> None:
    m, _ = worked
    me = m.th.rows("SELECT user FROM job")[0][0]
    done = cli(m.th.sock, "report", "--week")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("**GPU report, ") and lines[0].endswith("(7 days)")
    assert len(lines) <= 12 and all(len(line) <= 200 for line in lines)
    text = "\n".join(lines)
    assert "- GPU-hours: 0.1 allocated, 0.0 busy (33% of allocated)" in text
    assert "- Idle while allocated: 0.0 GPU-h (67% of allocated)" in text
    assert f"- Top users: {me} 0.1 GPU-h (33% busy)" in text
    assert f"- Over quota: {GROUP} 0.1 of 0.0 GPU-h" in text
    assert "- Idlest hours of the day: " in text
    as_json = json.loads(cli(m.th.sock, "report", "--json").stdout)
    assert as_json["quotas"] == [
        {"group": GROUP, "pool": None, "limit_gpu_h": 0.01,
         "used_gpu_h": pytest.approx(0.05, abs=1e-6), "over": True}
    ]  # fmt: skip


def test_what_is_counted_at_shutdown_is_stored(tmp_path: Path) -> None:
    """No periodic flush in this head's life (an hour apart): a clean stop stores it."""
    with Metered(tmp_path, meter_flush_s=3600.0) as m:
        hosts = m.th.hosts
        assert hosts is not None
        gpu = hosts.uuid("gpu01", 0)
        m.load(gpu, 10, 250.0)
        for step in range(1, 4):
            m.sample_at(T0 + 10 * step, (gpu,))
        assert m.th.rows("SELECT COUNT(*) FROM clusterhour") == [(0,)]
    rows = m.th.rows("SELECT gpu_s, busy_gpu_s, energy_j FROM clusterhour")  # the head is gone
    assert rows == [(60.0, 30.0, 7500.0)]  # two GPUs x 30 s; one busy; 250 W x 30 s


# -- refused ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--since", "garbage"], "--since: not a date: 'garbage'"),
        (["--since", "2024-13-45"], "--since: not a date: '2024-13-45'"),
        (["--until", "yesterday\x1b[31m"], "--until: not a date: 'yesterday\\x1b[31m'"),
        (["--since", "2024-02-01", "--until", "2024-01-01"], "is not after --since"),
        (["--since", "2020-01-01", "--until", "2024-01-01"], "spans over 366 days"),
        (["--since", "1900-01-01"], "--since: '1900-01-01' is out of range"),
        (["--by", "nobody"], "--by: 'nobody' is not one of user, group, project, pool"),
        (["--csv", "--json"], "--csv or --json, not both"),
    ],
)
def test_bad_usage_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    """Checked before the head is asked (there is none here: that would be exit 3)."""
    done = cli(tmp_path / "nobody.sock", "usage", *args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("gputui usage: ") and said in line, line
    assert "\x1b" not in line and "Traceback" not in line


def test_the_head_refuses_a_bad_usage_request_in_one_line(tmp_path: Path) -> None:
    with ThreadedHead(tmp_path, {"gpu01": 1}) as th, LineClient(th.sock) as c:
        for args, said in [
            ({"since": 2e9, "until": 1e9}, "until must be after since"),
            ({"since": 0.0, "until": 1e9}, "at most 366 days"),
            ({"by": "host"}, "by:"),
            ({"since": -1.0}, "since:"),
            ({"until": "tomorrow"}, "until:"),
        ]:
            code, message = refusal(c.ask("usage", args))
            assert code == "bad-args" and said in message, message
        code, message = refusal(c.ask("report", {"since": 10.0, "until": 5.0}))
        assert code == "bad-args" and "until must be after since" in message
        assert c.ok("usage")["totals"] == []  # and it goes on answering
    assert th.problems == []


def test_usage_and_report_stay_light(worked: tuple[Metered, dict[str, Any]]) -> None:
    """They run on every shell call like the other verbs: none of the heavy imports."""
    m, _ = worked
    for args in (["usage", "--csv", "--by", "group"], ["report", "--week"]):
        names, done = imported("--socket", str(m.th.sock), *args)
        assert done.returncode == 0, other_lines(done)
        assert names & (HEAVY | {"asyncio"}) == set(), args


def test_the_console_reads_the_heads_own_answer(worked: tuple[Metered, dict[str, Any]]) -> None:
    """The usage screen's parser (``UsageReport``) takes this head's answer as it is:
    the same totals and hours, nothing dropped or clamped."""
    from gputui.ui.head.usage_view import UsageReport

    m, _ = worked
    me = m.th.rows("SELECT user FROM job")[0][0]
    span = {"since": T0 - 86400, "until": T0 + 3600}
    with LineClient(m.th.sock) as c:
        users = c.ok("usage", {**span, "by": "user", "hourly": True})
        groups = c.ok("usage", {**span, "by": "group"})
    report = UsageReport.parse(users, since=span["since"], until=span["until"], by="user")
    assert (report.since, report.until, report.by, report.currency) == (
        span["since"], span["until"], "user", "EUR",
    )  # fmt: skip
    (total,) = report.totals
    assert (total.key, total.alloc_gpu_h, total.busy_gpu_h) == (
        me, users["totals"][0]["alloc_gpu_h"], users["totals"][0]["busy_gpu_h"],
    )  # fmt: skip
    assert total.cost == pytest.approx(ME["cost"], abs=2e-6)
    (hour,) = report.hours
    assert (hour.hour, hour.gpu_h, hour.alloc_gpu_h, hour.busy_gpu_h) == (
        T0, users["hours"][0]["gpu_h"], users["hours"][0]["alloc_gpu_h"],
        users["hours"][0]["busy_gpu_h"],
    )  # fmt: skip
    by_group = UsageReport.parse(groups, since=span["since"], until=span["until"], by="group")
    assert [t.key for t in by_group.totals] == [GROUP]
