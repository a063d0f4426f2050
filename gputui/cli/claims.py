"""The claim verbs: ``gputui claim``, ``release``, ``claims`` and ``env``.

Loaded only when one of them runs (``verbs.handler``). ``env``'s line is built here
from the answer's UUIDs, each checked: whatever else the scheduler sends never
reaches the shell that evals it.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable

from gputui.cli.args import EXIT_OK, EXIT_REFUSED
from gputui.cli.here import this_host
from gputui.cli.layout import terminal_width
from gputui.cli.listing import every_page, known_user, nothing_line
from gputui.cli.tables import claims_table, print_json
from gputui.common.gpu_env import export_line, gpu_uuids
from gputui.common.i18n import _
from gputui.common.job_words import reason_text
from gputui.common.printable import shown
from gputui.scheduler.client.backend import Answer, SyncBackend
from gputui.scheduler.client.errors import HeadError


def claim(backend: SyncBackend, a: argparse.Namespace) -> int:
    result = backend.claim(
        gpus=a.gpus,
        gpu_refs=a.gpu,
        pool=a.pool,
        model=a.model,
        host=a.host,
        project=a.project,
        duration_s=a.duration,
        note=a.note,
        wait=not a.no_wait,
        mig=a.mig,
    )["claim"]
    if a.json:
        print_json(result)
    elif result["state"] == "active":
        print(
            _("claim c{id}: {gpus} on {host}").format(
                id=result["id"], gpus=", ".join(result["gpu_uuids"]), host=result["host"]
            )
        )
        print(_('use them with:  eval "$(gputui env)"'))
    else:
        print(
            _("claim c{id} waits ({reason}); see `gputui claims`").format(
                id=result["id"], reason=reason_text(result["reason"])
            )
        )
    return EXIT_OK


def release(backend: SyncBackend, a: argparse.Namespace) -> int:
    ids = [int(x[1:]) for x in a.gpu if re.fullmatch(r"c\d+", x)]
    refs = [x for x in a.gpu if not re.fullmatch(r"c\d+", x)]
    released = backend.release(claim_ids=ids, gpu_refs=refs, all=a.all, reason=a.reason)["released"]
    for c in released:
        if c["gpu_uuids"]:
            said = _("released c{id} ({gpus})").format(id=c["id"], gpus=", ".join(c["gpu_uuids"]))
        else:
            said = _("released c{id} (waiting)").format(id=c["id"])
        print(said)
    if not released:
        print(_("nothing to release"))
    return EXIT_OK


def claims(backend: SyncBackend, a: argparse.Namespace) -> int:
    def page(limit: int, after: int | None) -> Answer:
        return backend.claims(all=a.all, user=a.user, limit=limit, after=after)

    items, _ = every_page(page, "claims", a.verb)
    known_user(a.user, items)
    if a.json:
        print_json(items)
        return EXIT_OK
    for line in claims_table(items, time.time(), terminal_width()):
        print(line)
    if not items:
        print(nothing_line("claims", a))
    return EXIT_OK


def env(backend: SyncBackend, a: argparse.Namespace) -> int:
    host = a.host or this_host(backend)
    result = backend.env(host)
    job = result.get("slurm_job") if isinstance(result, dict) else None
    if isinstance(job, int) and not isinstance(job, bool) and 0 < job < 2**32:
        # Slurm: the claim is an allocation; srun runs in it by its job id.
        print(f"export SLURM_JOB_ID={job}")
        print(
            "# " + _("then: {command}").format(command=f"srun --jobid={job} --gres=gpu:N COMMAND"),
            file=sys.stderr,
        )
        return EXIT_OK
    if isinstance(result, dict) and "slurm_job" in result:
        print(
            "# "
            + _("no allocation of yours (gputui claim) in Slurm on {host}").format(
                host=shown(host, 64)
            ),
            file=sys.stderr,
        )
        return EXIT_REFUSED
    try:
        uuids = gpu_uuids(result.get("uuids") if isinstance(result, dict) else None)
    except ValueError:
        raise HeadError("protocol", _("the head's answer names no valid GPU UUIDs")) from None
    if not uuids:
        print(
            "# " + _("no active claim of yours on {host}").format(host=shown(host, 64)),
            file=sys.stderr,
        )
        return EXIT_REFUSED
    print(export_line(uuids))
    return EXIT_OK


HANDLERS: dict[str, Callable[[SyncBackend, argparse.Namespace], int]] = {
    "claim": claim,
    "release": release,
    "claims": claims,
    "env": env,
}
