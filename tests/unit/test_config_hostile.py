"""hosts.yaml as hostile input: whatever the file holds, loading ends fast, in a
ConfigError or a Config, and every error line is ``FILE:LINE: field: problem`` with
no byte in it that a terminal would act on.

Generated input comes in three shapes: random YAML structures (any scalar, keys
from the real field names and random ones) dumped with ``yaml.safe_dump``;
config-shaped documents whose every string field may be hostile, so generation
reaches the validators; and raw text built from YAML's own syntax, so the parser's
error paths are reached too.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realusers import as_user, made_users

import gputui.config.loader as config_module
import gputui.config.yamlbounds as yamlbounds_module
from gputui.config.loader import MAX_FILE_BYTES, ConfigError, load_config, parse_config
from gputui.config.models import Config, HealthThresholds, HostConfig, SshDefaults
from gputui.config.where import MAX_ERROR_LINES
from gputui.config.yamlbounds import MAX_DEPTH, MAX_HOSTS, MAX_VALUES

SOURCE = "hosts.yaml"
LINE = re.compile(r"^[^:]+:\d+: [^:]+: .+")
# C0 (all of it: no tab or newline inside one line either), DEL, C1 (ESC is C0),
# and the bidi overrides and isolates.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
FAST = 10.0
"""Seconds: a guard against work that grows with the input (a million hosts parsed in
full takes minutes), not a speed measurement: a loaded two-core machine took 2.3 s."""

# Every field name of every section, so generated keys often hit real fields.
FIELDS = sorted(
    {
        *Config.model_fields,
        *SshDefaults.model_fields,
        *HostConfig.model_fields,
        *HealthThresholds.model_fields,
        "host",
        "socket",
        "database",
        "admin_group",
    }
)

HOSTILE_PIECES = [
    "\x1b]0;pwned\x07",  # retitle the terminal
    "\x1b]52;c;aGVsbG8=\x07",  # write the clipboard (OSC 52)
    "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",  # hyperlink
    "\x1b]0;no terminator",  # OSC left open
    "\x1b[2J\x1b[H",  # clear screen, cursor home
    "\x1b[31mred\x1b[0m",
    "\x1bP+q544e\x1b\\",  # DCS
    "\x9b31m",  # 8-bit CSI
    "\x9d0;x\x9c",  # 8-bit OSC / ST
    "\x00",
    "\x07",
    "\x08\x08\x08",
    "\r",
    "\n",
    "\t",
    "\x7f",
    "\u202eevil",  # right-to-left override
    "\u2066isolate\u2069",
    "\u200b",  # zero-width space
    "\ufeff",
    "\u2028",
    "a:b",  # a colon where a field name goes
    "&anchor",
    "*alias",
    "- [ ] { } ,",
    "!!binary",
    "é" * 3,
    "界" * 3,
    "\U0001f600",
    "x" * 300,
]

hostile_text = st.lists(
    st.one_of(
        st.sampled_from(HOSTILE_PIECES),
        st.text(max_size=8),  # every Unicode category
        st.characters(codec=None, exclude_categories=("Cs",)).map(str),
    ),
    max_size=4,
).map("".join)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
    st.sampled_from(["22", "true", "~", "0x_", "._", "2024-13-45", "1:30", "=", "<<", ""]),
)
keys = st.one_of(st.sampled_from(FIELDS), hostile_text, st.integers(), st.booleans())
structures = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=5),
    ),
    max_leaves=30,
)


def field_value(name: str) -> st.SearchStrategy[Any]:
    """Mostly plausible values for a real field, sometimes anything at all."""
    plausible: dict[str, st.SearchStrategy[Any]] = {
        "name": st.from_regex(r"\A[a-z][a-z0-9-]{0,8}\Z"),
        "port": st.integers(-2, 70000),
        "labels": st.dictionaries(hostile_text, hostile_text, max_size=3),
        "sim": st.sampled_from(["4xrtx3090", "2xa100-80gb,fault=xid:79@1", "9x", "0xh100"]),
        "connect_timeout": st.floats(-1, 400),
        "keepalive_interval": st.integers(-1, 4000),
    }
    return st.one_of(plausible.get(name, hostile_text), scalars, structures)


def section(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {}, optional={name: field_value(name) for name in names}
    ) | st.dictionaries(keys, scalars, max_size=3)


hosts = st.lists(
    st.fixed_dictionaries(
        {"name": field_value("name")},
        optional={n: field_value(n) for n in HostConfig.model_fields if n != "name"},
    ),
    max_size=4,
)
configs = st.fixed_dictionaries(
    {},
    optional={
        "hosts": hosts,
        "defaults": section(list(SshDefaults.model_fields)),
        "health": section(list(HealthThresholds.model_fields)),
        "head": section(["host", "socket", "database", "admin_group"]),
        "refresh_interval": st.one_of(st.floats(0, 100), scalars),
        "theme": hostile_text,
        "connect_concurrency": st.one_of(st.integers(0, 2000), scalars),
    },
)

# Raw text from YAML's own syntax, so the scanner, parser and composer errors all
# get reached, and hostile characters can arrive unquoted too.
yaml_tokens = st.sampled_from(
    [
        "hosts:",
        "defaults:",
        "name:",
        "pool:",
        "port:",
        " ",
        "\n",
        "  ",
        "- ",
        "[",
        "]",
        "{",
        "}",
        ",",
        ": ",
        "? ",
        "&a ",
        "*a",
        "&b ",
        "*b",
        "<<: ",
        "!!str ",
        "!!binary ",
        "!!set ",
        "!x ",
        '"',
        "'",
        "\\e",
        "\\x1b",
        "\\u202e",
        "\\ud800",
        "|\n",
        ">\n",
        "---\n",
        "...\n",
        "#",
        "%YAML 1.1\n",
        "a",
        "1",
        "true",
        "\t",
    ]
)
raw_yaml = st.lists(st.one_of(yaml_tokens, hostile_text), max_size=40).map("".join)

fast = settings(
    deadline=timedelta(seconds=FAST),
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow],
)


def outcome(text: str) -> Config | list[str]:
    """Load ``text`` fast; the Config or the error lines. Anything else fails the test."""
    started = time.perf_counter()
    try:
        result: Config | list[str] = parse_config(text, SOURCE)
    except ConfigError as exc:
        result = exc.lines
        assert result, "a ConfigError with no lines"
    assert time.perf_counter() - started < FAST
    return result


def assert_safe_lines(lines: list[str]) -> None:
    for line in lines:
        assert LINE.match(line), line
        assert not UNSAFE.search(line), ascii(line)
        assert line.startswith(f"{SOURCE}:")


def strings_in(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from strings_in(item)


def assert_safe_config(config: Config) -> None:
    """A config that loaded holds no string a terminal would act on, and neither does
    the check-config summary of it."""
    from gputui.cli.check_config import summarise

    for text in strings_in(config.model_dump()):
        assert not UNSAFE.search(text), ascii(text)
        assert not re.search("[\u200b-\u200f\u2028\u2029\ufeff]", text), ascii(text)
    for line in summarise(config, Path(SOURCE)).splitlines():
        assert not UNSAFE.search(line), ascii(line)


def check(text: str) -> None:
    result = outcome(text)
    if isinstance(result, Config):
        assert_safe_config(result)
    else:
        assert_safe_lines(result)


@fast
@given(structures)
def test_any_yaml_structure_loads_or_fails_in_lines(data: Any) -> None:
    check(yaml.safe_dump(data, allow_unicode=True))


@fast
@given(configs)
def test_config_shaped_documents_reach_the_validators_safely(data: dict[str, Any]) -> None:
    check(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))


@fast
@given(configs)
def test_the_same_documents_with_escapes_written_as_yaml_escapes(data: dict[str, Any]) -> None:
    # Without allow_unicode every non-ASCII character is a \\x or \\u escape in a
    # double-quoted string: the route by which ESC and friends pass the YAML reader.
    check(yaml.safe_dump(data, allow_unicode=False))


@fast
@given(raw_yaml)
def test_raw_yaml_syntax_loads_or_fails_in_lines(text: str) -> None:
    check(text)


@fast
@given(hostile_text, st.sampled_from(["pool", "user", "address", "python", "known_hosts"]))
def test_a_hostile_string_in_any_field_is_refused_and_not_echoed(value: str, field: str) -> None:
    text = yaml.safe_dump({"hosts": [{"name": "gpu01", field: value}]})
    result = outcome(text)
    if UNSAFE.search(value) or re.search("[\u200b-\u200f\u2028\u2029\ufeff]", value):
        assert isinstance(result, list), f"{value!r} was accepted"
        assert_safe_lines(result)
        assert any(f"hosts[0](gpu01).{field}: " in line for line in result), result
    elif isinstance(result, Config):
        assert_safe_config(result)
    else:
        assert_safe_lines(result)


@pytest.fixture(params=["libyaml", "pure-python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a limit test with libyaml's parser and with PyYAML's own (where libyaml
    is missing), since each has its own ideas about nesting and errors."""
    if request.param == "libyaml" and not yaml.__with_libyaml__:
        pytest.skip("PyYAML built without libyaml")
    monkeypatch.setattr(yamlbounds_module, "_LIBYAML", request.param == "libyaml")
    return str(request.param)


