"""``gputui explain``'s text, from the head's answer: for the CLI and the console.

Stdlib only (the CLI stays light). Every value from the head is shown through
``shown`` (anything not printable becomes ``?``), cut to a width.
"""

from __future__ import annotations

import time
import unicodedata
from typing import Any

from gputui.common import printable
from gputui.common.durations import elapsed_text
from gputui.common.i18n import N_, _
from gputui.common.job_words import reason_text, state_text
from gputui.wire.words import shown as words_shown
from gputui.wire.words import told_text

REASONS = {
    "Priority": N_("GPUs that fit it are going to work ahead of it in line"),
    "Resources": N_("no host has enough free GPUs of the kind it asks for"),
    "Reservation": N_(
        "free GPUs are reserved for a job ahead whose start its time limit would delay"
    ),
    "QuotaExceeded": N_("its group is over a weekly quota: it gets only GPUs nothing else wants"),
    "OffHours": N_("its class starts only inside the off-hours window"),
    "Dependency": N_("it starts after other jobs end (--after / --after-ok)"),
    "Held": N_("held: it starts only after release-hold"),
    "Drained": N_("the GPUs that could take it are drained by an admin"),
    "Fenced": N_(
        "the GPUs that could take it are fenced off (a hardware fault; see gputui queue)"
        " or show a problem placement never uses"
    ),
    "HostDown": N_("the hosts that could take it are not answering"),
    "ClassNotAllowed": N_("its priority class is no longer in the configuration"),
    "Preempting": N_("lower-priority jobs are being stopped to make room for it"),
    "LoginUser": N_("only hosts the head reaches as another user could take it"),
}
"""What each of the head's wait reasons means, as a person reads it."""

WEEKDAYS = (N_("Mon"), N_("Tue"), N_("Wed"), N_("Thu"), N_("Fri"), N_("Sat"), N_("Sun"))
"""The days a moment names, in the chosen language (``strftime`` would say them in
the C locale's English whatever the language)."""

LABELS = {
    "line": N_("line"),
    "why": N_("why"),
    "class": N_("class"),
    "share": N_("share"),
    "quota": N_("quota"),
    "starts": N_("starts"),
    "reason": N_("reason"),
    "priority": N_("priority"),
}
"""``explain_pairs``' labels (the queue pane looks each up where it draws it)."""


def shown(text: object, width: int = 160) -> str:
    """``printable.shown``, cut at 160 unless told (explain's lines are short)."""
    return printable.shown(text, width)


def _reason(reason: str) -> str:
    """What one of the head's wait reasons means, in the chosen language."""
    meaning = REASONS.get(reason)
    return _(meaning) if meaning is not None else shown(reason)


def moment(ts: float) -> str:
    """``Thu 14:00`` (local time), in the chosen language (``周四 14:00``)."""
    t = time.localtime(ts)
    return _("{weekday} {time}").format(
        weekday=_(WEEKDAYS[t.tm_wday]), time=time.strftime("%H:%M", t)
    )


