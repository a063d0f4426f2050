"""``gputui health`` without a head, through a real OpenSSH sshd to simulated hosts:
each health-reading fault is found (the probe judges a health reading, not the
sample after it), and a check that could not be made is never "ok" (exit 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clikit import gputui
from conftest import SYSTEM_PYTHON, Sshd

pytestmark = [pytest.mark.sshd, pytest.mark.root]


def hosts_yaml(sshd: Sshd, hosts: list[dict[str, Any]], **top: Any) -> str:
    data: dict[str, Any] = {
        "defaults": {
            "user": sshd.user,
            "port": sshd.port,
            "identity_file": str(sshd.client_key_path),
            "known_hosts": str(sshd.known_hosts),
            "ssh_config": None,
            "python": SYSTEM_PYTHON,
            "connect_timeout": 5,
        },
        "refresh_interval": 0.5,
        "hosts": [{"address": "127.0.0.1", **h} for h in hosts],
        **top,
    }
    return json.dumps(data)  # YAML is a superset of JSON


@pytest.mark.parametrize(
    ("spec", "code", "severity"),
    [
        ("1xa100-80gb,fault=remap-failed@0", "remap-failed", "crit"),
        ("1xa100-80gb,fault=nvlink-down@0", "nvlink-down", "crit"),
        ("1xh100,fault=fabric@0", "fabric", "crit"),
        ("1xa100-80gb,fault=persistence-off@0", "persistence-off", "warn"),
        ("1xv100,fault=retired@0", "retired-pages", "warn"),
    ],
)
def test_a_fault_only_a_health_reading_shows_is_found(
    sshd: Sshd, tmp_path: Path, spec: str, code: str, severity: str
) -> None:
    health = {"expect_persistence": True}
    text = hosts_yaml(sshd, [{"name": "h1", "sim": spec + ",name=h1"}], health=health)
    rc, out, err = gputui(tmp_path, text, "health", "--json", "--wait", "30")
    report = json.loads(out)
    found = {(p["code"], p["severity"]) for p in report["problems"]}
    assert (code, severity) in found, (report, err)
    assert rc == {"crit": 2, "warn": 1}[severity]


def test_a_clean_host_is_ok_and_a_check_not_made_is_unknown_not_ok(
    sshd: Sshd, tmp_path: Path
) -> None:
    text = hosts_yaml(sshd, [{"name": "h1", "sim": "1xa100-80gb,name=h1"}])
    rc, out, err = gputui(tmp_path, text, "health", "--wait", "30")
    assert (rc, out.strip()) == (0, "no problems on 1 host"), err
    # A reading NVML could not take (temperature answers Unknown): nothing found
    # wrong, but not all was checked: exit 4, and said so.
    text = hosts_yaml(sshd, [{"name": "h1", "sim": "1xa100-80gb,name=h1,fault=unknown@0"}])
    rc, out, err = gputui(tmp_path, text, "health", "--wait", "30")
    assert rc == 4, (out, err)
    assert "not checked (unknown, not ok): h1: temperature (Unknown)" in out
