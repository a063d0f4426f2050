"""What placement makes of a card's problems: clean, used last, or never used.

The head knows more of a card than whether it is free: memory held by no process
(``phantom``), a process on a card nobody was given (``rogue``), a health problem
(``warning``, ``critical``). It hands each card's problems in as plain data
(``CardProblem``); hosts.yaml's ``scheduler.placement`` says which of them put a
card last (``avoid``) and which keep it out of use (``never``). Here a card's slot
is marked for the pass (``judged``), and ``passed_over`` says, for ``gputui
explain``, which cards that would fit a request were passed over, and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gputui.config.scheduler import Placement
from gputui.scheduler.policy.model import GpuSlot, Want

PHANTOM = "phantom"
ROGUE = "rogue"
WARNING = "warning"
CRITICAL = "critical"
KINDS = (CRITICAL, PHANTOM, ROGUE, WARNING)
"""Worst first: the order a card's problems are told in."""

CLEAN, LAST, NEVER = 0, 1, 2
"""A card's standing with placement."""


@dataclass(frozen=True, slots=True)
class CardProblem:
    """One thing the head knows is wrong with a card now."""

    kind: str
    """One of ``KINDS``."""
    why: str
    """One line for a person: ``20.0 GiB held by no process``."""


def standing(kinds: Iterable[str], rules: Placement) -> int:
    """``NEVER``, ``LAST`` or ``CLEAN`` for a card with problems of ``kinds``."""
    worst = CLEAN
    for kind in kinds:
        if kind in rules.never:
            return NEVER
        if kind in rules.avoid:
            worst = LAST
    return worst


def judged(slot: GpuSlot, kinds: Iterable[str], rules: Placement) -> GpuSlot:
    """``slot`` as placement sees it given its problems: a card never used is taken
    out as the head's own fences are (never healthy, ``fenced``: its request waits
    ``Fenced`` when only such cards could hold it); one avoided is ``last``."""
    level = standing(kinds, rules)
    if level == CLEAN:
        return slot
    never = level == NEVER
    return GpuSlot(
        slot.uuid,
        slot.host,
        slot.index,
        slot.pool,
        slot.model,
        slot.drained,
        slot.healthy and not never,
        slot.busy,
        slot.fenced or (never and slot.healthy),  # a host down stays HostDown
        not never,
    )


@dataclass(frozen=True, slots=True)
class Passed:
    """A card that fits a request, is free but for its problems, and was passed over."""

    host: str
    index: int
    uuid: str
    never: bool
    """Never used while the problem lasts (else used only when no clean card fits)."""
    why: str

    def line(self) -> str:
        how = "never used" if self.never else "used last"
        return f"gpu{self.index} on {self.host} passed over: {self.why} ({how})"


MAX_PASSED = 16
"""Cards ``passed_over`` names at most."""


def passed_over(
    want: Want,
    gpus: Sequence[GpuSlot],
    problems: Mapping[str, Sequence[CardProblem]],
    rules: Placement,
    busy: frozenset[str] | set[str] = frozenset(),
) -> list[Passed]:
    """The cards ``want`` fits that are not allocated (``busy``) nor drained, and
    that placement puts last or never uses for ``problems`` (by host, then index)."""
    out: list[Passed] = []
    for slot in sorted(gpus, key=lambda g: (g.host, g.index)):
        found = problems.get(slot.uuid)
        if not found or slot.uuid in busy or slot.drained or not want.fits(slot):
            continue
        level = standing((p.kind for p in found), rules)
        if level == CLEAN:
            continue
        counted = set(rules.never if level == NEVER else rules.avoid)
        why = "; ".join(p.why for p in found if p.kind in counted)
        out.append(Passed(slot.host, slot.index, slot.uuid, level == NEVER, why))
        if len(out) >= MAX_PASSED:
            break
    return out
