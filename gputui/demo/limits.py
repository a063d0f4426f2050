"""How big a demo cluster this machine can run: refused at once, in one line, if not.

Every simulated host costs the demo process open files: its SSH server's listening
socket, both ends of the console's SSH connection to it (server and client live in
this one process), and three pipes to the helper it runs -- six, measured; seven
where asyncio watches children with a pidfd (Python 3.12 and later). One spare
each covers a signalling command run beside the helper. The rest (the terminal,
the event loop, the workloads, files read while starting) is a fixed allowance.
Each host is also a helper process of about 20 MB, hence a fixed maximum.
"""

from __future__ import annotations

import errno
import resource

from gputui.common.i18n import _

MAX_DEMO_HOSTS = 256
"""The most simulated hosts ``gputui demo --hosts N`` starts (about 5 GB of helpers)."""
FDS_PER_HOST = 8
"""Open files the demo process holds per simulated host (6 measured, with room)."""
FDS_BASE = 64
"""Open files the demo process holds whatever its size."""


class DemoLimitError(Exception):
    """The demo cannot run at this size here; the message is one line."""


def fds_needed(hosts: int) -> int:
    """Open files the demo process needs for ``hosts`` simulated hosts."""
    return FDS_BASE + FDS_PER_HOST * hosts


def check_demo_size(hosts: int) -> None:
    """Refuse a demo this machine cannot run; raise the soft open-files limit if it
    is too low and the hard limit allows (the limit is what ``ulimit -n`` shows)."""
    if hosts > MAX_DEMO_HOSTS:
        raise DemoLimitError(
            _(
                "--hosts {hosts} is more than the demo's maximum of {most}"
                " simulated hosts (each is an SSH server and a helper process)"
            ).format(hosts=hosts, most=MAX_DEMO_HOSTS)
        )
    needed = fds_needed(hosts)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard == resource.RLIM_INFINITY or hard >= needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        except (OSError, ValueError):
            pass
        else:
            return
    fits = max_hosts(max(soft, _finite(hard)))
    if fits:
        said = _(
            "the demo needs {needed} open files for {hosts} hosts but the limit is {soft}"
            " (hard limit {hard}): raise it with `ulimit -n {needed}`, or run --hosts"
            " {fits} or fewer"
        )
    else:
        said = _(
            "the demo needs {needed} open files for {hosts} hosts but the limit is {soft}"
            " (hard limit {hard}): raise it with `ulimit -n {needed}`"
        )
    raise DemoLimitError(
        said.format(needed=needed, hosts=hosts, soft=soft, hard=_show(hard), fits=fits)
    )


def max_hosts(open_files: int) -> int:
    """The most simulated hosts that fit in ``open_files``."""
    return max(0, (open_files - FDS_BASE) // FDS_PER_HOST)


def start_error(exc: OSError, hosts: int) -> str:
    """One line for an ``OSError`` that stopped the demo starting."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return _(
            "the demo could not start {hosts} hosts: {reason};"
            " raise the open-files limit (`ulimit -n {needed}`) or run fewer hosts"
        ).format(hosts=hosts, reason=reason.lower(), needed=fds_needed(hosts))
    if exc.filename:
        return _("the demo could not start: {reason} ({where})").format(
            reason=reason, where=exc.filename
        )
    return _("the demo could not start: {reason}").format(reason=reason)


def _finite(limit: int) -> int:
    return 0 if limit == resource.RLIM_INFINITY else limit


def _show(limit: int) -> str:
    return _("unlimited") if limit == resource.RLIM_INFINITY else str(limit)