def fails_fast(load: Callable[[], object]) -> list[str]:
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        load()
    assert time.perf_counter() - started < FAST
    assert len(info.value.lines) == 1, info.value.lines
    return info.value.lines


def test_billion_laughs_is_refused_at_once(parser: str) -> None:
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 10):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    (line,) = fails_fast(lambda: parse_config("\n".join(levels) + "\n", SOURCE))
    assert LINE.match(line)
    assert f"expands to more than {MAX_VALUES} values through aliases" in line


def test_an_alias_inside_its_own_anchor_is_refused(parser: str) -> None:
    (line,) = fails_fast(lambda: parse_config("hosts: &h [*h]\n", SOURCE))
    assert line == "hosts.yaml:1: hosts[0]: alias *h is used inside its own anchor"


def test_an_alias_chain_cannot_nest_past_the_limit(parser: str) -> None:
    chain = ["x0: &x0 [1]"] + [f"x{i}: &x{i} [*x{i - 1}]" for i in range(1, MAX_DEPTH + 2)]
    (line,) = fails_fast(lambda: parse_config("\n".join(chain), SOURCE))
    assert f"nested more than {MAX_DEPTH} levels deep through aliases" in line


@pytest.mark.parametrize(
    "text",
    [
        "x: " + "[" * 5000 + "]" * 5000,
        "x: " + "{a: " * 5000 + "1" + "}" * 5000,
        "".join(f"{' ' * i}k{i}:\n" for i in range(200)),
    ],
    ids=["flow-lists", "flow-mappings", "block-mappings"],
)
def test_deep_nesting_is_refused(parser: str, text: str) -> None:
    (line,) = fails_fast(lambda: parse_config(text, SOURCE))
    assert LINE.match(line), line
    # libyaml stops flow nesting at its own limit; either way one line, fast.
    assert f"nested more than {MAX_DEPTH} levels deep" in line or "nesting depth" in line


