"""hosts.yaml: valid files load; each kind of mistake gives one FILE:LINE: field: problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputui.config import ConfigError, find_config, load_config, parse_config

REPO = Path(__file__).resolve().parents[2]


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "hosts.yaml")
    return info.value.lines


def test_example_file_is_valid() -> None:
    config = load_config(REPO / "hosts.example.yaml")
    names = [h.name for h in config.hosts]
    assert names == ["gpu01", "gpu02", "sim01"]
    assert config.head is not None and config.head.host == "head01"


def test_defaults_merge_into_hosts() -> None:
    config = parse_config(
        """
defaults: {user: alice, port: 2222, identity_file: ~/.ssh/k, python: /opt/py}
hosts:
  - {name: a}
  - {name: b, user: bob, port: 22, address: 10.0.0.2, proxy_jump: jump.example}
"""
    )
    a, b = config.resolved()
    assert (a.address, a.user, a.port, a.identity_file, a.python) == (
        "a",
        "alice",
        2222,
        "~/.ssh/k",
        "/opt/py",
    )
    assert (b.address, b.user, b.port, b.proxy_jump) == ("10.0.0.2", "bob", 22, "jump.example")


def test_unknown_key_names_line_and_field() -> None:
    lines = errors_of("hosts:\n  - name: gpu01\n    adress: 10.0.0.1\n")
    assert lines == ["hosts.yaml:3: hosts[0](gpu01).adress: unknown key"]


def test_unknown_top_level_key() -> None:
    assert errors_of("refresh: 1\n") == ["hosts.yaml:1: refresh: unknown key"]


def test_bad_types_and_ranges_each_get_a_line() -> None:
    lines = errors_of(
        """refresh_interval: 0
hosts:
  - name: gpu02
    port: 99999
defaults:
  user: [a, b]
"""
    )
    assert lines[0].startswith(
        "hosts.yaml:1: refresh_interval: Input should be greater than or equal to 0.1"
    )
    assert lines[1].startswith("hosts.yaml:4: hosts[0](gpu02).port: ")
    assert lines[2].startswith("hosts.yaml:6: defaults.user: ")
    assert len(lines) == 3


def test_bad_yaml_names_the_line() -> None:
    lines = errors_of("hosts:\n  - name: a\n   bad: [\n")
    assert len(lines) == 1 and lines[0].startswith("hosts.yaml:") and ": yaml: " in lines[0]


def test_duplicate_host_names() -> None:
    lines = errors_of("hosts:\n  - name: a\n  - name: a\n")
    assert lines == ["hosts.yaml:1: (top level): duplicate host name 'a'"]


def test_bad_host_name_and_missing_name() -> None:
    lines = errors_of("hosts:\n  - name: 'bad name;rm'\n  - address: x\n")
    assert lines[0].startswith("hosts.yaml:2: hosts[0]")
    assert "letters, digits" in lines[0]
    assert lines[1] == "hosts.yaml:3: hosts[1].name: Field required"


def test_bad_sim_spec_is_a_config_error() -> None:
    lines = errors_of("hosts:\n  - name: s\n    sim: 4xnosuchcard\n")
    assert len(lines) == 1 and lines[0].startswith("hosts.yaml:3: hosts[0](s).sim: ")
    assert "nosuchcard" in lines[0]


def test_thresholds_must_be_ordered() -> None:
    lines = errors_of("health: {temp_warn_c: 95, temp_crit_c: 90}\n")
    assert lines == ["hosts.yaml:1: health: temp_warn_c must not be above temp_crit_c"]


def test_top_level_must_be_mapping() -> None:
    assert errors_of("- a\n- b\n") == ["hosts.yaml:1: (top level): must be a mapping of settings"]


def test_empty_file_is_an_empty_config() -> None:
    assert parse_config("").hosts == []


def test_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        find_config()
    assert "no hosts.yaml found" in info.value.lines[0]
    user = isolated_home / ".config/gputui/hosts.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("hosts: []\n")
    assert find_config() == user
    local = tmp_path / "hosts.yaml"
    local.write_text("hosts: []\n")
    assert find_config() == Path("hosts.yaml")
    env = tmp_path / "env.yaml"
    env.write_text("hosts: []\n")
    monkeypatch.setenv("GPUTUI_HOSTS", str(env))
    assert find_config() == env
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text("hosts: []\n")
    assert find_config(explicit) == explicit


def test_explicit_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        find_config(tmp_path / "nope.yaml")
    assert info.value.lines == [f"{tmp_path / 'nope.yaml'}: no such file"]


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.lines[0].startswith(f"{path}: cannot read: UnicodeDecodeError")


def test_duplicate_keys_are_errors_not_silent_overrides() -> None:
    lines = errors_of("hosts:\n  - name: a\nrefresh_interval: 2\nhosts:\n  - name: b\n")
    assert lines == ["hosts.yaml:4: hosts: duplicate key (first given on line 1)"]
    lines = errors_of("hosts:\n  - name: a\n    port: 22\n    port: 2222\n")
    assert lines == ["hosts.yaml:4: hosts[0](a).port: duplicate key (first given on line 3)"]


def test_env_var_naming_a_missing_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.yaml").write_text("hosts: []\n")
    monkeypatch.setenv("GPUTUI_HOSTS", str(tmp_path / "typo.yaml"))
    with pytest.raises(ConfigError) as info:
        find_config()
    assert info.value.lines == [f"{tmp_path / 'typo.yaml'}: no such file (named by $GPUTUI_HOSTS)"]


def test_huge_sim_gpu_count_is_refused_at_once() -> None:
    lines = errors_of("hosts:\n  - name: s\n    sim: 999999999xrtx3090\n")
    assert len(lines) == 1 and "at most 64 per host" in lines[0]


def test_stale_threshold_follows_a_slow_refresh() -> None:
    health = parse_config("health: {stale_after_s: 5}\n").health
    assert health.stale_after(1.0) == 5.0
    assert health.stale_after(10.0) == 25.0
