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
from gputui.wire.words import Words, joined

PHANTOM = "phantom"
ROGUE = "rogue"
WARNING = "warning"
CRITICAL = "critical"
KINDS = (CRITICAL, PHANTOM, ROGUE, WARNING)
"""Worst first: the order a card's problems are told in."""

CLEAN, LAST, NEVER = 0, 1, 2
"""A card's standing with placement."""


class CardProblem:
    """One thing the head knows is wrong with a card now.

    ``kind``: one of ``KINDS``; ``why``: one line for a person (``20.0 GiB held by no
    process``); ``said``: ``why`` in words (None: a line of its own, a health
    finding's title). Given ``said`` alone, ``why`` is its English, made when first
    read: the head finds a card's problems on every sample of its host (a rogue
    process's line names the utilisation, which moves every second), and placement
    reads only their kinds; the line is for ``gputui explain`` and the GPU table.
    Immutable like the plain data it is (equal, and hashed, by its three parts).
    """

    __slots__ = ("_why", "kind", "said")

    kind: str
    said: Words | None
    _why: str | None

    def __init__(self, kind: str, why: str | None = None, said: Words | None = None) -> None:
        if why is None and said is None:
            raise ValueError("a card problem needs its line or its words")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "_why", why)
        object.__setattr__(self, "said", said)

    @property
    def why(self) -> str:
        """One line for a person (``said``'s English, made once, when first read)."""
        why = self._why
        if why is None:
            assert self.said is not None
            why = self.said.english()
            object.__setattr__(self, "_why", why)  # the same line each time: a cache
        return why

    def words(self) -> Words:
        """``why`` in words: its own, or the line as it is (shown in English)."""
        return self.said if self.said is not None else Words(self.why)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CardProblem is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"CardProblem is immutable: cannot delete {name}")

    def __reduce__(self) -> tuple[type[CardProblem], tuple[str, str | None, Words | None]]:
        # Copied and pickled through the constructor (its attributes cannot be set).
        return (CardProblem, (self.kind, self._why, self.said))

    def _parts(self) -> tuple[str, str, Words | None]:
        return (self.kind, self.why, self.said)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CardProblem):
            return NotImplemented
        return self._parts() == other._parts()

    def __hash__(self) -> int:
        return hash(self._parts())

    def __repr__(self) -> str:
        return f"CardProblem(kind={self.kind!r}, why={self.why!r}, said={self.said!r})"


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
        slot.vendor,
        slot.mig_profile,
        slot.mig_enabled,
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
    said: Words | None = None
    """``why`` in words, where the problems have them (see ``CardProblem.words``)."""

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
        told = [p for p in found if p.kind in counted]
        why = "; ".join(p.why for p in told)
        said = joined([p.words() for p in told])
        out.append(Passed(slot.host, slot.index, slot.uuid, level == NEVER, why, said))
        if len(out) >= MAX_PASSED:
            break
    return out
