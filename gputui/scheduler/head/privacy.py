"""``scheduler.private_data``: who sees a job's command line, working directory and
log path, and a claim's note (for a ``gputui run`` claim, its command).

Off (the default), everyone sees them, as Slurm shows them. On, like Slurm's
``PrivateData=jobs``, only the owner and admins do, in every read that carries them:
``show``, ``claims``, the state pushed to consoles (its claims and the holders
of GPUs) and the telemetry pushed to them (the command line of another user's
process on a GPU: ``hide_commands``). ``queue``, ``explain`` and ``wait`` carry
none of them (a job's name, which defaults to its command's file name, stays
public as in Slurm); ``logs`` and ``audit`` are already the owner's and admins' alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gputui.scheduler.client.deltas import HostView
from gputui.scheduler.server.peer import Caller

__all__ = [
    "PRIVATE_JOB_FIELDS",
    "hide_claim",
    "hide_commands",
    "hide_job",
    "sees",
    "state_for",
]

PRIVATE_JOB_FIELDS = ("argv", "cwd", "log_path", "conda", "venv", "image")
"""A job view's fields that ``private_data`` keeps to the owner and admins."""
HIDDEN = "(private)"
"""What stands in a claim's note the caller may not see."""


def sees(caller: Caller, owner_uid: int, private: bool) -> bool:
    """Whether ``caller`` may see the private fields of work owned by ``owner_uid``."""
    return not private or caller.admin or caller.owns(owner_uid)


def hide_job(view: dict[str, Any], caller: Caller, owner_uid: int, private: bool) -> dict[str, Any]:
    """``view`` (a full job view) without its private fields when ``caller`` may not
    see them, marked ``"private": true`` so a client can say so."""
    if sees(caller, owner_uid, private):
        return view
    shown = {k: v for k, v in view.items() if k not in PRIVATE_JOB_FIELDS}
    shown["private"] = True
    return shown


def hide_claim(
    view: dict[str, Any], caller: Caller, owner_uid: int, private: bool
) -> dict[str, Any]:
    """A claim view with its note hidden when ``caller`` may not see it."""
    if sees(caller, owner_uid, private) or not view.get("note"):
        return view
    return {**view, "note": HIDDEN}


def state_for(
    state: dict[str, Any], caller: Caller, owners: Mapping[int, int], private: bool
) -> dict[str, Any]:
    """The pushed state as ``caller`` may see it: ``owners`` maps each claim with a
    note to its owner's uid. Shared, unchanged, when nothing is hidden from them."""
    if not private or caller.admin:
        return state
    hidden = {cid for cid, uid in owners.items() if not caller.owns(uid)}
    if not hidden:
        return state
    claims = [
        {**c, "note": HIDDEN} if c.get("id") in hidden and c.get("note") else c
        for c in state.get("claims", ())
    ]
    return {**state, "claims": claims, "gpus": list(_gpus(state.get("gpus", ()), hidden))}


def _gpus(gpus: Iterable[dict[str, Any]], hidden: set[int]) -> Iterable[dict[str, Any]]:
    for gpu in gpus:
        holder = gpu.get("holder")
        if holder and holder.get("kind") == "claim" and holder.get("id") in hidden:
            yield {**gpu, "holder": {**holder, "name": HIDDEN}}
        else:
            yield gpu


def hide_commands(view: HostView, caller: Caller, private: bool) -> HostView:
    """A host's telemetry view (``deltas.HostView``) with the command line of every
    process ``caller`` may not see replaced by ``HIDDEN``: the rule of job commands,
    applied to the processes a sample lists (one whose owner is unknown is hidden)."""
    if not private or caller.admin:
        return view
    hidden = False
    procs: list[tuple[Mapping[str, Any], ...]] = []
    for listed in view.procs:
        shown: list[Mapping[str, Any]] = []
        for proc in listed:
            uid = proc.get("uid")
            if proc.get("command") and not (isinstance(uid, int) and caller.owns(uid)):
                shown.append({**proc, "command": HIDDEN})
                hidden = True
            else:
                shown.append(proc)
        procs.append(tuple(shown))
    return HostView(view.top, view.gpus, tuple(procs)) if hidden else view