def when(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    if ts <= now:
        return _("now")
    return _("{at} (in {wait})").format(at=moment(ts), wait=elapsed_text(max(0.0, ts - now)))


def _quota_line(q: dict[str, Any]) -> str:
    used, limit = f"{q['used_gpu_h']:.1f}", f"{q['limit_gpu_h']:g}"
    if q["over"]:
        if q["pool"]:
            told = _("OVER: {used} of {limit} GPU-h this week ({pool})")
        else:
            told = _("OVER: {used} of {limit} GPU-h this week (all pools)")
    elif q["pool"]:
        told = _("within: {used} of {limit} GPU-h this week ({pool})")
    else:
        told = _("within: {used} of {limit} GPU-h this week (all pools)")
    return told.format(used=used, limit=limit, pool=shown(q["pool"] or "", 40))


def _limit_line(f: dict[str, Any]) -> str:
    limit = f["time_limit_s"]
    out = elapsed_text(limit) if limit else _("none (it never backfills)")
    if f["preemptible"]:
        out = _("{limit}; preemptible").format(limit=out)
    if f["off_hours_only"]:
        out = _("{limit}; starts only off hours").format(limit=out)
    return out


def _why(est: dict[str, Any], width: int = 160) -> str:
    """Why there is no estimate, in the chosen language where the head sent words."""
    words = est.get("why_words")
    said = words if isinstance(words, dict) else {}
    return shown(
        words_shown(shown(est.get("why"), width), said.get("msg"), said.get("args")), width
    )


def cells(text: str) -> int:
    """Display cells ``text`` takes: a wide (CJK) character two, a combining mark
    none (stdlib only: the CLI does not load rich for this)."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def _pad(text: str, width: int, *, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` display cells (never cut: a long id
    pushes the row, as ``str.ljust`` would)."""
    gap = " " * max(0, width - cells(text))
    return gap + text if right else text + gap


def _label(label: str, value: str) -> str:
    """``    class          value``: a factor's label padded by display cells."""
    return "    " + _pad(_(label), 14) + " " + value


def explain_lines(body: dict[str, Any], now: float, *, ahead: bool = True) -> list[str]:
    """The answer to ``explain`` as lines: place, reason, factors, reservation,
    estimate, and (``ahead``) the requests ahead of it."""
    if body.get("scheduler") == "slurm":
        return slurm_lines(body, now)
    job, f = body["job"], body["factors"]
    out = [
        _("job {id} ({name}) of {user}: {state}").format(
            id=job["id"],
            name=shown(job["name"], 60),
            user=shown(job["user"], 40),
            state=state_text(shown(job["state"], 20)),
        )
    ]
    reason = str(body.get("reason") or "")
    if body.get("position") is not None:
        out.append(
            "  "
            + _("place in line: {position} of {in_line}  reason: {reason}: {meaning}").format(
                position=body["position"],
                in_line=body["in_line"],
                reason=reason_text(shown(reason, 40)),
                meaning=_reason(reason),
            )
        )
    elif reason:
        out.append("  " + _("reason: {reason}").format(reason=reason_text(shown(reason))))
    as_of = f.get("as_of")
    if isinstance(as_of, (int, float)) and as_of > 0:
        at = time.strftime("%H:%M:%S", time.localtime(as_of))
        out.append("  " + _("factors (the scheduler's, worked out at {at}):").format(at=at))
    else:
        out.append("  " + _("factors:"))
    klass = _("{name} ({rank} of {count}: {names})").format(
        name=f["class"],
        rank=f["class_rank"],
        count=len(f["classes"]),
        names=_(", ").join(f["classes"]),
    )
    out.append(_label(N_("class"), shown(klass)))
    share = _(
        "{fair_share}  group {group}: {usage} GPU-h decayed (half-life {days} d), share {share}"
    ).format(
        fair_share=f"{f['fair_share']:.3f}",
        group=shown(f["group"], 40),
        usage=f"{f['usage_gpu_h']:.1f}",
        days=f"{f['half_life_days']:g}",
        share=f"{f['share']:g}",
    )
    out.append(_label(N_("fair share"), share))
    if f["quotas"]:
        out += [_label(N_("quota"), _quota_line(q)) for q in f["quotas"]]
    else:
        out.append(_label(N_("quota"), _("none for its group")))
    out.append(_label(N_("time limit"), _limit_line(f)))
    for dep in body.get("dependencies", []):
        told = (
            _("after job {id} has completed: it is {state}")
            if body.get("after_ok")
            else _("after job {id} has ended: it is {state}")
        )
        out.append("    " + told.format(id=dep["id"], state=state_text(shown(dep["state"], 20))))
    res = body.get("reservation")
    if res:
        start = res["start"]
        host = shown(res["host"], 60)
        if start is not None:
            told = _("reservation: {host} from {when}").format(host=host, when=when(start, now))
        else:
            told = _("reservation: {host} from when work there with no time limit ends").format(
                host=host
            )
        out.append("  " + told)
    est = body["estimate"]
    if est["start"] is not None:
        out.append(
            "  "
            + _("estimated start: {when} on {host}").format(
                when=when(est["start"], now), host=shown(est["host"], 60)
            )
        )
    elif body.get("position") is not None:
        out.append("  " + _("estimated start: unknown ({why})").format(why=_why(est)))
    out += [f"  {line}" for line in passed_lines(body)]
    listed = body.get("ahead", []) if ahead else []
    if listed:
        out.append("  " + _("ahead of it ({count}):").format(count=body["ahead_count"]))
        heads = (_("ID"), _("USER"), _("GPUS"), _("CLASS"), _("SHARE"))
        # Each column as wide as its header in this language, at least as in English.
        wide = [max(w, cells(h)) for w, h in zip((8, 12, 4, 8, 5), heads, strict=True)]
        out.append(
            "    "
            + " ".join(
                (
                    _pad(heads[0], wide[0]),
                    _pad(heads[1], wide[1]),
                    _pad(heads[2], wide[2], right=True),
                    _pad(heads[3], wide[3]),
                    _pad(heads[4], wide[4]),
                    "",
                    _("REASON"),
                )
            )
        )
        for w in listed:
            ref = ("j" if w["kind"] == "job" else "c") + str(w["id"])
            why = reason_text(shown(w["reason"], 24))
            if w["over_quota"]:
                why = _("{reason} over-quota").format(reason=why)
            share = _pad(f"{w['fair_share']:.3f}", wide[4])
            out.append(
                f"    {_pad(ref, wide[0])} {_pad(shown(w['user'], 12), wide[1])}"
                f" {_pad(str(w['gpus']), wide[2], right=True)}"
                f" {_pad(shown(w['class'], 8), wide[3])} {share}  {why}"
            )
        if body["ahead_count"] > len(listed):
            more = body["ahead_count"] - len(listed)
            out.append("    " + _("… and {count} more").format(count=more))
    return out


SLURM_REASONS = {
    "Resources": N_("no node has enough free GPUs (or CPUs, memory) for it now"),
    "Priority": N_("jobs of higher priority are ahead of it for these resources"),
    "Dependency": N_("it waits for the jobs it depends on (--dependency)"),
    "DependencyNeverSatisfied": N_("a job it depends on ended in a way that never satisfies it"),
    "JobHeldUser": N_("held by its owner: it starts only after release-hold"),
    "JobHeldAdmin": N_("held by an admin: it starts only after release-hold (by an admin)"),
    "BeginTime": N_("its start time (--begin) has not come"),
    "ReqNodeNotAvail": N_("a node it needs is down, drained or reserved"),
    "PartitionTimeLimit": N_("its time limit is over its partition's"),
    "QOSMaxGRESPerUser": N_("its owner is at the QOS's limit of GPUs a user"),
    "AssocGrpGRES": N_("its account is at its limit of GPUs"),
    "QOSGrpGRES": N_("its QOS is at its limit of GPUs"),
    "None": N_("not yet looked at by the scheduler"),
}
"""Slurm's common pending reasons (``squeue``'s REASON), as a person reads them."""


_SPRIO = (
    ("age", N_("age {value}")),
    ("fair_share", N_("fair share {value}")),
    ("job_size", N_("job size {value}")),
    ("partition", N_("partition {value}")),
    ("qos", N_("QOS {value}")),
)
"""sprio's factors, as ``explain`` of a Slurm job names them."""


def _slurm_reason(reason: str) -> str:
    """What a Slurm pending reason means, in the chosen language."""
    meaning = SLURM_REASONS.get(reason)
    return _(meaning) if meaning is not None else _("as Slurm says")


def slurm_lines(body: dict[str, Any], now: float) -> list[str]:
    """``explain`` of a Slurm job: squeue's reason, sprio's factors, sshare's fair
    share and ``squeue --start``'s estimate, on one screen."""
    job = body["job"]
    out = [
        _("job {id} ({name}) of {user}: {state}").format(
            id=job["id"],
            name=shown(job["name"], 60),
            user=shown(job["user"], 40),
            state=shown(job["state"], 20),
        )
    ]
    reason = str(body.get("reason") or "None")
    out.append(
        "  "
        + _("reason: {reason}: {meaning}").format(
            reason=shown(reason, 60), meaning=_slurm_reason(reason)
        )
    )
    prio = body.get("priority")
    if isinstance(prio, dict):
        parts = _(", ").join(_(label).format(value=prio.get(key, 0)) for key, label in _SPRIO)
        if prio.get("nice"):
            parts += _(", ") + _("nice {value}").format(value=prio["nice"])
        told = _("priority (sprio): {total} = {parts}").format(
            total=prio.get("total", 0), parts=parts
        )
        out.append("  " + told)
    elif job["state"] == "PENDING":
        out.append("  " + _("priority (sprio): not given"))
    share = body.get("fair_share")
    if isinstance(share, dict):
        told = _(
            "fair share (sshare): {fair_share}  account {account}: shares {shares}"
            " ({norm} of all), usage {usage}"
        ).format(
            fair_share=f"{share['fair_share']:.3f}",
            account=shown(share["account"], 40),
            shares=shown(share["raw_shares"], 16),
            norm=f"{share['norm_shares']:.3f}",
            usage=f"{share['effective_usage']:.3f}",
        )
        out.append("  " + told)
    else:
        why = shown(body.get("fair_share_why") or _("unknown"), 120)
        out.append("  " + _("fair share (sshare): {why}").format(why=why))
    est = body.get("estimate") or {}
    if job["state"] == "PENDING":
        start = est.get("start")
        if isinstance(start, (int, float)) and est.get("nodes"):
            told = _("estimated start (squeue --start): {when} on {nodes}").format(
                when=when(start, now), nodes=shown(est["nodes"], 60)
            )
        elif isinstance(start, (int, float)):
            told = _("estimated start (squeue --start): {when}").format(when=when(start, now))
        else:
            told = _(
                "estimated start (squeue --start): none yet (the backfill scheduler"
                " gives one once it has planned the job, and only for jobs with a time limit)"
            )
        out.append("  " + told)
    limit = job.get("time_limit_s")
    shown_limit = elapsed_text(limit) if limit else _("none")
    out.append("  " + _("time limit: {limit}").format(limit=shown_limit))
    return out


def passed_lines(body: dict[str, Any]) -> list[str]:
    """The cards that fit the job but were passed over (``scheduler.placement``), and why:
    ``gpu3 on node1 passed over: 20.0 GiB held by no process (used last)``."""
    out = []
    passed = body.get("passed_over")
    for p in passed if isinstance(passed, list) else []:
        if not isinstance(p, dict):
            continue
        if p.get("never") is True:
            told = _("gpu{index} on {host} passed over: {why} (never used)")
        else:
            told = _("gpu{index} on {host} passed over: {why} (used last)")
        out.append(
            told.format(
                index=shown(p.get("index"), 4),
                host=shown(p.get("host"), 40),
                why=shown(told_text(p, "why"), 120),
            )
        )
    return out


def explain_pairs(body: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """The answer to ``explain`` as short (label, value) pairs, for a narrow pane
    (labels in the chosen language)."""
    if body.get("scheduler") == "slurm":
        return slurm_pairs(body, now)
    f = body["factors"]
    reason = str(body.get("reason") or "")
    pairs: list[tuple[str, str]] = []
    if body.get("position") is not None:
        line = _("{position} of {in_line}: {reason}").format(
            position=body["position"],
            in_line=body["in_line"],
            reason=reason_text(shown(reason, 40)),
        )
        pairs.append((_(LABELS["line"]), line))
    if reason in REASONS:
        pairs.append((_(LABELS["why"]), _(REASONS[reason])))
    klass = _("{name} ({rank} of {count})").format(
        name=shown(f["class"], 40), rank=f["class_rank"], count=len(f["classes"])
    )
    pairs.append((_(LABELS["class"]), klass))
    share = _("{fair_share} ({group}: {usage} GPU-h)").format(
        fair_share=f"{f['fair_share']:.3f}",
        group=shown(f["group"], 30),
        usage=f"{f['usage_gpu_h']:.1f}",
    )
    pairs.append((_(LABELS["share"]), share))
    for q in f["quotas"]:
        told = (
            _("over: {used} of {limit} GPU-h")
            if q["over"]
            else _("within: {used} of {limit} GPU-h")
        )
        quota = told.format(used=f"{q['used_gpu_h']:.1f}", limit=f"{q['limit_gpu_h']:g}")
        pairs.append((_(LABELS["quota"]), quota))
    est = body["estimate"]
    if est["start"] is not None:
        starts = _("{when} on {host}").format(
            when=when(est["start"], now), host=shown(est["host"], 40)
        )
        pairs.append((_(LABELS["starts"]), starts))
    elif body.get("position") is not None:
        starts = _("unknown: {why}").format(why=_why(est, 80))
        pairs.append((_(LABELS["starts"]), starts))
    return pairs


def slurm_pairs(body: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """``slurm_lines`` as short (label, value) pairs, for the queue screen's pane."""
    reason = str(body.get("reason") or "None")
    pairs = [(_(LABELS["reason"]), shown(reason, 40)), (_(LABELS["why"]), _slurm_reason(reason))]
    prio = body.get("priority")
    if isinstance(prio, dict):
        told = _("{total} (fair share {fair_share})").format(
            total=prio.get("total", 0), fair_share=prio.get("fair_share", 0)
        )
        pairs.append((_(LABELS["priority"]), told))
    share = body.get("fair_share")
    if isinstance(share, dict):
        told = "{fair_share} ({account})".format(
            fair_share=f"{share['fair_share']:.3f}", account=shown(share["account"], 30)
        )
        pairs.append((_(LABELS["share"]), told))
    est = body.get("estimate") or {}
    start = est.get("start")
    if isinstance(start, (int, float)):
        pairs.append((_(LABELS["starts"]), when(start, now)))
    return pairs
