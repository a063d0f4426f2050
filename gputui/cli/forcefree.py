"""``gputui force-free HOST:GPU --reason TEXT [--reset]``: take a stuck GPU back.

Admins only (the head checks, from the socket). The head pushes each step as it
ends (drain, stop, sigterm, sigkill, memory, and holders / reset when memory stays
held); each is printed as one line, ``STEP  ok|FAILED  OUTCOME``. Exit 0 when the
card ends free, 1 when a step failed or the head refused, 2 on bad arguments, 3
when the head cannot be reached (``verbs.main`` maps its errors the same way).
Loaded only when it runs (``verbs.handler``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gputui.cli.layout import pad
from gputui.common.i18n import N_, _, language, pgettext
from gputui.common.printable import shown
from gputui.scheduler.client.backend import SyncBackend
from gputui.scheduler.client.errors import HeadError
from gputui.wire.words import told_text

EXIT_OK, EXIT_FAILED = 0, 1
_STEP_CELLS = 8
_LINE_CELLS = 400
_STEPS = {
    "drain": N_("drain"),
    "stop": N_("stop"),
    "sigterm": "SIGTERM",
    "sigkill": "SIGKILL",
    "memory": N_("memory"),
    "holders": N_("holders"),
    "reset": N_("reset"),
}
"""A step's code as its line names it: the code itself in English."""


def _step_name(code: str) -> str:
    name = _STEPS.get(code)
    if name is None or language() == "en":
        return code
    return _(name)


def step_line(step: Any) -> str:
    """One pushed step as the line printed for it (hostile text made harmless)."""
    if not isinstance(step, dict):
        bad = _("the head sent a step that is not an object")
        return f"{pad('?', _STEP_CELLS)} {pad(_('FAILED'), 6)}    {bad}"
    name = _step_name(shown(str(step.get("step", "?")), _STEP_CELLS))
    mark = pgettext("step", "ok") if step.get("ok") is True else _("FAILED")
    outcome = shown(told_text(step, "outcome"), _LINE_CELLS)
    return f"{pad(name, _STEP_CELLS)} {pad(mark, 6)}  {outcome}"


def run(backend: SyncBackend, a: argparse.Namespace) -> int:
    host, gpu = a.gpu
    if not a.reason.strip():
        print("gputui force-free: " + _("--reason must say why (it is audited)"), file=sys.stderr)
        return 2
    printed = 0

    def on_step(step: Any) -> None:
        nonlocal printed
        printed += 1
        if not a.json:
            print(step_line(step), flush=True)

    try:
        result = backend.force_free(
            host=host, gpu=gpu, reason=a.reason, reset=a.reset, on_step=on_step
        )
    except HeadError as exc:
        if exc.code in ("bad-args", "usage"):
            raise HeadError("usage", exc.message) from None
        raise
    raw = result.get("steps")
    steps: list[Any] = raw if isinstance(raw, list) else []
    if a.json:
        json.dump(result, sys.stdout, indent=2, sort_keys=True)
        print()
    elif printed == 0:  # a retry answered from the head's log: no pushes came
        for step in steps:
            print(step_line(step))
    free = result.get("free") is True
    if not a.json:
        where = shown(str(result.get("target", f"{host}:{gpu}")), 140)
        print(
            _("{where} is free; it stays drained until `gputui undrain {where}`").format(
                where=where
            )
            if free
            else _("{where} is not free: see the step marked FAILED").format(where=where)
        )
    return EXIT_OK if free else EXIT_FAILED
