"""``gputui check-config [FILE]``: everything the console would refuse in hosts.yaml,
and what it would fail on later, one line each; else a one-screen summary."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from gputui.common.i18n import N_, _
from gputui.common.text import cells, clean, fit
from gputui.config.loader import ConfigError, file_findings, find_config, load_config, require_hosts
from gputui.config.models import Config

EXIT_OK = 0


def check_config(path: str | None, strict: bool = False) -> int:
    """Everything the console would refuse, and what it would fail on later (an unknown
    theme, a key or known_hosts file that cannot be used), one line each; else a summary.

    A key or known_hosts file that does not exist is a warning (exit 0), as OpenSSH
    warns of a missing identity file and goes on: the example config, or a team's,
    names files a new machine does not have yet. ``strict`` makes it an error."""
    source = find_config(path)
    config = load_config(source)
    require_hosts(config)  # the same verdict as the console's
    from gputui.ui.themes import theme_names

    problems: list[str] = []
    known = theme_names()
    if config.theme not in known:
        said = _("unknown theme {theme}; known themes: {known}").format(
            theme=repr(config.theme), known=", ".join(known)
        )
        problems.append(f"{source}:{config.line_of('theme')}: theme: {said}")
    problems += _team_channels(config, source)
    missing, unusable = file_findings(config, warn="" if strict else _("warning:") + " ")
    problems += unusable
    if strict:
        problems += missing
    else:
        for line in missing:
            print(f"gputui: {clean(line, 1024)}", file=sys.stderr)
    if problems:
        raise ConfigError(problems)
    print(summarise(config, source))
    return EXIT_OK


def _team_channels(config: Config, source: Path) -> list[str]:
    """A team channel's URL no sender takes (``notify:``); one in ``url_file`` is the
    head's to read, and checked when it starts."""
    if not any(team.url for team in config.notify.channels):
        return []
    from gputui.scheduler.head.chat.channels import shown_of

    out = []
    for i, team in enumerate(config.notify.channels):
        if team.url is not None and shown_of(team.url) is None:
            field = f"notify.channels[{i}].url"
            said = _("apprise does not know this URL (see its list of services)")
            out.append(f"{source}:{config.line_of(field)}: {field}: {said}")
    return out


SUMMARY_LABELS = (
    N_("hosts"),
    N_("pools"),
    N_("refresh"),
    N_("theme"),
    N_("health"),
    N_("head"),
    N_("connect"),
)
"""The summary's line titles, in its order (looked up where it is printed)."""
HOST_HEADER = (N_("NAME"), N_("ADDRESS"), N_("USER"), N_("VIA"), N_("POOL"), N_("GPUS"))


def summarise(config: Config, source: Path, max_rows: int = 15) -> str:
    """A one-screen summary of a valid config, in the language chosen (the names in
    it as they are)."""
    hosts = config.resolved()
    pools = Counter(h.pool for h in hosts)
    pool_text = ", ".join(f"{name} ({count})" for name, count in sorted(pools.items()))
    sims = sum(1 for h in hosts if h.sim)
    health = config.health
    values = (
        _("{count} ({sims} simulated)").format(count=len(hosts), sims=sims)
        if sims
        else str(len(hosts)),
        pool_text or _("none"),
        _("every {every}s; stale after {stale}s").format(
            every=f"{config.refresh_interval:g}", stale=f"{health.stale_after_s:g}"
        ),
        config.theme,
        _("temp warn {warn}°C / crit {crit}°C, memory warn {memory}%").format(
            warn=health.temp_warn_c, crit=health.temp_crit_c, memory=f"{health.mem_warn_pct:g}"
        ),
        ", ".join(config.head.hosts) if config.head else _("none (monitoring only)"),
        _("{count} handshakes at once, timeout {timeout}s").format(
            count=config.connect_concurrency, timeout=f"{config.defaults.connect_timeout:g}"
        ),
    )
    labels = [_(label) for label in SUMMARY_LABELS]
    room = max(10, *(cells(label) + 2 for label in labels))
    lines = [_("{file}: OK").format(file=clean(str(source), 512))]
    lines += [f"  {fit(label, room)}{value}" for label, value in zip(labels, values, strict=True)]
    if hosts:
        # VIA: hosts.yaml's proxy_jump, else the host's ssh_config ProxyJump (files
        # read only; nothing is connected to).
        from gputui.fleet.connector import configured_jump

        lines.append("")
        rows = [tuple(_(title) for title in HOST_HEADER)]
        for h in hosts[:max_rows]:
            address = h.address + (f":{h.port}" if h.port else "")
            rows.append(
                (
                    h.name,
                    address,
                    h.user or _("(ssh config)"),
                    configured_jump(h) or "-",
                    h.pool,
                    h.sim or "nvml",
                )
            )
        widths = [max(cells(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += [
            "  " + "  ".join(fit(c, w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows
        ]
        if len(hosts) > max_rows:
            lines.append("  " + _("... and {n} more").format(n=len(hosts) - max_rows))
    return "\n".join(lines)
