"""``gputui drain``, ``undrain`` and ``unfence``: admins take a host or a GPU out of
the scheduler's hands (no new work on it), give it back, or clear the head's
automatic fence of a GPU.

Loaded only when one of them runs (``verbs.handler``). Everything shown comes from
the scheduler and is shown as untrusted text.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from gputui.cli.args import EXIT_OK
from gputui.cli.tables import gpu_lines
from gputui.common.i18n import _
from gputui.common.printable import shown
from gputui.scheduler.client.backend import SyncBackend
from gputui.wire.words import told_text


def run(backend: SyncBackend, a: argparse.Namespace) -> int:
    if a.verb == "drain":
        result = backend.drain(a.target, reason=a.reason)
    elif a.verb == "undrain":
        result = backend.undrain(a.target, reason=a.reason)
    else:
        result = backend.unfence(a.target, reason=a.reason)
    if a.json:
        json.dump(result, sys.stdout, indent=2, sort_keys=True)
        print()
        return EXIT_OK
    outcome = shown(told_text(result, "outcome"), 200) or _("done")
    print(f"{shown(a.target, 140)}: {outcome}")
    gpus = result.get("gpus")
    if isinstance(gpus, list):
        for line in gpu_lines(gpus, time.time()):
            print(f"  {line}")
    return EXIT_OK
