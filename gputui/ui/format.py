"""Short, fixed-width renderings of readings: the words and numbers the grid shows.

Pure functions over plain values, so the grid, the detail pane and the tests agree
on one spelling of "3h12m" or "12.3/80.0G". ``None`` always becomes ``"-"``.
"""

from __future__ import annotations

import time

from gputui.common.durations import coarse_text
from gputui.common.i18n import N_, _
from gputui.common.text import cells as cell_count
from gputui.common.text import cut
from gputui.common.text import fit as fit_cells
from gputui.health import snapshot_is_stale
from gputui.telemetry import HostSnapshot, HostStatus

DASH = "-"
_PREFIXES = ("NVIDIA ", "Tesla ", "GeForce ", "Quadro ")


def short_model(name: str | None) -> str:
    """``"NVIDIA A100-SXM4-80GB"`` -> ``"A100-SXM4-80GB"``: the vendor says nothing new."""
    if not name:
        return _("unknown")
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix) :]
    return name


def data_age(seconds: float | None) -> str:
    """How old a host's data is: ``0.4s``, ``12s``, ``3m05s``, ``2h03m``."""
    if seconds is None:
        return DASH
    if seconds < 10:
        return f"{seconds:.1f}s"
    return duration(seconds)


def host_status_text(snapshot: HostSnapshot, now: float, stale_limit_s: float) -> str:
    """``live 1.2s`` / ``stale 42s`` / ``unreachable``: the status word and the data age.

    Stale by ``gputui.health``'s one rule (``stale_limit_s`` for a snapshot without a
    limit of its own), so the word always agrees with the colour.
    """
    status = snapshot.status
    age = snapshot.age(now)
    if status is HostStatus.LIVE or status is HostStatus.STALE:
        stale = snapshot_is_stale(snapshot, now, stale_limit_s)
        word = status_word(HostStatus.STALE if stale else HostStatus.LIVE)
        return f"{word} {data_age(age)}"
    return status_word(status)


STATUS_WORDS = {
    HostStatus.CONNECTING: N_("connecting"),
    HostStatus.LIVE: N_("live"),
    HostStatus.STALE: N_("stale"),
    HostStatus.UNREACHABLE: N_("unreachable"),
    HostStatus.AUTH_FAILED: N_("auth failed"),
    HostStatus.HOST_KEY_UNKNOWN: N_("host key unknown"),
    HostStatus.HOST_KEY_CHANGED: N_("host key changed"),
    HostStatus.HELPER_ERROR: N_("helper error"),
    HostStatus.NVML_ERROR: N_("nvml error"),
    HostStatus.STOPPED: N_("stopped"),
}
"""A host's status as a person reads it (its value, in English, is also its code)."""


def status_word(status: HostStatus) -> str:
    """``status`` in the reader's language: ``unreachable``, ``host key changed``."""
    return _(STATUS_WORDS.get(status, status.value))


def duration(seconds: float | None) -> str:
    """A coarse running time: ``45s``, ``12m``, ``3h12m``, ``2d04h``."""
    if seconds is None or seconds < 0:
        return DASH
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    return f"{minutes}m{secs:02d}s" if minutes < 10 else minutes_text(minutes)


def minutes_text(minutes: int) -> str:
    """Whole minutes, coarsely: ``12m``, ``3h05m``, ``2d04h``."""
    return "0m" if minutes < 1 else coarse_text(minutes * 60)


def gib(mib: int | float | None) -> str:
    """MiB as GiB with one decimal, ``"-"`` when unknown."""
    return DASH if mib is None else f"{mib / 1024:.1f}"


def mem_pair(used_mib: int | None, total_mib: int | None) -> str:
    """``12.3/80.0G``."""
    if used_mib is None and total_mib is None:
        return DASH
    if total_mib is not None and total_mib >= 100 * 1024:
        used = "-" if used_mib is None else f"{used_mib / 1024:.0f}"
        return f"{used}/{total_mib / 1024:.0f}G"
    return f"{gib(used_mib)}/{gib(total_mib)}G"


def mib(value: int | None) -> str:
    """Process memory as the grid spells memory: ``812M``, ``4.0G``, ``59.6G``, ``146G``.

    At most five cells, so the processes table can keep its MEM column narrow.
    """
    if value is None:
        return DASH
    if value < 1024:
        return f"{value}M"
    if value < 100 * 1024:
        return f"{value / 1024:.1f}G"
    return f"{value / 1024:.0f}G"


def power_pair(watts: float | None, limit: float | None) -> str:
    """``245/400W``."""
    if watts is None and limit is None:
        return DASH
    now = DASH if watts is None else f"{watts:.0f}"
    top = DASH if limit is None else f"{limit:.0f}"
    return f"{now}/{top}W"


def percent(value: float | None) -> str:
    return DASH if value is None else f"{value:.0f}%"


def temperature(value: int | None) -> str:
    return DASH if value is None else f"{value}°C"


def clock_time(epoch: float) -> str:
    """Wall-clock ``HH:MM:SS`` in local time."""
    return time.strftime("%H:%M:%S", time.localtime(epoch))


def retry_in(next_retry_at: float | None, now: float) -> str:
    """``retry in 8s`` (or empty when no retry is scheduled)."""
    if next_retry_at is None:
        return ""
    left = max(0.0, next_retry_at - now)
    if left < 1:
        return _("retry now")
    return _("retry in {time}").format(time=duration(left))


def truncate(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` display cells with an ellipsis (wide characters count 2)."""
    return cut(text, width)


def cells(text: str) -> int:
    """How many terminal cells ``text`` takes (wide characters count two)."""
    return cell_count(text)


def fit(text: str, width: int) -> str:
    """``text`` cut or padded to exactly ``width`` display cells, for a fixed column."""
    return fit_cells(text, width)
