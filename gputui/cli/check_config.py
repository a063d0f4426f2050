"""``gputui check-config [FILE]``: everything the console would refuse in hosts.yaml,
and what it would fail on later, one line each; else a one-screen summary."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from gputui.common.text import clean
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
        problems.append(
            f"{source}:{config.line_of('theme')}: theme: unknown theme {config.theme!r};"
            f" known themes: {', '.join(known)}"
        )
    missing, unusable = file_findings(config, warn="" if strict else "warning: ")
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


def summarise(config: Config, source: Path, max_rows: int = 15) -> str:
    """A one-screen summary of a valid config."""
    hosts = config.resolved()
    pools = Counter(h.pool for h in hosts)
    pool_text = ", ".join(f"{name} ({count})" for name, count in sorted(pools.items())) or "none"
    sims = sum(1 for h in hosts if h.sim)
    head = ", ".join(config.head.hosts) if config.head else "none (monitoring only)"
    lines = [
        f"{clean(str(source), 512)}: OK",
        f"  hosts     {len(hosts)}" + (f" ({sims} simulated)" if sims else ""),
        f"  pools     {pool_text}",
        f"  refresh   every {config.refresh_interval:g}s;"
        f" stale after {config.health.stale_after_s:g}s",
        f"  theme     {config.theme}",
        f"  health    temp warn {config.health.temp_warn_c}°C / crit {config.health.temp_crit_c}°C,"
        f" memory warn {config.health.mem_warn_pct:g}%",
        f"  head      {head}",
        f"  connect   {config.connect_concurrency} handshakes at once,"
        f" timeout {config.defaults.connect_timeout:g}s",
    ]
    if hosts:
        # VIA: hosts.yaml's proxy_jump, else the host's ssh_config ProxyJump (files
        # read only; nothing is connected to).
        from gputui.fleet.connector import configured_jump

        lines.append("")
        rows = [("NAME", "ADDRESS", "USER", "VIA", "POOL", "GPUS")]
        for h in hosts[:max_rows]:
            address = h.address + (f":{h.port}" if h.port else "")
            rows.append(
                (
                    h.name,
                    address,
                    h.user or "(ssh config)",
                    configured_jump(h) or "-",
                    h.pool,
                    h.sim or "nvml",
                )
            )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += [
            "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows
        ]
        if len(hosts) > max_rows:
            lines.append(f"  ... and {len(hosts) - max_rows} more")
    return "\n".join(lines)
