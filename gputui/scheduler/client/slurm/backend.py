"""``SlurmBackend``: the ``SchedulerBackend`` that is an existing Slurm cluster.

Slurm stays the scheduler: each verb is Slurm's own command, run as the calling user
(``runner.Runner``), and what Slurm prints is read into the head's wire shapes
(``parse``), so the CLI prints a Slurm job as it prints one of the head's. States and
reasons are Slurm's own words (``PENDING``, ``Resources``). A verb Slurm cannot do the
same way says so in one line before anything is asked (``supports``).

Load on slurmctld: a listing is one ``squeue`` for the whole queue; ``show`` is one
``squeue`` for the job and, once it has ended, one ``scontrol show job`` for its exit.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from gputui.common.i18n import N_, _
from gputui.common.mig_profile import PROFILE
from gputui.common.printable import shown
from gputui.config.slurm import node_of
from gputui.scheduler.client.errors import HeadError
from gputui.scheduler.client.slurm import fields, parse
from gputui.scheduler.client.slurm.runner import Runner, code_of, said

if TYPE_CHECKING:
    from gputui.common.jobenv import JobSetup
    from gputui.scheduler.client.backend import Answer
    from gputui.scheduler.client.slurm.accounting import Allocation, Metering

CAN: Final = frozenset(
    {"queue", "submit", "cancel", "kill", "preempt", "hold", "release_hold", "requeue",
     "show", "logs", "wait", "explain", "drain", "undrain", "whoami",
     "claim", "claims", "release", "env", "srun", "usage", "report", "force_free"}
)  # fmt: skip
"""What the Slurm backend does; every other capability is ``Unsupported``. ``srun`` is
Slurm's own: ``gputui run`` is ``srun`` there, not a claim held for a process's life."""

CLAIM_NAME: Final = "gputui-claim"
"""The job name of an allocation ``gputui claim`` made (``salloc --no-shell``)."""
WAIT_POLL_S: Final = 1.0
"""How often ``wait`` asks squeue about the job it waits for."""
LOG_CHUNK: Final = 1 << 20


_UTF8_LENGTH: Final = {0xC: 2, 0xD: 2, 0xE: 3, 0xF: 4}
"""A UTF-8 lead byte's high four bits -> the length of the character it begins."""


def whole_chars(data: bytes, *, last: bool) -> tuple[str, int]:
    """``data`` read from a log as text, and how many of its bytes that text used: a
    UTF-8 character cut at the end of the read waits for the next read (the follower's
    offset stays on its first byte), unless this is the ``last`` read of the log.
    Bytes that are not UTF-8 show as U+FFFD."""
    used = len(data)
    if not last:
        for back in range(1, min(4, len(data)) + 1):
            lead = data[-back]
            if lead & 0xC0 == 0x80:  # a continuation byte: look further back
                continue
            need = _UTF8_LENGTH.get(lead >> 4, 1)  # how long a character it begins
            if need > back:
                used = len(data) - back
            break
    return data[:used].decode("utf-8", "replace"), used


@dataclass(frozen=True)
class Snapshot:
    """What a console shows of Slurm at one refresh."""

    jobs: list[dict[str, Any]]
    """Every job not ended, as the head's job views."""
    indexes: dict[int, dict[str, list[int]]]
    """Running job -> node -> the GPU indexes Slurm gave it there (absent: unknown)."""
    nodes: list[dict[str, str]]
    """``sinfo -N``'s records: name, state, gres, partition, reason."""


