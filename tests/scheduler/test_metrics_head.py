"""``/metrics`` of a live head, scraped over real HTTP and read with prometheus_client's
own parser: dcgm-exporter's names and labels per GPU against what the hosts sampled,
the job labels that come and go with an allocation, the queue's figures against the
head's own answers, and a scrape that never touches the database.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headthread import LineClient, ThreadedHead, poll
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gputui.scheduler.head.actions import run_key
from gputui.scheduler.head.metrics import GPU_LABELS

LAYOUT = {"gpu01": 2, "gpu02": 2}


def scrape(th: ThreadedHead, path: str = "/metrics") -> dict[str, list[Sample]]:
    """Every family of one scrape, by name (its samples)."""
    assert th.head is not None and th.head.metrics.server is not None
    url = f"http://127.0.0.1:{th.head.metrics.server.port}{path}"
    with urllib.request.urlopen(url, timeout=15) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        raw = answer.read()
        assert int(answer.headers["Content-Length"]) == len(raw)  # (sent in pieces)
        assert raw.endswith(b"\n")
        text = raw.decode()
    return {f.name: list(f.samples) for f in text_string_to_metric_families(text)}


def by_uuid(families: dict[str, list[Sample]], name: str) -> dict[str, Sample]:
    return {s.labels["UUID"]: s for s in families.get(name, [])}


@pytest.fixture
def th(tmp_path: Path) -> Iterator[ThreadedHead]:
    with ThreadedHead(tmp_path, LAYOUT, metrics=("127.0.0.1", 0), metrics_refresh_s=0.05) as head:
        yield head


def put_load(th: ThreadedHead) -> None:
    hosts = th.hosts
    assert hosts is not None

    def put() -> None:
        for host, n in LAYOUT.items():
            for i in range(n):
                hosts.util.setdefault(host, {})[i] = 10 * (i + 1) + len(host)
                hosts.power.setdefault(host, {})[i] = 100.5 + i
            hosts.sample_again(host)

    th.in_loop(put)


def test_every_gpu_has_dcgm_series_with_its_labels_and_readings(th: ThreadedHead) -> None:
    put_load(th)
    hosts = th.hosts
    assert hosts is not None
    want = {
        hosts.uuid(h, i): (h, i, 10 * (i + 1) + len(h), 100.5 + i)
        for h, n in LAYOUT.items()
        for i in range(n)
    }
    families = poll(
        lambda: (
            (f := scrape(th))
            and {u: s.value for u, s in by_uuid(f, "DCGM_FI_DEV_GPU_UTIL").items()}
            == {u: float(w[2]) for u, w in want.items()}
            and f
        ),
        what="the utilisation the hosts sampled",
    )
    power = by_uuid(families, "DCGM_FI_DEV_POWER_USAGE")
    for uuid, (host, index, _, watts) in want.items():
        sample = power[uuid]
        assert sample.value == watts
        assert set(sample.labels) == set(GPU_LABELS)
        assert sample.labels["job"] == sample.labels["user"] == sample.labels["pool"] == ""
        assert sample.labels["gpu"] == str(index)
        assert sample.labels["instance"] == host
        assert sample.labels["Hostname"] == sample.labels["hostname"] == host
        assert sample.labels["modelName"] == "NVIDIA A100"
    # Energy: counted by the head from the power samples (two so far: some joules).
    energy = poll(
        lambda: (
            (e := by_uuid(scrape(th), "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"))
            and len(e) == len(want)
            and all(s.value > 0 for s in e.values())
            and e
        ),
        what="energy on every GPU",
    )
    assert set(energy) == set(want)
    # What the samples do not carry has no series (dcgm-exporter leaves them out too).
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in families
    assert "DCGM_FI_DEV_FB_USED" not in families
    assert families["gputui_hosts_up"][0].value == len(LAYOUT)
    assert families["gputui_gpus"][0].value == sum(LAYOUT.values())


def test_an_xid_and_health_readings_in_dcgm_names(th: ThreadedHead) -> None:
    hosts = th.hosts
    assert hosts is not None
    uuid = hosts.uuid("gpu02", 1)
    th.in_loop(
        lambda: hosts.put_fault(
            "gpu02", 1, health_read=True, remapped_correctable=3, remapped_uncorrectable=0,
            remap_failed=False, ecc_corrected=7, mem_used_mib=1000, mem_total_mib=81920,
        )
    )  # fmt: skip
    th.in_loop(lambda: hosts.put_xid("gpu02", 1, 31, 5.0))
    th.in_loop(lambda: hosts.put_xid("gpu02", 1, 13, 4.0))  # older: not the last
    families = poll(
        lambda: (f := scrape(th)) and uuid in by_uuid(f, "DCGM_FI_DEV_XID_ERRORS") and f,
        what="the Xid",
    )
    assert by_uuid(families, "DCGM_FI_DEV_XID_ERRORS")[uuid].value == 31
    assert by_uuid(families, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS")[uuid].value == 3
    assert by_uuid(families, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")[uuid].value == 0
    assert by_uuid(families, "DCGM_FI_DEV_ROW_REMAP_FAILURE")[uuid].value == 0
    assert by_uuid(families, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL")[uuid].value == 7
    assert by_uuid(families, "DCGM_FI_DEV_FB_USED")[uuid].value == 1000
    assert by_uuid(families, "DCGM_FI_DEV_FB_FREE")[uuid].value == 80920
    assert set(by_uuid(families, "DCGM_FI_DEV_XID_ERRORS")) == {uuid}


def holders(th: ThreadedHead) -> dict[str, dict[str, str]]:
    """GPU uuid -> its job, user and pool labels, for the GPUs a scrape says are held."""
    out = {}
    for sample in scrape(th).get("DCGM_FI_DEV_POWER_USAGE", []):
        held = {k: sample.labels[k] for k in ("job", "user", "pool") if sample.labels[k]}
        if held:
            out[sample.labels["UUID"]] = held
    return out


def test_job_and_claim_labels_come_and_go_with_the_allocation(th: ThreadedHead) -> None:
    put_load(th)
    hosts = th.hosts
    assert hosts is not None
    poll(lambda: "DCGM_FI_DEV_POWER_USAGE" in scrape(th), what="power series")
    assert holders(th) == {}
    with LineClient(th.sock) as c:
        me = c.ok("whoami")["user"]
        job = c.ok("submit", {"argv": ["train"], "gpus": 1, "cwd": "/"})["job"]["id"]
        gpu = poll(lambda: c.ok("show", {"job_id": job})["job"]["gpu_uuids"], what="a GPU")[0]
        want_job = {gpu: {"job": f"job:{job}", "user": me, "pool": "a100"}}
        poll(lambda: holders(th) == want_job, what="the job's labels")
        claim = c.ok("claim", {"gpus": 1, "wait": False})["claim"]
        want_both = {
            **want_job,
            claim["gpu_uuids"][0]: {"job": f"claim:{claim['id']}", "user": me, "pool": "a100"},
        }
        poll(lambda: holders(th) == want_both, what="the claim's labels")
        host = c.ok("show", {"job_id": job})["job"]["host"]
        th.in_loop(lambda: hosts.finish(host, run_key(job, 1)))
        poll(lambda: c.ok("show", {"job_id": job})["job"]["state"] == "completed", what="end")
        poll(lambda: gpu not in holders(th), what="the job's labels to go")
        c.ok("release", {"claim_ids": [claim["id"]]})
        poll(lambda: holders(th) == {}, what="the claim's labels to go")


def queue_figures(th: ThreadedHead) -> dict[str, Any]:
    f = scrape(th)
    if "gputui_jobs_waiting" not in f:  # not read yet
        return {}
    return {
        "waiting": {
            (s.labels["class"], s.labels["reason"]): s.value for s in f["gputui_jobs_waiting"]
        },
        "running": f["gputui_jobs_running"][0].value,
        "claims": f["gputui_claims_active"][0].value,
        "allocated": f["gputui_gpus_allocated"][0].value,
        "fenced": f["gputui_gpus_fenced"][0].value,
        "drained_hosts": f["gputui_hosts_drained"][0].value,
        "alloc_h": f["gputui_allocated_gpu_hours"][0].value,  # (the parser drops _total)
    }


def test_queue_figures_are_what_the_head_answers(th: ThreadedHead) -> None:
    with LineClient(th.sock) as c:
        for _ in range(3):  # 3 x 2 GPUs: 2 run, 1 waits for resources
            c.ok("submit", {"argv": ["x"], "gpus": 2, "cwd": "/"})
        c.ok("submit", {"argv": ["x"], "gpus": 1, "cwd": "/", "priority": "low"})

        def expected() -> dict[str, Any]:
            state = c.ok("cluster")
            waiting: dict[tuple[str, str], float] = {}
            for job in state["jobs"]:
                if job["state"] in ("queued", "held"):
                    key = (job["priority"], job["reason"] or job["state"])
                    waiting[key] = waiting.get(key, 0.0) + 1
            running = [j for j in state["jobs"] if j["state"] in ("starting", "running")]
            return {
                "waiting": waiting,
                "running": float(len(running)),
                "claims": float(len([x for x in state["claims"] if x["state"] == "active"])),
                "allocated": float(len([g for g in state["gpus"] if g.get("holder")])),
                "fenced": 0.0,
                "drained_hosts": float(
                    len([h for h in state["hosts"].values() if h["drain"] is not None])
                ),
            }

        def same() -> bool:
            found = queue_figures(th)
            found.pop("alloc_h", None)
            return found == expected() and bool(found.get("waiting"))

        poll(same, what="the queue's figures to match the head's answer")
        c.ok("drain", {"target": "gpu02", "reason": "maintenance"})
        poll(same, what="the drain to show")
        assert queue_figures(th)["drained_hosts"] == 1
        report = c.ok("report", {})["cluster"]
        found = queue_figures(th)["alloc_h"]
        assert found == pytest.approx(report["alloc_gpu_h"], abs=0.01)


def test_a_scrape_never_touches_the_database(tmp_path: Path) -> None:
    with ThreadedHead(
        tmp_path, LAYOUT, metrics=("127.0.0.1", 0), tick_s=3600.0, metrics_refresh_s=3600.0
    ) as th:
        assert th.head is not None
        put_load(th)
        poll(lambda: "gputui_jobs_running" in scrape(th), what="the queue's first read")
        store = th.head.store
        touched: list[str] = []

        def forbidden(name: str) -> Any:
            def call(*args: Any, **kwargs: Any) -> Any:
                touched.append(name)
                raise AssertionError(f"the store's {name} was used during a scrape")

            return call

        th.in_loop(lambda: [setattr(store, n, forbidden(n)) for n in ("snapshot", "transaction")])
        th.head.metrics.server.forget()  # (this scrape renders the text anew)
        renders = th.head.metrics.server.renders
        try:
            families = scrape(th)
        finally:
            th.in_loop(lambda: [store.__dict__.pop(n, None) for n in ("snapshot", "transaction")])
        assert touched == []
        # Made anew for it (more than once if the thread's own turn came meanwhile:
        # the many scrapes of the poll above make it render ahead every few seconds).
        assert th.head.metrics.server.renders >= renders + 1
        assert len(families["DCGM_FI_DEV_POWER_USAGE"]) == sum(LAYOUT.values())
        assert families["gputui_jobs_running"][0].value == 0


def test_other_paths_and_methods(th: ThreadedHead) -> None:
    assert th.head is not None and th.head.metrics.server is not None
    port = th.head.metrics.server.port
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/nothing", timeout=10)
    assert missing.value.code == 404
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as posted:
        urllib.request.urlopen(request, timeout=10)
    assert posted.value.code == 405
    head = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as answer:
        assert int(answer.headers["Content-Length"]) > 1000
        assert answer.read() == b""
    assert th.problems == []


def test_the_waiting_jobs_are_counted_whole_however_long_the_queue(tmp_path: Path) -> None:
    """More waiting jobs than a page of job rows (10,000): each is counted, by class
    and reason, and the live ones give the holders."""
    from gputui.scheduler.head.metrics_state import read_queue
    from gputui.scheduler.policy.meter import Metered
    from gputui.scheduler.store.engine import open_store
    from gputui.scheduler.store.sqlstore import SqlStore

    store = SqlStore(open_store(tmp_path / "db" / "gputui.db"))
    row = {"uid": 0, "user": "root", "group": "root", "name": "x", "argv": "[]", "env": "{}",
           "gpus": 1, "priority": "normal", "submitted_at": 1.0, "state": "queued",
           "reason": "Resources", "gpu_uuids": "[]"}  # fmt: skip
    with store.transaction() as tx:
        tx.insert_jobs([row] * 10_040 + [{**row, "priority": "high", "reason": "Priority"}] * 3)
        tx.insert_jobs([{**row, "state": "held", "reason": ""}] * 2)
        tx.insert_jobs([{**row, "state": "running", "reason": "", "gpu_uuids": '["GPU-a"]'}])
    with store.snapshot() as tx:
        facts = read_queue(tx, Metered(), 10.0)
    assert facts.waiting == {("normal", "Resources"): 10_040, ("high", "Priority"): 3,
                             ("normal", "held"): 2}  # fmt: skip
    assert facts.running == 1 and facts.holders["GPU-a"].kind == "job"
