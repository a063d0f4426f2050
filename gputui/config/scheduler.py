"""hosts.yaml's ``scheduler:`` section: priority classes, fair share, quotas,
preemption, backfill, ownership and idle flags, accounting prices.

Pydantic models only (the loader and its error lines are :mod:`gputui.config.loader`'s).
Every default here is the one hosts.example.yaml documents; a test keeps the two
in step.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gputui.common.i18n import _

_CLOCK = re.compile(r"([01]\d|2[0-3]):([0-5]\d)")

Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.+-]+$")]
Hours = Annotated[float, Field(gt=0, le=24 * 366)]
Share = Annotated[float, Field(gt=0, le=1e6)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class PriorityClass(_Model):
    """One priority class; the list's order is the classes' order, highest first."""

    name: Name
    groups: list[Name] | None = None
    """Who may submit in it: Unix (or ``groups:``) groups; left out: everyone."""
    preemptible: bool = False
    """Its jobs may be preempted by any higher class (``submit --preemptible`` makes
    one job so in any class)."""
    off_hours: bool = False
    """Its jobs start only inside the off-hours window."""
    time_default_hours: Hours | None = None
    """``--time`` when a submission gives none (none here: no limit)."""
    time_max_hours: Hours | None = None
    """The longest ``--time`` allowed (none here: any, and no limit at all too)."""

    @model_validator(mode="after")
    def _default_within_max(self) -> PriorityClass:
        if (
            self.time_default_hours is not None
            and self.time_max_hours is not None
            and self.time_default_hours > self.time_max_hours
        ):
            raise ValueError(_("time_default_hours must not be above time_max_hours"))
        return self


def _default_classes() -> list[PriorityClass]:
    return [
        PriorityClass(name="urgent"),
        PriorityClass(name="normal"),
        PriorityClass(name="low", preemptible=True),
        PriorityClass(name="night", preemptible=True, off_hours=True),
    ]


class OffHours(_Model):
    """The off-hours window, in the head's local time (``22:00``-``08:00`` spans midnight)."""

    start: str = "22:00"
    end: str = "08:00"

    @field_validator("start", "end")
    @classmethod
    def _clock(cls, value: str) -> str:
        if not _CLOCK.fullmatch(value):
            raise ValueError(
                _("{value} is not a time of day HH:MM (e.g. 22:00)").format(value=repr(value))
            )
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> OffHours:
        if self.start == self.end:
            raise ValueError(_("start and end are the same: the window would be empty"))
        return self

    def minutes(self) -> tuple[int, int]:
        """(start, end) as minutes after midnight."""
        h1, m1 = self.start.split(":")
        h2, m2 = self.end.split(":")
        return int(h1) * 60 + int(m1), int(h2) * 60 + int(m2)


class FairShare(_Model):
    half_life_days: Annotated[float, Field(gt=0, le=365)] = 7.0
    """Past GPU use counts half as much after this many days."""
    shares: dict[Name, Share] = Field(default_factory=dict, max_length=1024)
    """Each group's share of the cluster (any unit: they are compared with each other)."""
    default_share: Share = 1.0
    """The share of a group not listed in ``shares`` (and of a user in no group)."""


class Quota(_Model):
    """A weekly GPU-hour quota for one group, on one pool or on all of them."""

    group: Name
    gpu_hours_per_week: Annotated[float, Field(ge=0, le=1e7)]
    pool: Name | None = None
    """Only GPUs of this pool count (left out: every pool)."""


class Preemption(_Model):
    enabled: bool = True
    """Waiting work preempts lower-class preemptible (or over-quota) jobs."""
    min_runtime_minutes: Annotated[float, Field(ge=0, le=10080)] = 10.0
    """A job that started less than this ago is never preempted."""


class Ownership(_Model):
    mode: Literal["off", "warn", "enforce"] = "warn"
    """A process on a GPU its owner holds no job or claim on: flagged (``warn``), or
    also sent SIGTERM after ``grace_s`` and audited (``enforce``)."""
    grace_s: Annotated[float, Field(ge=0, le=86400)] = 300.0
    """How long a flagged process may stay before ``enforce`` signals it."""
    exempt_users: list[Name] = Field(default_factory=list, max_length=1024)
    """Users whose processes are never flagged (e.g. a monitoring agent's)."""


CardProblem = Literal["phantom", "rogue", "warning", "critical"]
"""What the head knows is wrong with a card (``placement``): ``phantom`` memory held
by no process, a ``rogue`` process on a card nobody was given, a health ``warning``,
a ``critical`` health problem."""


def _avoided() -> list[CardProblem]:
    return ["phantom", "rogue", "warning"]


def _never_used() -> list[CardProblem]:
    return ["critical"]


class Placement(_Model):
    """Which cards placement puts last and which it never uses, by what is wrong
    with them (a card with none of these problems is clean, and comes first)."""

    avoid: list[CardProblem] = Field(default_factory=_avoided, max_length=4)
    """Cards with one of these are used only when no clean card fits the request."""
    never: list[CardProblem] = Field(default_factory=_never_used, max_length=4)
    """Cards with one of these take no new job or claim until it clears."""

    @model_validator(mode="after")
    def _each_once(self) -> Placement:
        for name, kinds in (("avoid", self.avoid), ("never", self.never)):
            twice = sorted({k for k in kinds if kinds.count(k) > 1})
            if twice:
                said = _("{value} is given twice").format(value=repr(twice[0]))
                raise ValueError(f"{name}: {said}")
        both = sorted(set(self.avoid) & set(self.never))
        if both:
            raise ValueError(
                _("{value} is in both avoid and never: give it in one").format(value=repr(both[0]))
            )
        return self


