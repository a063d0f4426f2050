"""A board's problems as JSON: what ``gputui health --json`` prints and the head's
``health`` op answers (one shape for both)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gputui.health.board import Problem


def problem_json(p: Problem) -> dict[str, Any]:
    f = p.finding
    return {
        "key": f.key,
        "severity": f.severity,
        "host": f.host,
        "gpu": f.gpu,
        "uuid": f.uuid,
        "code": f.code,
        "title": f.title,
        "meaning": f.meaning,
        "action": f.action,
        "detail": f.detail,
        "first_seen": p.first_seen,
        "last_seen": p.last_seen,
        "count": p.count,
        "acknowledged": None
        if p.ack is None
        else {"by": p.ack.by, "note": p.ack.note, "at": p.ack.at},
    }


def unknown_json(unknown: Mapping[str, Iterable[tuple[int, str, str]]]) -> list[dict[str, Any]]:
    return [
        {"host": host, "gpu": gpu, "check": check, "reason": why}
        for host, items in sorted(unknown.items())
        for gpu, check, why in items
    ]


def not_applicable_json(
    not_applicable: Mapping[str, Iterable[tuple[int, str]]],
) -> list[dict[str, Any]]:
    return [
        {"host": host, "gpu": gpu, "check": check}
        for host, items in sorted(not_applicable.items())
        for gpu, check in items
    ]


def not_applicable_counts(
    not_applicable: Mapping[str, Iterable[tuple[int, str]]],
) -> dict[str, int]:
    """Per check: on how many GPUs it does not apply (their models lack the feature)."""
    counts: dict[str, int] = {}
    for items in not_applicable.values():
        for _, check in items:
            counts[check] = counts.get(check, 0) + 1
    return dict(sorted(counts.items()))
