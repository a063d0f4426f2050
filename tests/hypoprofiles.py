"""Hypothesis profiles: ``ci``, the default and what ``make test`` runs, and ``dev``.

``ci`` keeps every test's own example counts (the suite's strength), with no
deadline: a test's examples are judged by what they check, never by how long a
loaded machine took (the suite runs in parallel, beside other work). ``dev``
(``pytest --hypothesis-profile=dev``, or ``HYPOTHESIS_PROFILE=dev``) runs a tenth of
each test's examples, at least one, for a quick pass while working; it is never
what decides whether a change is good.

A test's own ``@settings(max_examples=N)`` outranks any profile, so ``dev`` scales
the counts the collected tests carry (``scale_examples``); the ``ci`` profile
leaves them as they are.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import settings

CI, DEV = "ci", "dev"
FULL = 100
"""Hypothesis's own default count: a profile's ``max_examples`` over this is the share
of each test's count it runs."""

settings.register_profile(CI, deadline=None, print_blob=True)
settings.register_profile(DEV, parent=settings.get_profile(CI), max_examples=FULL // 10)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", CI))


def _scaled(given: Any, share: float) -> Any:
    return settings(given, max_examples=max(1, round(given.max_examples * share)))


def scale_examples(items: list[pytest.Item]) -> None:
    """Under a profile smaller than ``ci``, each collected test's own count times the
    profile's share (hypothesis' ``@given`` tests and rule-based state machines)."""
    share = settings().max_examples / FULL
    if share >= 1:
        return
    done: set[int] = set()
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and id(test) not in done:
            done.add(id(test))
            test._hypothesis_internal_use_settings = _scaled(own, share)  # type: ignore[union-attr]
        case = getattr(item, "cls", None)
        if isinstance(getattr(case, "settings", None), settings) and id(case) not in done:
            done.add(id(case))
            case.settings = _scaled(case.settings, share)  # type: ignore[union-attr]
