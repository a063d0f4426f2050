"""``force_free``: an admin takes a stuck GPU back, one visible step at a time.

The steps, each audited (``forcefree_tx``) and pushed to the caller as it ends
(``{"push": "force-free", "id": REQUEST, "step": {...}}``), then one answer with
every step's outcome:

1. ``drain``: no new claim or job lands on the card;
2. ``stop``: its jobs are killed (SIGTERM now, SIGKILL after ``kill_grace_s``, as
   any admin kill) and its claims released, every owner told; ``sigterm``: every
   other process on it gets SIGTERM through the helper's verified ``signal``;
3. ``sigkill``: once the card is empty or the grace period is over, SIGKILL for
   whatever is still on it;
4. ``memory``: the next sample must show the card with no process and its memory
   back under the orphan threshold (within ``memory_wait_s``);
5. ``holders`` when memory is still held with no process: what holds
   ``/dev/nvidia*`` on the host; ``reset`` (only when asked, permitted by
   ``head.allow_gpu_reset`` and the card is idle), then ``memory`` again.

A step that fails ends the run there and says which and why; the card stays
drained (an admin undrains it). Admins only: anyone else is refused before
anything changes. One force-free per card at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from gputui.common.i18n import N_
from gputui.common.tasks import within
from gputui.health.rules import ORPHAN_MEMORY_MIB
from gputui.scheduler.head import forcefree_tx as ftx
from gputui.scheduler.head.actions import Context
from gputui.scheduler.head.forcefree_tx import Run
from gputui.scheduler.head.hostops import GpuProcess, HostAnswer, HostOps
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.policy.lookup import gpus_named, no_gpu_words, no_host_words
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.store.api import Tx
from gputui.wire.messages import GpuSample
from gputui.wire.words import Arg, Words, joined, say

log = logging.getLogger(__name__)

MEMORY_WAIT_S = 30.0
"""How long step 4 waits for a sample showing the memory back."""
HOLDERS_SHOWN = 12
TxFn = Callable[[Tx, Context], Any]
"""A step's store work, run in the head's writer (``Head.call_tx``)."""
CallTx = Callable[[TxFn], Awaitable[Any]]


class TxCall:
    """A ``TxFn`` as the writer runs it (``batch`` item ``call``): in a savepoint of its
    own, its value or its ``Refusal`` kept for the one who waits on it."""

    def __init__(self, fn: TxFn) -> None:
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def __call__(self, tx: Tx, ctx: Context) -> None:
        try:
            with tx.savepoint():
                self.result = self.fn(tx, ctx)
        except Exception as exc:  # a Refusal, or a bug: raised again to the one waiting
            self.error = exc

    def value(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class Failed(Exception):
    """A step that failed: the run stops and says so."""


class ForceFrees:
    """Runs force-free requests for the head (a mixin-free helper of ``daemon.Head``)."""

    def __init__(
        self,
        *,
        call_tx: CallTx,
        watch: HostWatch,
        hosts: HostOps,
        grace_s: Callable[[], float],
        allow_reset: bool,
        clock: Callable[[], float],
        memory_wait_s: float = MEMORY_WAIT_S,
    ) -> None:
        self.call_tx = call_tx
        self.watch = watch
        self.hosts = hosts
        self.grace_s = grace_s
        self.allow_reset = allow_reset
        self.clock = clock
        self.memory_wait_s = memory_wait_s
        self.running: dict[str, str] = {}
        """GPU uuid -> who is force-freeing it now."""
        self._waiters: set[asyncio.Future[None]] = set()

    # -- samples ----------------------------------------------------------------------

    def sampled(self) -> None:
        """A host's snapshot came (the daemon calls this): wake whoever waits for one."""
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def _latest(self, run: Run) -> tuple[int, GpuSample | None]:
        count, sample = self.watch.samples().get(run.host, (0, None))
        if sample is None:
            return count, None
        return count, next((g for g in sample.gpus if g.uuid == run.uuid), None)

    async def _sample_where(
        self, run: Run, after: int, ok: Callable[[GpuSample], bool], timeout: float
    ) -> tuple[GpuSample | None, bool]:
        """The card in the first sample newer than ``after`` for which ``ok`` holds, or
        the last one seen when ``timeout`` passes first (False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: GpuSample | None = None
        while True:
            count, gpu = self._latest(run)
            if count > after and gpu is not None:
                last = gpu
                if ok(gpu):
                    return gpu, True
            left = deadline - loop.time()
            if left <= 0:
                return last, False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.add(waiter)
            try:
                await within(waiter, left)
            except asyncio.TimeoutError:
                pass
            finally:
                self._waiters.discard(waiter)

    # -- the request --------------------------------------------------------------------

    def _resolve(self, conn: Connection, request: wire.Request) -> Run:
        caller, args = conn.caller, request.args
        target = f"{args.host}:{args.gpu}"
        if not caller.admin:
            raise wire.Refusal(
                "denied",
                say(N_("force-free {target}: only an admin may force-free a GPU"), target=target),
            )
        if args.host not in self.watch.host_pools:
            raise wire.Refusal(
                "unknown-host",
                say(N_("force-free: {why}"), why=no_host_words(args.host, self.watch.host_pools)),
            )
        gpus = [g for g in self.watch.present_gpus() if g.host == args.host]
        found = gpus_named(gpus, args.gpu)
        if not found:
            raise wire.Refusal(
                "unknown-gpu",
                say(N_("force-free: {why}"), why=no_gpu_words(target, args.host, gpus)),
            )
        gpu = found[0]
        if not self.watch.live().get(args.host):
            raise wire.Refusal(
                "host-down",
                say(
                    N_("force-free {target}: {host} is not answering; nothing done"),
                    target=target,
                    host=args.host,
                ),
            )
        busy = self.running.get(gpu.uuid)
        if busy is not None:
            raise wire.Refusal(
                "busy",
                say(
                    N_("force-free {target}: {busy} is force-freeing it already"),
                    target=target,
                    busy=busy,
                ),
            )
        reason = " ".join(args.reason.split())
        return Run(
            caller=caller,
            host=args.host,
            index=gpu.index,
            uuid=gpu.uuid,
            reason=reason,
            want_reset=args.reset,
            conn=conn,
            request_id=request.id,
            rid=request.rid,
        )

    async def run(self, conn: Connection, request: wire.Request) -> None:
        try:
            run = self._resolve(conn, request)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        self.running[run.uuid] = run.caller.user
        try:
            body = await self._steps(run)
        except wire.Refusal as refusal:  # the store refused a step: nothing of it was kept
            why = say(
                N_("force-free {target}: {why} (steps done: {done})"),
                target=run.target, why=refusal.words or refusal.message, done=_steps_done(run),
            )  # fmt: skip
            conn.send(wire.error(request.id, refusal.code, why))
            return
        except Exception:  # a bug: say where it stopped, never leave the caller waiting
            log.exception("head: force-free of %s failed", run.target)
            why = say(
                N_("force-free {target}: internal error after the steps {done}"),
                target=run.target, done=_steps_done(run),
            )  # fmt: skip
            conn.send(wire.error(request.id, "internal", why))
            return
        finally:
            self.running.pop(run.uuid, None)
        conn.send({**body, "id": request.id})
        await conn.drain()

    async def _steps(self, run: Run) -> dict[str, Any]:
        first, drained = await self.call_tx(lambda tx, ctx: self._drain(tx, ctx, run))
        if first is not None:
            return dict(first)  # a retry of one that finished: its first answer
        await self._report(run, "drain", True, drained)
        free = False
        with contextlib.suppress(Failed):
            await self._stop(run)
            free = await self._check(run)
        body = wire.response(run.request_id, self._result(run, free))
        outcome = "the card is free (still drained)" if free else "the card is not free"
        await self.call_tx(lambda tx, ctx: self._finish(tx, ctx, run, body, outcome))
        return body

    def _result(self, run: Run, free: bool) -> dict[str, Any]:
        return {"target": run.target, "uuid": run.uuid, "free": free, "steps": run.steps}

    # -- steps in the writer -----------------------------------------------------------

    def _drain(self, tx: Tx, ctx: Context, run: Run) -> tuple[dict[str, Any] | None, Words]:
        first = ftx.first_answer(tx, run.caller, run.rid)
        if first is not None:
            return first, Words("")  # unused: the first answer goes back as it was
        outcome = ftx.drain_gpu(tx, run, ctx, self.watch)
        ftx.audit_step(tx, run, ctx.now, "drain", outcome.english())
        ctx.changed = True
        return None, outcome

    def _finish(self, tx: Tx, ctx: Context, run: Run, body: dict[str, Any], outcome: str) -> None:
        ftx.audit_step(tx, run, ctx.now, "done", outcome)
        ftx.remember(tx, run.caller, run.rid, body, ctx.now)

    # -- steps on the host --------------------------------------------------------------

    async def _stop(self, run: Run) -> None:
        _, gpu = self._latest(run)
        procs = gpu.processes if gpu is not None else ()
        strays = [ftx.Stray(p.pid, p.uid, p.user, p.start_ticks) for p in procs]
        stopped: ftx.Stopped = await self.call_tx(
            lambda tx, ctx: ftx.stop_work(tx, run, ctx, strays)
        )
        others = [s for s in strays if s.pid not in stopped.job_pids]
        await self._report(run, "stop", not stopped.refused, stopped.outcome(len(others)))
        ok, outcome = await self._signal(run, others, "TERM")
        await self._report(run, "sigterm", ok, outcome, audit=True)
        # The grace period, cut short by a sample of the card with nothing left on it.
        after, _ = self._latest(run)
        gpu, empty = await self._sample_where(run, after, _empty, self.grace_s())
        if empty:
            nothing = say(N_("not needed: nothing left"))
            await self._report(run, "sigkill", True, nothing, audit=True)
            return
        left = gpu.processes if gpu is not None else ()
        targets = [ftx.Stray(p.pid, p.uid, p.user, p.start_ticks) for p in left]
        ok, outcome = await self._signal(run, targets, "KILL")
        await self._report(run, "sigkill", ok, outcome, audit=True)

    async def _signal(self, run: Run, procs: list[ftx.Stray], signal: str) -> tuple[bool, Words]:
        """Verified ``signal`` to each of ``procs``: (all delivered or gone, what happened)."""
        if not procs:
            return True, say(N_("no process to signal"))
        parts: list[Words] = []
        ok = True
        for proc in procs:
            answer: HostAnswer = await self.hosts.signal_process(
                run.host, GpuProcess(run.uuid, proc.pid, proc.uid, proc.start_ticks), signal
            )
            who = f" ({proc.user})" if proc.user else ""
            pid, sig = proc.pid, f"SIG{signal}"
            if answer.ok:
                parts.append(
                    say(N_("pid {pid}{who} {signal} delivered"), pid=pid, who=who, signal=sig)
                )
            elif answer.code in GONE:
                parts.append(say(N_("pid {pid}{who} gone already"), pid=pid, who=who))
            else:
                ok = False
                why = answer.message
                parts.append(
                    say(N_("pid {pid}{who} not signalled: {why}"), pid=pid, who=who, why=why)
                )
        return ok, joined(parts)

    async def _check(self, run: Run) -> bool:
        """Step 4 (and 5): is the memory back; if not, who holds the card, and a reset."""
        if await self._memory(run):
            return True
        answer = await self.hosts.holders(run.host, run.index)
        if answer.ok:
            value = answer.value
            held = value["holders"]
            shown = [_holder_words(h) for h in held[:HOLDERS_SHOWN]]
            device, count = str(value["device"]), len(held)
            if shown:
                holders = joined(shown)
                outcome = say(
                    N_("{count} process(es) hold {device} or the shared files: {holders}"),
                    count=count, device=device, holders=holders,
                )  # fmt: skip
            else:
                outcome = say(
                    N_("{count} process(es) hold {device} or the shared files"),
                    count=count, device=device,
                )  # fmt: skip
            notes = list(value.get("notes", ()))
            await self._report(
                run, "holders", True, outcome, audit=True, holders=held,
                notes=notes,
            )  # fmt: skip
        else:
            cannot = say(N_("could not list them: {why}"), why=answer.message)
            await self._report(run, "holders", False, cannot, audit=True)
        if not run.want_reset:
            offer = say(
                N_("not asked: force-free again with --reset to reset the GPU")
                if self.allow_reset
                else N_("not permitted here (head.allow_gpu_reset is false)")
            )
            await self._report(run, "reset", False, offer, audit=True)
            return False
        if not self.allow_reset:
            refused = say(N_("refused: head.allow_gpu_reset is false in hosts.yaml"))
            await self._report(run, "reset", False, refused, audit=True)
            return False
        reset = await self.hosts.reset_gpu(run.host, run.index, run.uuid)
        if not reset.ok:
            by = say(N_("refused by {host}: {why}"), host=run.host, why=reset.message)
            await self._report(run, "reset", False, by, audit=True)
            return False
        ok, done = _reset_words(reset.value)
        await self._report(run, "reset", ok, done, audit=True)
        return ok and await self._memory(run)

    async def _memory(self, run: Run) -> bool:
        after, _ = self._latest(run)
        gpu, free = await self._sample_where(run, after, _free, self.memory_wait_s)
        wait = f"{self.memory_wait_s:g} s"
        if free and gpu is not None:
            used = say(N_("{used} MiB used, no process: free"), used=str(gpu.mem_used_mib))
            await self._report(run, "memory", True, used, audit=True)
            return True
        outcome: Words
        if gpu is None:
            outcome = say(N_("no sample of the card in {wait}"), wait=wait)
        elif gpu.state != "ok" and gpu.message:
            outcome = say(
                N_("the card reads {code}: {message}"), code=gpu.state, message=gpu.message
            )
        elif gpu.state != "ok":
            outcome = say(N_("the card reads {code}: no readings"), code=gpu.state)
        elif gpu.processes:
            pids = ", ".join(str(p.pid) for p in gpu.processes[:8])
            outcome = say(
                N_("{count} process(es) still on it after {wait} (pid {pids})"),
                count=len(gpu.processes), wait=wait, pids=pids,
            )  # fmt: skip
        elif gpu.mem_used_mib is None:
            error = gpu.errors.get("mem_used_mib", "?")
            outcome = say(N_("its memory use cannot be read ({error})"), error=error)
        else:
            held = say(N_("{used} MiB still held with no process"), used=str(gpu.mem_used_mib))
            await self._report(run, "memory", False, held, audit=True)
            return False
        await self._report(run, "memory", False, outcome, audit=True)
        raise Failed(outcome.english())

    async def _report(
        self,
        run: Run,
        step: str,
        ok: bool,
        outcome: Words,
        *,
        audit: bool = False,
        **extra: Any,
    ) -> None:
        """One step done: audited (unless its own transaction did) and pushed, its
        outcome the English line and beside it its words (``outcome_words``)."""
        line = outcome.english()
        if audit:
            await self.call_tx(lambda tx, ctx: ftx.audit_step(tx, run, ctx.now, step, line))
        view = {
            "step": step,
            "ok": ok,
            "outcome": line,
            "outcome_words": outcome.wire(),
            "at": self.clock(),
            **extra,
        }
        run.steps.append(view)
        run.conn.send({"push": "force-free", "id": run.request_id, "step": view})
        await run.conn.drain()


GONE = frozenset({"no-such-process", "not-on-gpu", "pid-reused"})
"""Signal refusals that mean the process is no longer there to signal."""


def _empty(gpu: GpuSample) -> bool:
    return not gpu.processes


def _free(gpu: GpuSample) -> bool:
    used = gpu.mem_used_mib
    return gpu.state == "ok" and not gpu.processes and used is not None and used < ORPHAN_MEMORY_MIB


def _reset_outcome(value: dict[str, Any]) -> tuple[bool, str]:
    """The ``reset`` step's outcome from the host's answer (a ``ResetResult`` dict)."""
    ok, said = _reset_words(value)
    return ok, said.english()


def _reset_words(value: dict[str, Any]) -> tuple[bool, Words]:
    """``_reset_outcome`` in words."""
    via = "nvidia-smi" if value.get("via") == "nvidia-smi" else "NVML"
    message = str(value.get("message") or "")
    if not value.get("reset"):
        error = str(value.get("error"))
        if message:
            template = N_("{via} did not reset it: {error} ({message})")
            return False, say(template, via=via, error=error, message=message)
        return False, say(N_("{via} did not reset it: {error}"), via=via, error=error)
    parts = [
        say(N_("GPU reset ({via}: {message})"), via=via, message=message)
        if message
        else say(N_("GPU reset"))
    ]
    used, procs = value.get("mem_used_mib"), value.get("processes")
    if used is not None and procs is not None:
        free = used < ORPHAN_MEMORY_MIB and procs == 0
        template = (
            N_("NVML then read {used} MiB used, {procs} process(es): free")
            if free
            else N_("NVML then read {used} MiB used, {procs} process(es): still held")
        )
        parts.append(say(template, used=str(used), procs=str(procs)))
    return True, joined(parts)


def _holder_words(holder: dict[str, Any]) -> Words:
    """One process that holds the card, as the holders step names it (its owner as
    every list names one: the name, else ``uid N``, else ``?``)."""
    user, uid = holder.get("user"), holder.get("uid")
    who: Arg = str(user) if user else "?" if uid is None else say(N_("uid {uid}"), uid=str(uid))
    what = str(holder.get("command") or "")[:60]
    devices = ",".join(holder.get("devices") or ())
    template = (
        N_("pid {pid} {who} {command} [{devices}] (the helper)")
        if holder.get("helper")
        else N_("pid {pid} {who} {command} [{devices}]")
    )
    return say(template, pid=str(holder.get("pid")), who=who, command=what, devices=devices)


_STEP_NAMES = {
    "drain": N_("drain"),
    "stop": N_("stop"),
    "sigterm": N_("sigterm"),
    "sigkill": N_("sigkill"),
    "memory": N_("memory"),
    "holders": N_("holders"),
    "reset": N_("reset"),
}
"""A step's code as words (its English the code itself)."""


def _steps_done(run: Run) -> Arg:
    """The steps ``run`` has done, for the line that says where it stopped."""
    codes = [str(s["step"]) for s in run.steps]
    if not codes:
        return say(N_("none"))
    return tuple(say(_STEP_NAMES[c]) if c in _STEP_NAMES else Words(c, {}, c) for c in codes)
