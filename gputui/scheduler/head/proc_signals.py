"""``ProcessSignals``: a console's signal to a process on a GPU, sent by the head.

The head logs in to its hosts as root, so the kernel will not stop it from
signalling anyone's process: the owner check here is the only guard. The process
must be in the head's last sample of that host (the same pid on the same GPU, with
the same start time when the console gives one), and its owner there (the sample's
uid) must be the caller, unless the caller is an admin. An admin's signal to another
user's process is audited (``signal``, the owner named, so they see the row too)
before it is sent, and its outcome written into that row once the host answered.
The host verifies the process again before it acts (``HostOps.signal_process``), so
a pid reused since the sample is never hit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputui.common.i18n import N_
from gputui.common.printable import owner_name
from gputui.scheduler.head.actions import Context, audited
from gputui.scheduler.head.forcefree import CallTx
from gputui.scheduler.head.hostops import GpuProcess, HostAnswer, HostOps, signal_outcome
from gputui.scheduler.head.watch.hosts import HostWatch
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.op_args import SignalArgs
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.api import Tx
from gputui.wire.messages import GpuSample, ProcessSample
from gputui.wire.words import say

ACTION = "signal"


class ProcessSignals:
    """The head's ``signal`` requests (run as tasks, one per request)."""

    def __init__(
        self,
        *,
        watch: HostWatch,
        hosts: HostOps,
        call_tx: CallTx,
    ) -> None:
        self.watch = watch
        self.hosts = hosts
        self.call_tx = call_tx

    async def run(self, conn: Connection, request: wire.Request) -> None:
        try:
            result = await self.signal(conn.caller, request.args)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        conn.send(wire.response(request.id, result))

    async def signal(self, caller: Caller, args: SignalArgs) -> dict[str, Any]:
        if args.host not in self.watch.host_pools:
            raise wire.Refusal(
                "unknown-host",
                say(
                    N_("signal {host} pid {pid}: the head has no host {name}"),
                    host=args.host,
                    pid=args.pid,
                    name=repr(args.host),
                ),
            )
        gpu, proc = self._find(args)
        if gpu is None or proc is None:
            raise wire.Refusal(
                "gone",
                say(
                    N_(
                        "signal {host} pid {pid}: no such process on GPU {gpu_uuid} in the head's"
                        " last sample (it may have ended)"
                    ),
                    host=args.host,
                    pid=args.pid,
                    gpu_uuid=args.gpu_uuid,
                ),
            )
        owner = owner_name(proc.user, proc.uid, unknown="an unknown user")
        mine = proc.uid is not None and caller.owns(proc.uid)
        if not mine and not caller.admin:
            raise wire.Refusal(
                "denied",
                say(
                    N_(
                        "signal {host} pid {pid}: it is {owner}'s process; you may signal only"
                        " your own (admins: anyone's)"
                    ),
                    host=args.host,
                    pid=args.pid,
                    owner=owner,
                ),
            )
        target = f"{args.host}:{gpu.index} pid {proc.pid}"
        audit_id = None
        if not mine:
            audit_id = await self.call_tx(_audit(caller, target, owner, args))
        answer = await self.hosts.signal_process(
            args.host,
            GpuProcess(gpu.uuid, proc.pid, proc.uid, proc.start_ticks),
            args.signal,
        )
        if audit_id is not None:
            await self.call_tx(_outcome(audit_id, args.signal, answer))
        if not answer.ok:
            code = answer.code or "refused"
            raise wire.Refusal(
                code,
                say(
                    N_("signal {host} pid {pid}: SIG{signal} not delivered: {message}"),
                    host=args.host,
                    pid=args.pid,
                    signal=args.signal,
                    message=answer.message,
                ),
            )
        method = answer.value.get("method") if isinstance(answer.value, dict) else None
        return {"delivered": True, "method": method, "pid": proc.pid, "audited": audit_id}

    def _find(self, args: SignalArgs) -> tuple[GpuSample | None, ProcessSample | None]:
        _, sample = self.watch.samples().get(args.host, (0, None))
        if sample is None:
            return None, None
        for gpu in sample.gpus:
            if gpu.uuid != args.gpu_uuid:
                continue
            for proc in gpu.processes:
                if proc.pid != args.pid:
                    continue
                if args.start_ticks is not None and proc.start_ticks != args.start_ticks:
                    continue
                return gpu, proc
        return None, None


def _audit(
    caller: Caller, target: str, owner: str, args: SignalArgs
) -> Callable[[Tx, Context], int | None]:
    def write(tx: Tx, ctx: Context) -> int | None:
        reason = args.reason or "from the console"
        row = audited(tx, ctx, caller, ACTION, target=target, owner=owner, reason=reason)
        row.outcome = f"SIG{args.signal} sending"
        tx.flush()
        return row.id

    return write


def _outcome(audit_id: int, signal: str, answer: HostAnswer) -> Callable[[Tx, Context], None]:
    def write(tx: Tx, ctx: Context) -> None:
        row = tx.audit_row(audit_id)
        if row is not None:
            row.outcome = signal_outcome(f"SIG{signal}", answer)

    return write