class SlurmBackend:
    """Slurm, reached through ``runner`` (the calling user's own commands)."""

    def __init__(
        self,
        runner: Runner,
        *,
        partitions: Mapping[str, str] | None = None,
        qos: Mapping[str, str] | None = None,
        nodes: Mapping[str, str] | None = None,
        head: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        """``head``: opens a session with the gputui head of hosts.yaml, where there is
        one (force-free's last steps go through its helpers)."""
        self.head = head
        self.runner = runner
        self.partitions = dict(partitions or {})
        self.qos = dict(qos or {})
        self.nodes = dict(nodes or {})
        self.pools = {partition: pool for pool, partition in self.partitions.items()}
        self.dropped = 0
        """Records of Slurm's output dropped as malformed (hostile text), so far."""
        self._prefetched: tuple[tuple[str, ...], fields.Markers, fields.Fields, Any] | None = None
        """``prefetch_queue``'s listing, started: its arguments, markers, fields, process."""

    @property
    def name(self) -> str:
        return "Slurm"

    @property
    def local(self) -> bool:
        return self.runner.login == "local"

    def supports(self, capability: str) -> bool:
        return capability in CAN

    def __getattr__(self, capability: str) -> Any:
        """A capability Slurm lacks: one line, whatever the arguments."""
        if capability.startswith("_"):
            raise AttributeError(capability)

        def unsupported(*_: Any, **__: Any) -> NoReturn:
            from gputui.scheduler.client.backend import Unsupported

            raise Unsupported(self.name, capability)

        return unsupported

    # -- reading the queue ---------------------------------------------------------------

    def prefetch_queue(
        self, *, all: bool = False, user: str | None = None, table: bool = False
    ) -> None:
        """Start the ``squeue`` that ``queue(all=, user=)`` will read, now: it runs while
        the rest of the verb loads (``gputui queue``). ``table``: the listing is only
        for the queue's table, so only its fields are asked for (``fields.TABLE_KEYS``;
        the views hold None for the rest)."""
        extra = self._queue_args(all, user)
        asked = fields.table_fields() if table else fields.JOB_FIELDS
        markers = fields.Markers()
        proc = self.runner.start(*fields.squeue_argv(markers, asked, *extra))
        self._prefetched = (extra, markers, asked, proc)

    def adopt_listing(self, markers: fields.Markers, asked: fields.Fields, proc: Any) -> None:
        """A bare ``queue``'s listing started before this backend was made
        (``fields.squeue_argv`` with no selection; ``cli.slurm_front``): the answer
        ``queue()`` reads, as ``prefetch_queue``'s is."""
        self._prefetched = ((), markers, tuple(asked), proc)

    def _squeue(self, *extra: str, prefetched_ok: bool = False) -> list[dict[str, Any]]:
        """``squeue``'s jobs (``extra``: its selection) as views, by id. ``prefetched_ok``:
        a listing ``prefetch_queue`` started for the same selection is the answer (only
        ``queue`` reads it: its views may hold the table's fields only)."""
        prefetched, self._prefetched = self._prefetched, None
        if prefetched is not None and prefetched_ok and prefetched[0] == extra:
            _extra, markers, asked, proc = prefetched
            done = self.runner.finish(proc, "squeue", timeout_s=self.runner.timeout_s)
        else:
            if prefetched is not None:  # asked for another listing: that one is not read
                prefetched[3].kill()
                prefetched[3].communicate()
            markers, asked = fields.Markers(), fields.JOB_FIELDS
            done = self.runner.run(*fields.squeue_argv(markers, asked, *extra))
        if done.code != 0:
            if "invalid job id" in done.err.lower():
                return []
            raise HeadError(code_of(done.err), f"squeue: {said('squeue', done.err)}")
        parsed = parse.split_records(done.out, markers, [key for key, _ in asked])
        self.dropped += parsed.dropped
        views = [parse.job_view(row, self.pools) for row in parsed.rows]
        return sorted((v for v in views if v is not None), key=lambda v: int(v["id"]))

    def queue(
        self,
        *,
        all: bool = False,
        user: str | None = None,
        limit: int | None = None,
        after: int | None = None,
        timeout: float | None = None,
    ) -> Answer:
        jobs = self._squeue(*self._queue_args(all, user), prefetched_ok=True)
        answer: Answer = _page("jobs", jobs, limit, after)
        if self.dropped:
            answer["dropped"] = self.dropped
        return answer

    def snapshot(self) -> Snapshot:
        """The whole view for a console, in as few calls to slurmctld as there can be:
        one ``squeue`` (every job not ended), one ``sinfo`` (every node), and one
        ``scontrol show job -d`` (every job's GPU indexes) only while a job runs."""
        jobs = self._squeue()
        running = {j["id"]: j["name"] for j in jobs if j["state"] == "RUNNING"}
        indexes: dict[int, dict[str, list[int]]] = {}
        if running:
            done = self.runner.run("scontrol", "show", "job", "-d")
            if done.code == 0:
                indexes = parse.gpu_indexes(done.out, running)
        return Snapshot(jobs, indexes, self._sinfo())

    def _sinfo(self) -> list[dict[str, str]]:
        markers = fields.Markers()
        keys = [key for key, _ in fields.NODE_FIELDS]
        done = self.runner.run(
            "sinfo", "--noheader", "--Node", "-o", markers.format(f for _, f in fields.NODE_FIELDS)
        )
        if done.code != 0:
            raise HeadError(code_of(done.err), f"sinfo: {said('sinfo', done.err)}")
        parsed = parse.split_records(done.out, markers, keys)
        self.dropped += parsed.dropped
        return parsed.rows

    @staticmethod
    def _queue_args(all: bool, user: str | None) -> tuple[str, ...]:
        extra = ["--states=all"] if all else []
        if user is not None:
            extra += ["--user", _name_arg(user, "user")]
        return tuple(extra)

    def _job(self, job_id: int) -> dict[str, Any]:
        jobs = [
            j for j in self._squeue("--states=all", "--jobs", str(int(job_id))) if j["id"] == job_id
        ]
        if not jobs:
            raise HeadError(
                "unknown-job", _("no job {id} in Slurm's queue (ended long ago?)").format(id=job_id)
            )
        return jobs[0]

    def show(self, job_id: int, *, timeout: float | None = None) -> Answer:
        job = self._job(job_id)
        detail = self._detail(job_id, job["name"])
        job.update(detail)
        return {"job": job}

    def _detail(self, job_id: int, name: str) -> dict[str, Any]:
        """What only ``scontrol show job`` says of one job: exit, requeues, output file."""
        done = self.runner.run("scontrol", "show", "job", str(int(job_id)))
        if done.code != 0:
            return {}
        return scontrol_detail(done.out, job_id, name)

    # -- force-free ------------------------------------------------------------------------

    def force_free(
        self,
        *,
        host: str,
        gpu: str,
        reason: str,
        reset: bool = False,
        on_step: Callable[[Any], None] | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """Take a stuck GPU back on a Slurm node, step by step: drain the node (Slurm
        drains nodes, not GPUs), cancel the Slurm jobs Slurm gave that GPU, then (with
        a head) its helpers stop what is still on the card, as force-free does there.
        Each of Slurm's steps runs as the caller: Slurm decides who may."""
        tell = on_step or (lambda _step: None)
        steps: list[Answer] = []

        def step(name: str, ok: bool, outcome: str) -> bool:
            steps.append({"step": name, "ok": ok, "outcome": outcome})
            tell(steps[-1])
            return ok

        target = f"{host}:{gpu}"
        answer: Answer = {"target": target, "steps": steps, "free": False}
        if not (gpu.isascii() and gpu.isdigit()) or len(gpu) > 4:
            raise HeadError(
                "usage",
                "force-free: " + _("{gpu} is not a GPU index").format(gpu=shown(gpu, 20)),
            )
        index = int(gpu)
        node = _name_arg(self._node_of(host), "host")
        why = f"force-free {target}: {reason}"[:200]
        done = self.runner.run(
            "scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={why}"
        )
        if not step(
            "drain",
            done.code == 0,
            f"node {node} drained" if done.code == 0 else said("scontrol", done.err),
        ):
            return answer
        snap = self.snapshot()
        on_card = [
            j for j in snap.jobs
            if index in snap.indexes.get(int(j["id"]), {}).get(node, [])
        ]  # fmt: skip
        unknown = [
            j["id"] for j in snap.jobs
            if j["state"] == "RUNNING" and node in parse.node_names(j.get("host") or "")
            and int(j["id"]) not in snap.indexes
        ]  # fmt: skip
        cancelled = []
        for job in on_card:
            done = self.runner.run("scancel", str(int(job["id"])))
            if done.code != 0:
                step("cancel", False, f"job {job['id']}: {said('scancel', done.err)}")
                return answer
            cancelled.append(str(job["id"]))
        note = (
            f"; jobs {', '.join(map(str, unknown))} hold {node} with no GPU indexes: left"
            if unknown
            else ""
        )
        step(
            "cancel",
            True,
            (f"cancelled Slurm jobs {', '.join(cancelled)}" if cancelled else "no Slurm job on it")
            + note,
        )
        if self.head is None:
            step(
                "stop",
                False,
                "what is still on the card needs a head: section (its helpers stop it)",
            )
            return answer
        with self.head() as head:
            result = head.force_free(host=host, gpu=gpu, reason=reason, reset=reset, on_step=tell)
        steps.extend(s for s in result.get("steps", []) if isinstance(s, dict))
        answer["free"] = result.get("free") is True
        return answer

    # -- accounting: sacct ---------------------------------------------------------------

    def _allocations(self, since: float, until: float) -> list[Allocation]:
        from gputui.scheduler.client.slurm import accounting  # usage and report only

        if not 0 <= until - since <= accounting.MAX_SPAN_S:
            raise HeadError(
                "usage", "usage: " + _("give a span of at most a year, since before until")
            )
        markers = fields.Markers()
        done = self.runner.run(*accounting.sacct_argv(since, until, markers))
        if done.code != 0:
            raise HeadError(code_of(done.err), f"sacct: {said('sacct', done.err)}")
        found, dropped = accounting.allocations(done.out, markers)
        self.dropped += dropped
        return found

    def usage(
        self,
        *,
        since: float,
        until: float,
        by: str = "user",
        hourly: bool = False,
        timeout: float | None = None,
    ) -> Answer:
        if by not in ("user", "group", "project", "pool"):
            raise HeadError(
                "usage",
                "usage: "
                + _("--by {value} is not user, group, project or pool").format(value=shown(by, 20)),
            )
        from gputui.scheduler.client.slurm import accounting

        allocs = self._allocations(since, until)
        metered, why = self._metered(since, until)
        body = accounting.usage(
            allocs, since, until, by, pools=self.pools, now=time.time(), metered=metered
        )
        if why:
            body["unknown"] = f"{body['unknown']}; {why}" if body["unknown"] else why
        return body

    def report(self, *, since: float, until: float, timeout: float | None = None) -> Answer:
        from gputui.scheduler.client.slurm import accounting

        allocs = self._allocations(since, until)
        metered, why = self._metered(since, until)
        body = accounting.report(
            allocs, since, until, time.time(), pools=self.pools, metered=metered
        )
        if why:
            body["unknown"] = f"{body['unknown']}; {why}" if body["unknown"] else why
        return body

    def _metered(self, since: float, until: float) -> tuple[Metering | None, str]:
        """What the gputui head that relays Slurm metered of the jobs (None where no
        head is configured, or it does not answer: then why, in one line)."""
        if self.head is None:
            return None, ""
        from gputui.scheduler.client.slurm import accounting

        try:
            with self.head() as head:
                answer = head.slurm_energy(since=since, until=until)
            return accounting.metering(answer), ""
        except HeadError as exc:
            return None, f"energy: the head did not answer ({shown(exc.message, 160)})"
        except (OSError, EOFError) as exc:
            return None, f"energy: the head did not answer ({shown(str(exc), 160)})"
        except ValueError as exc:
            return None, f"energy: the head's answer is not understood ({shown(str(exc), 160)})"

    # -- run: srun ------------------------------------------------------------------------

    def srun_argv(
        self,
        command: Sequence[str],
        *,
        gpus: int = 1,
        pool: str | None = None,
        host: str | None = None,
        pty: bool = False,
    ) -> list[str]:
        """``gputui run``'s command line: ``srun`` in an allocation of its own, which
        ends with the command (here, or over SSH with a terminal on the login node);
        ``pty`` (``run --pty``): Slurm's own terminal on the node (``srun --pty``)."""
        if not command or command[0].startswith("-"):
            raise HeadError("usage", "run: give the command after -- (not an option)")
        cmd = ["srun", f"--gres=gpu:{int(gpus)}", f"--job-name={Path(command[0]).name[:64]}"]
        if pty:
            cmd.append("--pty")
        if pool is not None:
            cmd.append(f"--partition={_name_arg(self.partitions.get(pool, pool), 'pool')}")
        if host is not None:
            cmd.append(f"--nodelist={_name_arg(self._node_of(host), 'host')}")
        argv = self.runner.argv([*cmd, *command])
        if not self.local:  # a terminal on the login node, so ^C reaches srun
            argv.insert(1, "-t")
        return argv

    # -- claims: allocations with no shell (salloc --no-shell) ----------------------------

    def claim(
        self,
        *,
        gpus: int | None = None,
        gpu_refs: Sequence[str] = (),
        pool: str | None = None,
        model: str | None = None,
        host: str | None = None,
        project: str | None = None,
        duration_s: float | None = None,
        note: str = "",
        wait: bool = True,
        mig: str | None = None,
        timeout: float | None = None,
    ) -> Answer:
        """``salloc --no-shell``: an allocation held until released or its time ends,
        named ``gputui-claim`` so that ``claims`` and ``release`` know it."""
        if gpu_refs:
            raise HeadError("usage", "claim: " + _("Slurm picks the GPUs; ask for a count (-g N)"))
        if model is not None:
            raise HeadError(
                "usage",
                "claim: " + _("on Slurm a GPU model is a partition (--pool) or a GRES type"),
            )
        gres = _gres(gpus, mig, "claim")
        cmd = ["salloc", "--no-shell", f"--gres={gres}", f"--job-name={CLAIM_NAME}"]
        if pool is not None:
            cmd.append(f"--partition={_name_arg(self.partitions.get(pool, pool), 'pool')}")
        if host is not None:
            cmd.append(f"--nodelist={_name_arg(self._node_of(host), 'host')}")
        if duration_s is not None:
            cmd.append(f"--time={_limit(duration_s, 'claim')}")
        if note or project:
            cmd.append(f"--comment={'; '.join(p for p in (note, project) if p)}")
        if not wait:
            cmd.append("--immediate=1")
        done = self.runner.run(*cmd, timeout_s=None if wait else self.runner.timeout_s)
        m = re.search(r"Granted job allocation (\d{1,10})", done.err)
        if done.code != 0 or m is None:
            raise HeadError(code_of(done.err), f"claim: {said('salloc', done.err)}")
        number = int(m.group(1))
        job = self._job(number)
        done = self.runner.run("scontrol", "show", "job", "-d", str(number))
        per_node = parse.gpu_indexes(done.out, {number: job["name"]}).get(number, {})
        indexes = [i for node in sorted(per_node) for i in per_node[node]]
        return {"claim": self._claim_view(job, indexes)}

    def _claim_view(self, job: dict[str, Any], indexes: list[int] | None = None) -> Answer:
        active = job["state"] == "RUNNING"
        return {
            "id": job["id"],
            "user": job["user"],
            "state": "active" if active else job["state"].lower(),
            "reason": job["reason"],
            "gpus": job["gpus"],
            "pool": job["pool"],
            "model": None,
            "host": job["host"],
            "gpu_uuids": [f"gpu{i}" for i in indexes or []],
            "note": job.get("comment") or "",
            "created_at": job["submitted_at"],
            "granted_at": job["started_at"],
            "expires_at": (
                job["started_at"] + job["time_limit_s"]
                if job["started_at"] and job["time_limit_s"]
                else None
            ),
            "idle_release_s": None,
            "last_active_at": None,
            "released_at": None,
            "release_reason": None,
            "session": False,
            "project": None,
            "slurm_job": job["id"],
        }

    def claims(
        self,
        *,
        all: bool = False,
        user: str | None = None,
        limit: int | None = None,
        after: int | None = None,
        timeout: float | None = None,
    ) -> Answer:
        extra = ["--name", CLAIM_NAME]
        if not all and user is None:
            extra.append("--me")
        if user is not None:
            extra += ["--user", _name_arg(user, "user")]
        claims = [self._claim_view(j) for j in self._squeue(*extra)]
        return _page("claims", claims, limit, after)

    def release(
        self,
        *,
        claim_ids: Sequence[int] = (),
        gpu_refs: Sequence[str] = (),
        all: bool = False,
        reason: str | None = None,
        timeout: float | None = None,
    ) -> Answer:
        if gpu_refs:
            raise HeadError(
                "usage", "release: " + _("name the claim (cN), Slurm holds GPUs by job")
            )
        mine = {c["id"]: c for c in self.claims()["claims"]}
        ids = list(mine) if all else [int(i) for i in claim_ids]
        released = []
        for number in ids:
            claim = mine.get(number)
            if claim is None:
                raise HeadError(
                    "unknown-claim",
                    "release: " + _("no claim c{claim} of yours in Slurm").format(claim=number),
                )
            self.runner.ok("scancel", str(number))
            released.append(claim)
        return {"released": released}

    def env(self, host: str | None = None, *, timeout: float | None = None) -> Answer:
        """What ``srun --jobid`` needs to run in the caller's claim (on ``host``, else
        the newest)."""
        mine = [c for c in self.claims()["claims"] if c["state"] == "active"]
        if host is not None:  # only a claim on that host: never one elsewhere
            node = self._node_of(host)
            mine = [c for c in mine if node in parse.node_names(c["host"] or "")]
        if not mine:
            return {"uuids": [], "slurm_job": None}
        return {"uuids": [], "slurm_job": mine[-1]["id"]}

    # -- explain ------------------------------------------------------------------------

    def explain(self, job_id: int, *, timeout: float | None = None) -> Answer:
        """One answer from what people read three tools for: squeue's reason, sprio's
        factors, sshare's fair-share standing and ``squeue --start``'s estimate."""
        job = self._job(job_id)
        body: Answer = {
            "scheduler": "slurm",
            "job": job,
            "reason": job["reason"],
            "priority": None,
            "fair_share": None,
            "estimate": {"start": None, "nodes": None},
        }
        pending = job["state"] == "PENDING"
        if pending:
            done = self.runner.run(
                "sprio", "--noheader", "--jobs", str(int(job_id)), "-o", "%i|%Y|%A|%F|%J|%P|%Q|%N"
            )
            body["priority"] = sprio_factors(done.out, job_id) if done.code == 0 else None
            done = self.runner.run(
                "squeue", "--start", "--noheader", "--jobs", str(int(job_id)), "-o", "%i|%S|%Y"
            )
            if done.code == 0:
                body["estimate"] = start_estimate(done.out, job_id)
        done = self.runner.run(
            "sshare", "--noheader", "--parsable2", "--users", _name_arg(job["user"], "user"),
            "-o", "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare",
        )  # fmt: skip
        if done.code == 0:
            body["fair_share"] = sshare_standing(done.out, job["user"])
        if body["fair_share"] is None:
            body["fair_share_why"] = (
                "not kept: Slurm has no accounting storage here (slurmdbd)"
                if done.code == 0
                else said("sshare", done.err)
            )
        return body

    # -- submitting -------------------------------------------------------------------

    def submit(
        self,
        *,
        argv: Sequence[str],
        gpus: int = 1,
        cwd: str | None = None,
        preemptible: bool = False,
        pool: str | None = None,
        host: str | None = None,
        name: str | None = None,
        time_limit_s: float | None = None,
        priority: str | None = None,
        project: str | None = None,
        after: Sequence[int] | None = None,
        after_ok: bool = False,
        setup: JobSetup | None = None,
        array: str | None = None,
        script: str | None = None,
        output: str | None = None,
        booking: int | None = None,
        mig: str | None = None,
        timeout: float | None = None,
    ) -> Answer:
        if booking is not None:
            raise HeadError(
                "usage",
                "submit: " + _("--booking is the gputui head's; use Slurm's --reservation"),
            )
        if setup:
            raise HeadError(
                "usage",
                "submit: "
                + _(
                    "--env, --export, --conda, --venv and --image are the head's;"
                    " on Slurm, set them up in an sbatch script"
                ),
            )
        if array is not None or script is not None or output is not None:
            raise HeadError(
                "usage",
                "submit: "
                + _(
                    "scripts, --array and --output go to the head's own scheduler;"
                    " on Slurm, give the script to sbatch"
                ),
            )
        if preemptible:
            raise HeadError(
                "usage",
                "submit: "
                + _(
                    "on Slurm a job is preemptible by its QOS:"
                    " give --priority with a class that slurm.qos maps to a preemptible QOS"
                ),
            )
        if not argv:
            raise HeadError("usage", "submit: " + _("give the command after --"))
        cmd = ["sbatch", "--parsable", f"--gres={_gres(gpus, mig, 'submit')}"]
        if cwd:
            cmd.append(f"--chdir={cwd}")
        if time_limit_s is not None:
            cmd.append(f"--time={_limit(time_limit_s, 'submit')}")
        if priority is not None:
            qos = self.qos.get(priority)
            if qos is None:
                known = ", ".join(sorted(self.qos)) or _("none (slurm.qos is empty)")
                raise HeadError(
                    "usage",
                    "submit: "
                    + _("no QOS for priority class {name} (known: {known})").format(
                        name=shown(priority, 40), known=known
                    ),
                )
            cmd.append(f"--qos={qos}")
        if pool is not None:
            cmd.append(f"--partition={_name_arg(self.partitions.get(pool, pool), 'pool')}")
        if host is not None:
            cmd.append(f"--nodelist={_name_arg(self._node_of(host), 'host')}")
        # Slurm names a --wrap job "wrap": name it as the head would, by its program.
        cmd.append(f"--job-name={name if name is not None else Path(argv[0]).name[:64]}")
        if project is not None:
            cmd.append(f"--comment={project}")
        if after:
            kind = "afterok" if after_ok else "afterany"
            cmd.append(f"--dependency={kind}:" + ":".join(str(int(j)) for j in after))
        cmd += ["--output=slurm-%j.out", "--wrap", shlex.join(argv)]
        done = self.runner.ok(*cmd)
        m = re.fullmatch(r"(\d{1,10})(?:;[A-Za-z0-9_.-]+)?\s*", done.out)
        if m is None:
            raise HeadError(
                "protocol",
                _("sbatch said {said}, not a job id").format(said=shown(done.out.strip(), 80)),
            )
        return {"job": self._job(int(m.group(1)))}

    def _node_of(self, host: str) -> str:
        return node_of(self.nodes, host)

    # -- acting on jobs ----------------------------------------------------------------

    def _act(self, job_id: int, *argv: str) -> Answer:
        self.runner.ok(*argv, str(int(job_id)))
        return {"job": self._job(job_id)}

    def cancel(
        self,
        job_id: int,
        *,
        reason: str | None = None,
        task: int | None = None,
        timeout: float | None = None,
    ) -> Answer:
        if task is not None:
            raise HeadError("usage", "cancel: " + _("ARRAY_TASK is for the head's own scheduler"))
        return self._act(job_id, "scancel")

    def kill(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = None
    ) -> Answer:
        return self._act(job_id, "scancel", "--signal=KILL", "--full")

    def preempt(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = None
    ) -> Answer:
        return self._act(job_id, "scontrol", "requeue")

    def requeue(
        self,
        job_id: int,
        *,
        reason: str | None = None,
        force: bool = False,
        timeout: float | None = None,
    ) -> Answer:
        return self._act(job_id, "scontrol", "requeue")

    def hold(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = None
    ) -> Answer:
        return self._act(job_id, "scontrol", "hold")

    def release_hold(
        self, job_id: int, *, reason: str | None = None, timeout: float | None = None
    ) -> Answer:
        return self._act(job_id, "scontrol", "release")

    # -- output and waiting -------------------------------------------------------------

    def logs(
        self,
        job_id: int,
        *,
        offset: int = 0,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> Answer:
        job = self._job(job_id)
        detail = self._detail(job_id, job["name"])
        path = detail.get("log_path")
        if not path:
            raise HeadError(
                "refused", "logs: " + _("Slurm names no output file for job {id}").format(id=job_id)
            )
        want = min(max_bytes or LOG_CHUNK, LOG_CHUNK)
        offset = max(0, int(offset))
        data, size = self._read(path, offset, want)
        ended = job["state"] in parse.FINAL_STATES
        # (a read too short for one character takes what it asked for, whole or not)
        text, used = whole_chars(data, last=(ended and offset + len(data) >= size) or want < 4)
        return {
            "data": text,
            "offset": offset + used,
            "size": size,
            "ended": job["state"] in parse.FINAL_STATES,
            "state": job["state"],
            "run": int(detail.get("requeues", 0)) + 1,
        }

    def _read(self, path: str, offset: int, want: int) -> tuple[bytes, int]:
        """Up to ``want`` bytes of ``path`` from ``offset``, read as the calling user."""
        if self.local:
            try:
                with open(path, "rb") as f:
                    size = f.seek(0, 2)
                    f.seek(min(offset, size))
                    return f.read(want), size
            except FileNotFoundError:
                return b"", 0
            except OSError as exc:
                raise HeadError("denied", f"logs: {shown(path, 200)}: {exc.strerror}") from None
        quoted = shlex.quote(path)
        done = self.runner.run(
            "sh", "-c",
            f"wc -c < {quoted} && tail -c +{offset + 1} -- {quoted} | head -c {want}",
        )  # fmt: skip
        if done.code != 0:
            return b"", 0
        head, _, rest = done.raw.partition(b"\n")  # bytes as in the file: offsets count them
        return rest, int(head) if head.strip().isdigit() else 0

    def wait(self, job_id: int, *, timeout: float | None = None) -> Answer:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self._job(job_id)
            if job["state"] in parse.FINAL_STATES:
                job.update(self._detail(job_id, job["name"]))
                return {"job": job}
            if deadline is not None and time.monotonic() > deadline:
                raise HeadError(
                    "timeout",
                    _("job {id} is still {state}").format(id=job_id, state=job["state"]),
                )
            time.sleep(WAIT_POLL_S)

    # -- nodes -------------------------------------------------------------------------

    def drain(
        self, target: str, *, reason: str | None = None, timeout: float | None = None
    ) -> Answer:
        node = self._whole_node(target, "drain")
        self.runner.ok(
            "scontrol", "update", f"NodeName={node}", "State=DRAIN",
            f"Reason={reason or 'drained with gputui'}",
        )  # fmt: skip
        return {"outcome": f"node {node} draining (Slurm drains whole nodes)"}

    def undrain(
        self, target: str, *, reason: str | None = None, timeout: float | None = None
    ) -> Answer:
        node = self._whole_node(target, "undrain")
        self.runner.ok("scontrol", "update", f"NodeName={node}", "State=RESUME")
        return {"outcome": f"node {node} resumed"}

    def _whole_node(self, target: str, verb: str) -> str:
        host, sep, _gpu = target.partition(":")
        if sep:
            raise HeadError(
                "usage",
                f"{verb}: "
                + _("Slurm cannot {verb} one GPU; {verb} the node: gputui {verb} {host}").format(
                    verb=verb, host=host
                ),
            )
        return _name_arg(self._node_of(host), "host")

    def whoami(self, *, timeout: float | None = None) -> Answer:
        import getpass

        return {
            "user": getpass.getuser(),
            "scheduler": "slurm",
            "version": "{}.{:02d}".format(*self.runner.version()),
        }

    def pushes(self) -> Iterator[Answer]:
        from gputui.scheduler.client.backend import Unsupported

        raise Unsupported(self.name, "subscribe")


def _page(key: str, rows: list[dict[str, Any]], limit: int | None, after: int | None) -> Answer:
    """One page of ``rows`` (by id) as the head pages a listing: those after ``after``,
    at most ``limit``, and ``next`` (the last id) when more are left."""
    if after is not None:
        rows = [r for r in rows if r["id"] > after]
    more = limit is not None and len(rows) > limit
    if limit is not None:
        rows = rows[:limit]
    return {key: rows, "next": rows[-1]["id"] if more and rows else None}


def _limit(seconds: float, verb: str) -> str:
    """A time limit as Slurm's ``--time``; a usage error, in one line, past a year."""
    try:
        return parse.slurm_duration(seconds)
    except ValueError as exc:
        raise HeadError("usage", f"{verb}: " + _("give {limit}").format(limit=exc)) from None


def _gres(gpus: int | None, mig: str | None, verb: str) -> str:
    """Slurm's ``--gres`` for ``gpus`` cards, or slices of a MIG profile: Slurm names a
    MIG slice's GRES type by its profile (``gpu:1g.10gb:N``, ``AutoDetect=nvml``)."""
    count = int(gpus or 1)
    if mig is None:
        return f"gpu:{count}"
    if PROFILE.fullmatch(mig) is None:
        raise HeadError(
            "usage",
            f"{verb}: "
            + _("--mig {value} is not a MIG profile (e.g. 1g.10gb)").format(value=shown(mig, 40)),
        )
    return f"gpu:{mig}:{count}"


_SLURM_NAMES = {
    "user": N_("not a Slurm user name: {value}"),
    "pool": N_("not a Slurm pool name: {value}"),
    "host": N_("not a Slurm host name: {value}"),
}
"""What a name ``_name_arg`` refuses is said to be, by what it names."""


def _name_arg(value: str, what: str) -> str:
    """A name that goes on Slurm's command line: never an option, never a list."""
    if not value or len(value) > 256 or not re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+", value):
        message = _SLURM_NAMES.get(what, N_("not a Slurm {what} name: {value}"))
        raise HeadError("usage", _(message).format(what=what, value=shown(value, 64)))
    return value


_REQUEUE = r"   Requeue=\d+ Restarts=(\d{1,6}) BatchFlag=\d+ Reboot=\d+ ExitCode=(\d{1,3}:\d{1,3})"


def scontrol_detail(out: str, job_id: int, name: str) -> dict[str, Any]:
    """Exit, restarts and output file of one job from ``scontrol show job ID``. The
    record's name (which squeue gave) is skipped whole; the exit line is Slurm's own,
    before any free text; ``StdOut=`` comes after the comment and working directory
    (anybody's text), so the last such line is Slurm's."""
    m = re.match(parse.HEADER, out)
    at = None if m is None or int(m.group(1)) != job_id else parse.after_name(out, m, name)
    if at is None:
        return {}
    body = out[at:]
    detail: dict[str, Any] = {}
    fixed, _, free = body.partition("\n   MinCPUsNode=")
    for line in fixed.split("\n"):
        m = re.fullmatch(_REQUEUE, line)
        if m is not None:
            code, sig = parse.exit_code(m.group(2))
            detail.update(requeues=int(m.group(1)), exit_code=code, exit_signal=sig)
    outs = [line for line in free.split("\n") if line.startswith("   StdOut=")]
    if outs:
        path = outs[-1].removeprefix("   StdOut=")
        if path.startswith("/") and "\x00" not in path:
            detail["log_path"] = str(Path(path))
    return detail


_FACTORS = ("total", "age", "fair_share", "job_size", "partition", "qos", "nice")


def sprio_factors(out: str, job_id: int) -> dict[str, int] | None:
    """``sprio -o %i|%Y|%A|%F|%J|%P|%Q|%N`` of one job: its priority and each factor
    (numbers only; a line that is not one is ignored)."""
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 1 + len(_FACTORS) or parts[0] != str(job_id):
            continue
        values = [p.strip().lstrip("-") for p in parts[1:]]
        if all(v.isascii() and v.isdigit() and len(v) <= 12 for v in values):
            signs = [-1 if p.strip().startswith("-") else 1 for p in parts[1:]]
            return {k: sign * int(v) for k, v, sign in zip(_FACTORS, values, signs, strict=True)}
    return None


def start_estimate(out: str, job_id: int) -> dict[str, Any]:
    """``squeue --start -o %i|%S|%Y``: when and where Slurm expects the job to start."""
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] == str(job_id):
            nodes = parse.text(parts[2])
            return {"start": parse.timestamp(parts[1]), "nodes": nodes[:256] if nodes else None}
    return {"start": None, "nodes": None}


def sshare_standing(out: str, user: str) -> dict[str, Any] | None:
    """``sshare -P -o Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare``:
    the user's row (the first whose user is theirs)."""
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) != 7 or parts[1].strip() != user:
            continue
        try:
            return {
                "account": parts[0].strip()[:64],
                "raw_shares": parts[2].strip()[:16],
                "norm_shares": float(parts[3] or 0),
                "raw_usage": float(parts[4] or 0),
                "effective_usage": float(parts[5] or 0),
                "fair_share": float(parts[6] or 0),
            }
        except ValueError:
            continue
    return None
