"""What the policy reads of the stored work: a job's and a claim's fields, the
queries ``line.build`` makes, and the states a job passes through.

Protocols, so the policy imports no store: the store's ``Job`` and ``Claim`` rows and
its transaction satisfy them as they are (a test stand-in with the same attributes
does too). Every field is read-only here: the policy reads rows and never writes one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

LIVE_JOB_STATES = frozenset({"starting", "running", "killing", "preempting", "unknown"})
PENDING_JOB_STATES = frozenset({"queued", "held"})
FINAL_JOB_STATES = frozenset({"completed", "failed", "timeout", "killed", "cancelled"})


class JobRow(Protocol):
    """A job as the line reads it (the store's ``Job``)."""

    @property
    def id(self) -> int | None: ...
    @property
    def user(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def pool(self) -> str | None: ...
    @property
    def host_constraint(self) -> str | None: ...
    @property
    def priority(self) -> str: ...
    @property
    def preemptible(self) -> bool: ...
    @property
    def booking_id(self) -> int | None: ...
    @property
    def time_limit_s(self) -> float | None: ...
    @property
    def submitted_at(self) -> float: ...
    @property
    def started_at(self) -> float | None: ...
    @property
    def state(self) -> str: ...
    @property
    def host(self) -> str | None: ...
    @property
    def gpu_uuids(self) -> str:
        """JSON list of GPU uuids."""
        ...

    @property
    def after(self) -> str:
        """JSON list of the job ids it waits for."""
        ...

    @property
    def after_ok(self) -> bool: ...
    @property
    def over_quota(self) -> bool: ...
    @property
    def array_id(self) -> int | None:
        """The array it is a task of (its first task's id), None when not in one."""
        ...

    @property
    def array_throttle(self) -> int | None:
        """At most this many of its array's tasks hold GPUs at once (None: any)."""
        ...

    @property
    def mig(self) -> str | None:
        """The MIG slice profile it asked for (None: whole cards)."""
        ...

    @property
    def interactive(self) -> bool:
        """A person is at its terminal (``run --pty``): it is never preempted."""
        ...


class ClaimRow(Protocol):
    """A claim as the line reads it (the store's ``Claim``)."""

    @property
    def id(self) -> int | None: ...
    @property
    def user(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def gpus(self) -> int: ...
    @property
    def wanted(self) -> str:
        """JSON list of the GPU uuids asked for by name."""
        ...

    @property
    def pool(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def mig(self) -> str | None: ...
    @property
    def host_constraint(self) -> str | None: ...
    @property
    def created_at(self) -> float: ...
    @property
    def granted_at(self) -> float | None: ...
    @property
    def expires_at(self) -> float | None: ...
    @property
    def max_duration_s(self) -> float | None: ...
    @property
    def booking_id(self) -> int | None: ...
    @property
    def host(self) -> str | None: ...
    @property
    def gpu_uuids(self) -> str: ...


J = TypeVar("J", bound=JobRow)
J_co = TypeVar("J_co", bound=JobRow, covariant=True)


class Rows(Protocol[J_co]):
    """The queries a line is built from (the store's transaction)."""

    def jobs(self, states: Iterable[str]) -> Sequence[J_co]:
        """The jobs in ``states``, oldest first."""
        ...

    def job_states(self, ids: Iterable[int]) -> Mapping[int, str]:
        """The state of each of these jobs that exists."""
        ...

    def queued_line(self, free: int, hosts: int = 0) -> Sequence[J_co]:
        """The queued jobs not in an array, and the first queued tasks of each array:
        as many as ``free`` GPUs could take, one for each of ``hosts`` (each task that
        cannot start may reserve a host) and one more; oldest first (an array's other
        waiting tasks are not read)."""
        ...

    def claims(self, states: Iterable[str]) -> Sequence[ClaimRow]:
        """The claims in ``states``, oldest first."""
        ...