def test_nesting_up_to_the_limit_is_fine(parser: str) -> None:
    nested = "{a: " * (MAX_DEPTH - 2) + "1" + "}" * (MAX_DEPTH - 2)
    (line,) = fails_fast(lambda: parse_config(f"x: {nested}\n", SOURCE))
    assert line == "hosts.yaml:1: x: unknown key"


def test_a_50_mb_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "hosts.yaml"
    with big.open("wb") as file:
        file.truncate(50 * 1024 * 1024)  # sparse: costs nothing to make
    (line,) = fails_fast(lambda: load_config(big))
    assert line == (
        f"{big}: too big: 52428800 bytes; the limit for a config file is 1 MiB (1048576 bytes)"
    )


def test_text_over_the_size_limit_is_refused() -> None:
    (line,) = fails_fast(lambda: parse_config("#" * (MAX_FILE_BYTES + 1), SOURCE))
    assert line.startswith(f"{SOURCE}: too big: ")
    # Characters that take several bytes count as bytes, as the file would.
    (line,) = fails_fast(lambda: parse_config("#" + "界" * (MAX_FILE_BYTES // 3 + 1), SOURCE))
    assert line.startswith(f"{SOURCE}: too big: ")


def test_a_million_hosts_are_refused_at_once(tmp_path: Path) -> None:
    text = "hosts:\n" + "  - {name: h}\n" * 1_000_000
    (line,) = fails_fast(lambda: parse_config(text, SOURCE))
    assert "too big" in line and "1 MiB" in line
    path = tmp_path / "hosts.yaml"
    path.write_text(text)
    (line,) = fails_fast(lambda: load_config(path))
    assert line.startswith(f"{path}: too big: ")


def test_more_hosts_than_the_limit_is_one_line_naming_it(parser: str) -> None:
    many = "hosts:\n" + "".join(f"- {{name: h{i}}}\n" for i in range(MAX_HOSTS + 1))
    (line,) = fails_fast(lambda: parse_config(many, SOURCE))
    assert line == f"{SOURCE}:{MAX_HOSTS + 2}: hosts: more than {MAX_HOSTS} hosts (the limit)"


def test_the_host_limit_itself_is_allowed() -> None:
    most = "hosts:\n" + "".join(f"- {{name: h{i}}}\n" for i in range(MAX_HOSTS))
    assert len(parse_config(most, SOURCE).hosts) == MAX_HOSTS


def test_hosts_by_alias_count_against_the_limit(parser: str) -> None:
    text = "x: &h {name: a}\nhosts: [" + ", ".join(["*h"] * (MAX_HOSTS + 1)) + "]\n"
    (line,) = fails_fast(lambda: parse_config(text, SOURCE))
    assert f"hosts: more than {MAX_HOSTS} hosts (the limit)" in line


def test_a_directory_fifo_or_device_is_named_not_read(tmp_path: Path) -> None:
    folder = tmp_path / "conf.d"
    folder.mkdir()
    assert fails_fast(lambda: load_config(folder)) == [
        f"{folder}: is a directory, not a config file"
    ]
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)  # nothing ever writes: opening it for a blocking read would hang
    assert fails_fast(lambda: load_config(fifo)) == [
        f"{fifo}: is a FIFO (named pipe), not a config file"
    ]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert fails_fast(lambda: load_config("/dev/null")) == [
        "/dev/null: is a character device, not a config file"
    ]
    assert fails_fast(lambda: load_config("/dev/zero")) == [
        "/dev/zero: is a character device, not a config file"
    ]


def test_a_fifo_swapped_in_after_the_check_does_not_hang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The path passes the stat as a regular file, then is a FIFO when opened: the
    # open must not block and the opened file is checked again.
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    regular = tmp_path / "plain.yaml"
    regular.write_text("hosts: []\n")
    real_stat = os.stat
    monkeypatch.setattr(
        config_module.os, "stat", lambda p, *a, **k: real_stat(regular if p == fifo else p)
    )
    assert fails_fast(lambda: load_config(fifo)) == [
        f"{fifo}: is a FIFO (named pipe), not a config file"
    ]


def _unreadable(path: str) -> list[str]:
    """``load_config``'s lines for ``path``, made the reader's own file with mode 0."""
    Path(path).write_text("hosts: []\n")
    Path(path).chmod(0)
    return fails_fast(lambda: load_config(Path(path)))


@pytest.mark.root
def test_unreadable_config_file_says_so(tmp_path: Path) -> None:
    """Root reads every file, so under root the reader is a real user of its own
    (in a directory it may enter), as the code runs for anyone who is not root."""
    if os.geteuid() != 0:
        path = tmp_path / "hosts.yaml"
        assert _unreadable(str(path)) == [f"{path}: cannot read: permission denied"]
        return
    shared = Path(tempfile.mkdtemp(prefix="gputui-unreadable-"))
    try:
        with made_users(1, "gtu") as (user,):
            shared.chmod(0o755)
            os.chown(shared, user.uid, user.gid)
            path = shared / "hosts.yaml"
            ran = as_user(user, _unreadable, str(path))
        assert ran.value == [f"{path}: cannot read: permission denied"]
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def test_a_lone_surrogate_is_an_error_line_not_a_crash() -> None:
    (line,) = fails_fast(lambda: parse_config("hosts:\n  - name: a\n    pool: \ud800\n", SOURCE))
    assert line == f"{SOURCE}:3: yaml: not valid Unicode text (U+D800)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("refresh_interval: 0x_\n", "hosts.yaml:1: yaml: cannot read this value"),
        ("theme: !!binary aGk=\n", "hosts.yaml:1: theme: the tag !!binary is not allowed"),
        ("x: !!python/name:os.system\n", "hosts.yaml:1: x: the tag !!python/name:os.system"),
        ("theme: !!set {a}\n", "hosts.yaml:1: theme: the tag !!set is not allowed"),
        ("a: 1\n---\nb: 2\n", "hosts.yaml:2: (top level): only one YAML document is allowed"),
        ("theme: *nope\n", "hosts.yaml:1: theme: alias *nope is not defined"),
        ("? [a]\n: b\n", "hosts.yaml:1: (top level): a key must be a plain name"),
        ("theme: \x1b[31m\n", "hosts.yaml:1: yaml: control characters are not allowed (U+001B)"),
        ('"a:b": 1\n', "hosts.yaml:1: 'a\\x3ab': unknown key"),
    ],
)
def test_odd_yaml_is_one_line_each(parser: str, text: str, expected: str) -> None:
    (line,) = fails_fast(lambda: parse_config(text, SOURCE))
    assert_safe_lines([line])
    if parser == "pure-python" and ": yaml: " in expected:
        return  # PyYAML words its own syntax errors differently
    assert line.startswith(expected), line


def test_a_date_like_or_bare_equals_value_stays_text() -> None:
    config = parse_config("hosts: [{name: a, pool: 2024-01-31, python: =}]\n", SOURCE)
    assert (config.hosts[0].pool, config.hosts[0].python) == ("2024-01-31", "=")


def test_error_lines_are_capped_with_a_count_of_the_rest() -> None:
    text = "hosts:\n" + "".join(f"- {{name: h{i}, port: 0}}\n" for i in range(200))
    with pytest.raises(ConfigError) as info:
        parse_config(text, SOURCE)
    lines = info.value.lines
    assert len(lines) == MAX_ERROR_LINES + 1
    assert_safe_lines(lines)
    assert lines[-1] == f"{SOURCE}:{MAX_ERROR_LINES + 2}: (more): 150 more problems not shown"


def test_an_escape_in_the_source_path_is_cleaned_too() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("x: 1\n", "evil\x1b]0;pwn\x07.yaml")
    (line,) = info.value.lines
    assert LINE.match(line) and not UNSAFE.search(line), ascii(line)
    assert line.endswith(":1: x: unknown key")
