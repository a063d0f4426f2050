"""Reading Slurm's output: captured from two versions, and hostile text generated.

``fixtures/*-22.05.txt`` were printed by Debian 12's Slurm 22.05 (the test cluster;
the squeue capture with the fixed nonce ``0123456789abcdef``): job 4's name and
comment forge another record's header and a GPU line. ``*-24.05.txt`` is written
after Slurm's documented ``scontrol show job`` of 23.02 and later (``ReqTRES``/
``AllocTRES``, typed GRES, array elements, jobs on two nodes).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gputui.cli.tables import queue_table
from gputui.config.slurm import SlurmConfig
from gputui.scheduler.client.slurm import accounting, fields, parse
from gputui.scheduler.client.slurm.backend import (
    _page,
    scontrol_detail,
    sprio_factors,
    sshare_standing,
    start_estimate,
)

FIXTURES = Path(__file__).parent / "fixtures"
KEYS = [key for key, _ in fields.JOB_FIELDS]
CAPTURED = fields.Markers("0123456789abcdef")


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_the_22_05_queue_reads_into_job_views() -> None:
    parsed = parse.split_records(read("squeue-22.05.txt"), CAPTURED, KEYS)
    assert parsed.dropped == 0
    views = {v["id"]: v for row in parsed.rows if (v := parse.job_view(row, {"a100": "gpu"}))}
    assert sorted(views) == [2, 4, 5, 6, 7, 8]
    assert views[4]["name"] == "train\nJobId=99 JobName=x"  # the name, whole and in place
    assert views[4]["state"] == "RUNNING" and views[4]["gpus"] == 2
    assert views[4]["comment"].startswith("hi\n     Nodes=node01")
    assert views[6]["state"] == "PENDING" and views[6]["reason"] == "Resources"
    assert views[6]["time_limit_s"] == 26 * 3600 + 3 * 60 and views[6]["started_at"] is None
    assert views[8]["array_id"] == "7_1" and views[7]["array_id"] == "7_2"
    assert views[8]["state"] == "COMPLETED" and views[8]["ended_at"] is not None
    assert views[2]["state"] == "CANCELLED" and views[2]["gpus"] == 0


def test_the_22_05_gpu_indexes_ignore_what_a_name_and_a_comment_forge() -> None:
    parsed = parse.split_records(read("squeue-22.05.txt"), CAPTURED, KEYS)
    names = {int(row["id"]): row["name"] for row in parsed.rows}
    found = parse.gpu_indexes(read("scontrol-show-job-d-22.05.txt"), names)
    assert found == {4: {"node01": [0, 1]}, 5: {"node01": [2]}}


def test_the_24_05_record_reads_typed_gres_two_nodes_and_array_elements() -> None:
    out = read("scontrol-show-job-d-24.05.txt")
    found = parse.gpu_indexes(out, {71: "train", 73: "sweep"})
    assert found == {71: {"gpu01": [0, 1], "gpu02": [2, 3]}, 73: {"gpu03": [5]}}
    first = out.split("\n\n")[0] + "\n"
    assert scontrol_detail(first, 71, "train") == {
        "requeues": 0, "exit_code": 0, "exit_signal": None,
        "log_path": "/home/alice/slurm-71.out",
    }  # fmt: skip
    second = out.split("\n\n")[1] + "\n"
    assert scontrol_detail(second, 73, "sweep")["requeues"] == 2
    assert parse.gpus_of("gres/gpu:2", "2") == 4
    assert parse.gpus_of("gres/gpu:a100:2") == 2
    assert parse.node_names("gpu[01-02,07],login") == ["gpu01", "gpu02", "gpu07", "login"]


ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
HOSTILE = st.one_of(
    ANY_TEXT,
    st.lists(
        st.sampled_from(
            ["\n", "\x1f", "\x1e", "JobId=", " JobName=", "\n   MinCPUsNode=", "%", "|",
             "     Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:4(IDX:0-3)", "\n\n", "StdOut=/etc"]
        ),
        max_size=8,
    ).map("".join),
)  # fmt: skip


@given(st.lists(st.fixed_dictionaries(dict.fromkeys(KEYS, HOSTILE)), max_size=6))
def test_any_text_in_any_field_reads_back_whole_and_in_its_column(
    rows: list[dict[str, str]],
) -> None:
    markers = fields.Markers()
    out = "".join(markers.field.join(r[k] for k in KEYS) + markers.record + "\n" for r in rows)
    parsed = parse.split_records(out, markers, KEYS)
    assert parsed.dropped == 0
    assert parsed.rows == rows


STAMP = st.one_of(
    st.sampled_from(["N/A", "Unknown", ""]),
    st.integers(1_700_000_000, 1_800_000_000).map(
        lambda t: time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))
    ),
)
SQUEUE_ROW = st.fixed_dictionaries(
    {
        **dict.fromkeys(KEYS, HOSTILE),
        "id": st.integers(1, 2**32 - 1).map(str) | HOSTILE,
        "display_id": st.sampled_from(["", "7_1", "7_[2-9]"]) | st.integers(1, 99).map(str),
        "state": st.sampled_from(["PENDING", "RUNNING", "COMPLETED", "CANCELLED by 0", ""]),
        "tres": st.sampled_from(["gres/gpu:2", "gres:gpu:a100:1", "N/A", "cpu=1,gres/gpu=4"]),
        "nodes": st.sampled_from(["1", "2", "0", "x"]),
        "started": STAMP,
        "ended": STAMP,
    }
)


@given(st.lists(SQUEUE_ROW, max_size=6), st.integers(40, 200))
def test_the_table_from_its_own_fields_is_the_table_from_every_field(
    rows: list[dict[str, str]], width: int
) -> None:
    """A bare ``gputui queue`` asks ``squeue`` only for what its table shows
    (``fields.TABLE_KEYS``): the table must be the one every field would give."""
    assert set(fields.TABLE_KEYS) < set(KEYS)
    assert [k for k, _ in fields.table_fields()] == [k for k in KEYS if k in fields.TABLE_KEYS]
    full = [v for r in rows if (v := parse.job_view(r, {}))]
    own = [v for r in rows if (v := parse.job_view({k: r[k] for k in fields.TABLE_KEYS}, {}))]
    now = 1_750_000_000.0
    assert queue_table(own, now, None, width) == queue_table(full, now, None, width)


@given(st.lists(st.fixed_dictionaries(dict.fromkeys(KEYS, HOSTILE)), min_size=1, max_size=4))
def test_output_cut_short_drops_the_cut_record_and_shifts_nothing(
    rows: list[dict[str, str]],
) -> None:
    markers = fields.Markers()
    whole = [markers.field.join(r[k] for k in KEYS) + markers.record + "\n" for r in rows]
    cut = "".join(whole[:-1]) + whole[-1][: len(whole[-1]) // 2]
    parsed = parse.split_records(cut, markers, KEYS)
    assert parsed.rows == rows[:-1]
    assert parsed.dropped <= 1


def _record(job: int, name: str, comment: str, idx: str) -> str:
    return (
        f"JobId={job} JobName={name}\n"
        f"   UserId=u(1) GroupId=u(1) MCS_label=N/A\n"
        f"   JobState=RUNNING Reason=None Dependency=(null)\n"
        f"   Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0\n"
        f"   JOB_GRES=gpu:1\n"
        f"     Nodes=n1 CPU_IDs=0 Mem=0 GRES=gpu:1(IDX:{idx})\n"
        f"   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0\n"
        f"   Comment={comment}\n"
        f"   StdOut=/home/u/slurm-{job}.out\n"
        f"   \n\n"
    )


@given(st.lists(st.tuples(HOSTILE, HOSTILE), min_size=1, max_size=4), st.data())
def test_hostile_names_and_comments_never_give_a_job_another_jobs_gpus(
    jobs: list[tuple[str, str]], data: st.DataObject
) -> None:
    names = {10 + i: name for i, (name, _) in enumerate(jobs)}
    records = []
    for i, (given_name, given_comment) in enumerate(jobs):
        name, comment = given_name, given_comment
        if data.draw(st.booleans(), "forge"):  # a whole record of a job, GPUs and all
            victim = data.draw(st.sampled_from(sorted(names)), "victim")
            where = data.draw(st.sampled_from(["name", "comment"]), "in")
            forged = _record(victim, names[victim], "", "7").removesuffix("   \n\n")
            if where == "name":
                names[10 + i] = name = name + "\n\n" + forged
            else:
                comment = comment + "\n\n" + forged
        records.append(_record(10 + i, name, comment, str(i)))
    found = parse.gpu_indexes("".join(records), names)
    for job, per_node in found.items():
        assert per_node == {"n1": [job - 10]}, (job, per_node)


@given(st.floats(min_value=1, max_value=365 * 86400))
def test_a_time_limit_goes_to_slurm_and_back_rounded_up_to_a_minute(seconds: float) -> None:
    back = parse.duration_s(parse.slurm_duration(seconds))
    assert back is not None and seconds <= back < seconds + 60


@given(ANY_TEXT)
def test_any_text_as_a_duration_timestamp_or_exit_is_a_value_or_none(value: str) -> None:
    assert parse.duration_s(value) is None or parse.duration_s(value) >= 0  # type: ignore[operator]
    parse.timestamp(value)
    code, _sig = parse.exit_code(value)
    assert code is None or 0 <= code <= 255
    assert parse.job_id(value) is None or 0 < parse.job_id(value) <= parse.MAX_JOB_ID  # type: ignore[operator]
    assert len(parse.node_names(value)) <= 4096


def test_markers_differ_per_call() -> None:
    assert fields.Markers().nonce != fields.Markers().nonce
    assert len(fields.Markers().nonce) == 16 and os.urandom  # 64 random bits a call


def test_sprio_sshare_and_start_read_their_documented_lines() -> None:
    assert sprio_factors("    10|1075|75|1000|0|0|0|0\n", 10) == {
        "total": 1075, "age": 75, "fair_share": 1000, "job_size": 0,
        "partition": 0, "qos": 0, "nice": 0,
    }  # fmt: skip
    out = "lab|alice|1|0.250000|3600|0.100000|0.750000\nlab|bob|1|0.250000|0|0.0|1.0\n"
    standing = sshare_standing(out, "alice")
    assert standing is not None and standing["fair_share"] == 0.75
    assert standing["account"] == "lab"
    assert start_estimate("12|2026-12-03T04:10:00|gpu[01-02]\n", 12)["nodes"] == "gpu[01-02]"
    assert start_estimate("12|N/A|(null)\n", 12) == {"start": None, "nodes": None}


@given(ANY_TEXT, st.integers(1, 2**32 - 1))
def test_any_text_from_sprio_sshare_or_start_is_read_or_ignored(text: str, job: int) -> None:
    factors = sprio_factors(text, job)
    assert factors is None or set(factors) == {
        "total", "age", "fair_share", "job_size", "partition", "qos", "nice"
    }  # fmt: skip
    standing = sshare_standing(text, "alice")
    assert standing is None or isinstance(standing["fair_share"], float)
    start = start_estimate(text, job)
    assert start["start"] is None or isinstance(start["start"], float)


SETTING = st.sampled_from(
    ["login", "refresh_s", "command_timeout_s", "partitions", "qos", "nodes", "bogus"]
)
VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10_000), st.floats(allow_nan=True),
    st.text(max_size=20), st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
)  # fmt: skip


@given(st.dictionaries(SETTING, VALUE, max_size=6))
def test_any_slurm_section_is_taken_whole_or_refused_in_one_line_naming_its_field(
    raw: dict[str, object],
) -> None:
    try:
        conf = SlurmConfig.parse(raw)
    except ValueError as exc:
        line = str(exc)
        assert (
            "\n" not in line and line.split(":", 1)[0].split(".", maxsplit=1)[0].strip("'") in raw
        )
        return
    assert 2 <= conf.refresh_s <= 600 and 1 <= conf.command_timeout_s <= 600
    for name in [*conf.partitions.values(), *conf.qos.values(), *conf.nodes]:
        assert name and len(name) <= 64 and all(c.isalnum() or c in "_.-" for c in name)


ALLOC = st.builds(
    accounting.Allocation,
    job=st.integers(1, 10**6).map(str),
    user=st.sampled_from(["alice", "bob"]),
    account=st.sampled_from(["lab", "ml"]),
    partition=st.sampled_from(["gpu", "a100"]),
    gpus=st.integers(1, 8),
    start=st.floats(1.7e9, 1.7e9 + 30 * 86400),
    end=st.none() | st.floats(1.7e9, 1.7e9 + 40 * 86400),
)


@given(st.lists(ALLOC, max_size=8), st.floats(1.7e9, 1.7e9 + 20 * 86400), st.floats(0, 15 * 86400))
def test_gpu_hours_split_by_day_add_up_and_stay_inside_the_span(
    allocs: list[accounting.Allocation], since: float, length: float
) -> None:
    until, now = since + length, since + length + 3600
    body = accounting.usage(allocs, since, until, "user", pools={}, now=now)
    total = sum(r["alloc_gpu_h"] for r in body["totals"])
    assert abs(total - sum(r["alloc_gpu_h"] for r in body["rows"])) < 1e-6
    assert total <= sum(a.gpus for a in allocs) * length / 3600 + 1e-6
    assert all(r["alloc_gpu_h"] >= 0 and r["busy_gpu_h"] is None for r in body["totals"])


@given(st.lists(st.lists(ANY_TEXT, min_size=8, max_size=8), max_size=5))
def test_any_sacct_text_is_read_or_dropped(lines: list[list[str]]) -> None:
    markers = fields.Markers()
    out = "\n".join(markers.field.join(parts) for parts in lines)
    found, dropped = accounting.allocations(out, markers)
    assert len(found) + dropped <= len(out.splitlines())
    assert all(0 < a.gpus < 10**6 for a in found)


@given(st.sets(st.integers(1, 10**6), max_size=40), st.integers(1, 7))
def test_paging_a_listing_gives_every_row_once_in_order(ids: set[int], limit: int) -> None:
    rows = [{"id": i} for i in sorted(ids)]
    seen: list[int] = []
    after = None
    for _ in range(len(rows) + 2):
        page = _page("jobs", rows, limit, after)
        seen += [r["id"] for r in page["jobs"]]
        after = page["next"]
        if after is None:
            break
    assert seen == sorted(ids)


def test_every_state_slurm_ends_a_job_in_ends_gputui_logs_follow() -> None:
    from gputui.cli.jobs import ENDED

    assert {state.lower() for state in parse.FINAL_STATES} <= ENDED


def test_one_gpu_line_for_several_nodes_gives_each_node_its_gpus() -> None:
    out = (
        "JobId=9 JobName=wide\n   JobState=RUNNING Reason=None Dependency=(null)\n"
        "   JOB_GRES=gpu:4\n     Nodes=gpu[01-02] CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1)\n"
        "   MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0\n"
    )
    assert parse.gpu_indexes(out, {9: "wide"}) == {9: {"gpu01": [0, 1], "gpu02": [0, 1]}}