class Accounting(_Model):
    price_per_kwh: Annotated[float, Field(ge=0, le=1e4)] = 0.0
    """The price of a kWh of energy used by the GPUs."""
    gpu_hour_rate: dict[Name, Annotated[float, Field(ge=0, le=1e6)]] = Field(
        default_factory=dict, max_length=1024
    )
    """Per pool: what an allocated GPU-hour costs (depreciation)."""
    currency: Annotated[str, Field(min_length=1, max_length=8)] = "EUR"


class Power(_Model):
    """What to do about cards that are held (a claim or a job) but idle."""

    mode: Literal["off", "report", "lock"] = "off"
    """``off``: nothing; ``report``: usage and report count the energy (kWh and cost)
    of held-but-idle cards; ``lock``: that, and the head has the card's helper lock
    its clocks low until its utilisation rises or its holder changes."""
    idle_minutes: Annotated[float, Field(gt=0, le=10080)] = 30.0
    """A held card whose GPU and memory utilisation read 0 this long is held but idle."""

    @field_validator("mode", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        """YAML reads a bare ``off`` as false: that is ``off``."""
        return "off" if value is False else value


class Bookings(_Model):
    """What anyone may book ahead (``gputui book``); admins may book anything."""

    gpu_hours_per_week: Annotated[float, Field(ge=0, le=1e7)] = 336.0
    """GPU-hours a group's bookings may hold in any one week (Monday to Monday)."""
    max_days_ahead: Annotated[float, Field(gt=0, le=366)] = 14.0
    """How far ahead a booking may start."""
    max_hours: Hours = 168.0
    """The longest one booking may be."""


class SchedulerConfig(_Model):
    """The head's scheduling policy and accounting (hosts.yaml ``scheduler:``)."""

    classes: list[PriorityClass] = Field(
        default_factory=_default_classes, min_length=1, max_length=32
    )
    default_class: Name = "normal"
    """The class of a submission that names none."""
    off_hours: OffHours = Field(default_factory=OffHours)
    groups: dict[Name, list[Name]] = Field(default_factory=dict, max_length=1024)
    """Accounting groups by name, each a list of users; these come before Unix groups."""
    fair_share: FairShare = Field(default_factory=FairShare)
    quotas: list[Quota] = Field(default_factory=list, max_length=1024)
    preemption: Preemption = Field(default_factory=Preemption)
    backfill: bool = True
    """Smaller jobs start ahead of a blocked one only if their time limit ends before
    its reservation (EASY backfill); off: strict order, nothing jumps ahead."""
    idle_job_minutes: Annotated[float, Field(gt=0, le=10080)] = 60.0
    """A job whose GPUs all show 0% use this long is flagged idle and its owner told."""
    ownership: Ownership = Field(default_factory=Ownership)
    placement: Placement = Field(default_factory=Placement)
    accounting: Accounting = Field(default_factory=Accounting)
    power: Power = Field(default_factory=Power)
    bookings: Bookings = Field(default_factory=Bookings)
    private_data: bool = False
    """Like Slurm's ``PrivateData=jobs``: a job's command line, working directory and
    log path, and a claim's note (a ``gputui run`` claim's is its command), are shown
    only to their owner and to admins. Off (the default, as in Slurm): to everyone."""

    @model_validator(mode="after")
    def _consistent(self) -> SchedulerConfig:
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError("classes: " + _("a class name is given twice"))
        if self.default_class not in names:
            raise ValueError(
                _("default_class {name} is not one of the classes ({names})").format(
                    name=repr(self.default_class), names=", ".join(names)
                )
            )
        seen: set[tuple[str, str | None]] = set()
        for quota in self.quotas:
            key = (quota.group, quota.pool)
            if key in seen:
                said = _("group {group} pool {pool} given twice").format(
                    group=repr(quota.group), pool=repr(quota.pool)
                )
                raise ValueError(f"quotas: {said}")
            seen.add(key)
        return self

    def rank(self, name: str) -> int:
        """The class's place, 0 for the highest; an unknown class (removed from the
        config since) ranks below every known one."""
        for i, c in enumerate(self.classes):
            if c.name == name:
                return i
        return len(self.classes)

    def klass(self, name: str) -> PriorityClass | None:
        for c in self.classes:
            if c.name == name:
                return c
        return None

    def group_of(self, user: str, unix_groups: frozenset[str], primary: str) -> str:
        """The accounting group of ``user``: the ``groups:`` map first, then the first
        (by name) of their Unix groups that has a share or a quota, then their primary
        group; a user found nowhere is in their primary group at the default share."""
        for name, members in self.groups.items():
            if user in members:
                return name
        known = set(self.fair_share.shares) | {q.group for q in self.quotas}
        for name in sorted(unix_groups):
            if name in known:
                return name
        return primary
