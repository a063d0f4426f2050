"""hosts.yaml: valid files load; each kind of mistake gives one FILE:LINE: field: problem."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.config.loader import (
    ConfigError,
    file_problems,
    find_config,
    load_config,
    parse_config,
    require_hosts,
)
from gputui.config.models import Config, HealthThresholds, HostConfig, SshDefaults
from gputui.health.staleness import stale_limit

REPO = Path(__file__).resolve().parents[2]


def errors_of(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "hosts.yaml")
    return info.value.lines


def test_example_file_is_valid() -> None:
    config = load_config(REPO / "hosts.example.yaml")
    names = [h.name for h in config.hosts]
    assert names == ["gpu01", "gpu02", "sim01", "here"]
    assert config.head is not None and config.head.host == "head01"
    assert [h.local for h in config.resolved()] == [False, False, False, True]


def test_a_local_host_ignores_address_and_ssh_and_runs_this_interpreter() -> None:
    config = parse_config(
        """
defaults: {user: alice, port: 2222, identity_file: ~/.ssh/k, proxy_jump: b, python: /opt/py}
hosts:
  - {name: here, local: true, address: 10.0.0.9, port: 22, user: bob, sim: 2xa10}
  - {name: named, local: true, python: /usr/bin/python3.12}
"""
    )
    here, named = config.resolved()
    assert here.local and named.local
    assert (here.address, here.user, here.port, here.identity_file, here.proxy_jump) == (
        "local",
        None,
        None,
        None,
        None,
    )
    assert here.ssh_config is None and here.known_hosts is None and here.sim == "2xa10"
    assert here.python == sys.executable  # has nvidia-ml-py, unlike a bare python3
    assert named.python == "/usr/bin/python3.12"
    assert errors_of("hosts: [{name: x, local: 'yes'}]") == [
        "hosts.yaml:1: hosts[0](x).local: Input should be a valid boolean"
    ]


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
    assert info.value.lines == [f"{path}:1:1: not UTF-8 (byte 0xff); save the file as UTF-8"]


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
    assert stale_limit(health.stale_after_s, 1.0) == 5.0
    assert stale_limit(health.stale_after_s, 10.0) == 25.0


def types_in(annotation: Any) -> Iterator[Any]:
    """``int`` out of ``Annotated[int, ...] | None``, and so on."""
    yield annotation
    for arg in get_args(annotation):
        yield from types_in(arg)


def numeric_fields() -> list[tuple[str, str, type, Any]]:
    """(section, field, int or float, a valid value) for every number in the schema,
    found from the models so a new numeric field is covered without editing this."""
    found = []
    for section, model in [
        ("", Config),
        ("defaults", SshDefaults),
        ("health", HealthThresholds),
        ("hosts", HostConfig),
    ]:
        for name, field in model.model_fields.items():
            kinds = set(types_in(field.annotation)) & {int, float}
            if kinds:
                kind = kinds.pop()
                valid = {"port": 22, "gpus": 8}.get(name)
                if valid is None:
                    valid = int(field.default)
                found.append((section, name, kind, valid))
    return found


def document(section: str, name: str, value: Any) -> str:
    data: dict[str, Any] = {"hosts": [{"name": "a"}]}
    if section == "hosts":
        data["hosts"][0][name] = value
    elif section:
        data[section] = {name: value}
    else:
        data[name] = value
    return yaml.safe_dump(data)


def field_label(section: str, name: str) -> str:
    return {"": name, "hosts": f"hosts[0](a).{name}"}.get(section, f"{section}.{name}")


NUMERIC = numeric_fields()


def test_the_schema_has_the_numbers_we_expect() -> None:
    names = {(s, n) for s, n, _, _ in NUMERIC}
    assert {("hosts", "port"), ("defaults", "port"), ("", "refresh_interval")} <= names
    assert len(NUMERIC) >= 12


@pytest.mark.parametrize(("section", "name", "kind", "valid"), NUMERIC)
@given(bad=st.one_of(st.booleans(), st.integers(0, 100).map(str), st.just("1.5")))
@settings(max_examples=10, deadline=None)
def test_no_number_field_takes_a_boolean_or_text(
    section: str, name: str, kind: type, valid: Any, bad: Any
) -> None:
    lines = errors_of(document(section, name, bad))
    assert len(lines) == 1
    label = field_label(section, name)
    assert f": {label}: must be a number, not " in lines[0], lines[0]


@pytest.mark.parametrize(("section", "name", "kind", "valid"), NUMERIC)
def test_number_fields_take_whole_numbers_and_floats_only_where_floats_belong(
    section: str, name: str, kind: type, valid: Any
) -> None:
    config = parse_config(document(section, name, valid))
    assert config is not None
    if kind is int:
        lines = errors_of(document(section, name, float(valid)))
        assert len(lines) == 1 and f": {field_label(section, name)}: " in lines[0]
    else:
        assert parse_config(document(section, name, float(valid)))
        for not_finite in (float("inf"), float("nan")):
            lines = errors_of(document(section, name, not_finite))
            assert len(lines) == 1 and f": {field_label(section, name)}: " in lines[0]


def test_keys_lines_are_known_for_later_checks() -> None:
    config = parse_config(
        "theme: gputui-dark\ndefaults:\n  known_hosts: /x\nhosts:\n  - name: a\n"
        "    identity_file: /k\n",
        "f.yaml",
    )
    assert config.source == "f.yaml"
    assert config.line_of("theme") == 1
    assert config.line_of("defaults.known_hosts") == 3
    assert config.line_of("hosts") == 4
    assert config.line_of("hosts[0].identity_file") == 6
    assert config.line_of("hosts[0].user") == 5  # not given: the host's own line
    assert config.line_of("nothing.here") == 1


def test_require_hosts_names_the_file_and_the_hosts_key() -> None:
    config = parse_config("theme: gputui-dark\nhosts: []\n", "f.yaml")
    with pytest.raises(ConfigError) as info:
        require_hosts(config)
    assert info.value.lines == [
        "f.yaml:2: hosts: no hosts listed; add at least one under 'hosts:' (see hosts.example.yaml)"
    ]
    require_hosts(parse_config("hosts: [{name: a}]\n"))


def test_file_problems_name_field_path_and_expansion(tmp_path: Path, isolated_home: Path) -> None:
    key = tmp_path / "key"
    key.write_text("k")
    config = parse_config(
        f"defaults:\n  identity_file: ~/gone\nhosts:\n  - name: a\n    identity_file: {key}\n"
        f"    known_hosts: {tmp_path}\n",
        "f.yaml",
    )
    assert file_problems(config) == [
        f"f.yaml:2: defaults.identity_file: ~/gone ({isolated_home}/gone): no such file",
        f"f.yaml:6: hosts[0](a).known_hosts: {tmp_path}: is a directory, not a file",
    ]
    assert file_problems(parse_config(f"hosts: [{{name: a, identity_file: {key}}}]")) == []


def test_head_host_may_list_a_leader_and_its_standby() -> None:
    one = parse_config("head: {host: head01}\n", "hosts.yaml")
    assert one.head is not None and one.head.hosts == ("head01",)
    two = parse_config("head:\n  host: [head01, head02]\n  lease_s: 5\n", "hosts.yaml")
    assert two.head is not None and two.head.hosts == ("head01", "head02")
    assert two.head.lease_s == 5


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("head:\n  host: []\n", "hosts.yaml:2: head.host: give 1 to 8 head hosts"),
        ("head:\n  host: [a, a]\n", "hosts.yaml:2: head.host: a head host is listed twice"),
        ("head:\n  host: ['']\n", "hosts.yaml:2: head.host: '' is not a host name"),
        (
            "head:\n  lease_s: 0.5\n",
            "hosts.yaml:2: head.lease_s: Input should be greater than or equal to 1",
        ),
        (
            "head:\n  lease_s: 301\n",
            "hosts.yaml:2: head.lease_s: Input should be less than or equal to 300",
        ),
    ],
)
def test_a_bad_head_host_or_lease_is_one_line_naming_it(text: str, problem: str) -> None:
    lines = errors_of(text)
    assert len(lines) == 1 and lines[0].startswith(problem), lines


_NAME = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_categories=("Cc", "Cf")),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(names=st.lists(_NAME, min_size=0, max_size=10))
def test_any_list_of_head_hosts_is_kept_in_order_or_refused_in_one_line(
    names: list[str],
) -> None:
    text = yaml.safe_dump({"head": {"host": names}})
    # a blank name (only spaces) is no host, nor one with a character that does not print
    valid = all(n.strip() and n.isprintable() for n in names)
    if valid and 1 <= len(names) <= 8 and len(set(names)) == len(names):
        config = parse_config(text, "hosts.yaml")
        assert config.head is not None and config.head.hosts == tuple(names)
    else:
        lines = errors_of(text)
        assert len(lines) == 1 and re.match(r"hosts\.yaml:\d+: head\.host: ", lines[0]), lines
