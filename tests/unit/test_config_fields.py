"""hosts.yaml fields checked when the file is loaded, one line each naming the file,
line and field: a ProxyJump chain as the fleet will read it, the interpreter that
runs the helper, a number YAML read as text, and a file that is not UTF-8."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.config.loader import ConfigError, load_config, parse_config
from gputui.config.sshjump import Hop, parse_chain

SOURCE = "hosts.yaml"
ONE_LINE = re.compile(r"hosts\.yaml:\d+: [^\n\x1b]+")


def _errors(text: str) -> list[str] | None:
    try:
        parse_config(text, SOURCE)
    except ConfigError as exc:
        for line in exc.lines:
            assert ONE_LINE.fullmatch(line), line
        return list(exc.lines)
    return None


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


_HOST = st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True)
_HOPS = st.builds(
    Hop,
    user=st.none() | st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
    host=_HOST | st.sampled_from(["::1", "fe80::2"]),
    port=st.none() | st.integers(1, 65535),
)


@given(st.lists(_HOPS, min_size=1, max_size=3))
def test_a_written_chain_reads_back_as_its_hops(hops: list[Hop]) -> None:
    spec = ",".join(str(h) for h in hops)
    assert parse_chain(spec) == tuple(hops)
    assert _errors(f"hosts:\n  - name: a\n    proxy_jump: {_quoted(spec)}\n") is None


@given(
    st.text(
        st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Cf", "Zl", "Zp")), max_size=30
    )
)
def test_hosts_yaml_takes_a_proxy_jump_exactly_when_the_fleet_can_read_it(spec: str) -> None:
    try:
        hops = parse_chain(spec)
    except ValueError:
        hops = None
    for hop in hops or ():
        assert hop.host.isprintable() and not any(c.isspace() for c in hop.host)
        assert hop.port is None or 1 <= hop.port <= 65535
    errors = _errors(f"hosts:\n  - name: a\n    proxy_jump: {_quoted(spec)}\n")
    if errors is not None and ": yaml: " in errors[0]:
        return  # the YAML itself refused the text first (a character it does not take)
    if hops is None:
        assert errors is not None and errors[0].startswith("hosts.yaml:3: hosts[0](a).proxy_jump: ")
    else:
        assert errors is None


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ("b:abc", "port must be a number from 1 to 65535"),
        ("b:0", "port must be a number from 1 to 65535"),
        ("b:70000", "port must be a number from 1 to 65535"),
        ("[::1]:x", "port must be a number"),
        ("[::1", "an address in brackets"),
        ("@b", "empty user"),
    ],
)
def test_a_bad_proxy_jump_is_named_at_its_line(spec: str, why: str) -> None:
    for where, text in (
        ("hosts[0](a).proxy_jump", f"hosts:\n  - name: a\n    proxy_jump: {_quoted(spec)}\n"),
        ("defaults.proxy_jump", f"defaults:\n  proxy_jump: {_quoted(spec)}\nhosts:\n  - name: a\n"),
    ):
        errors = _errors(text)
        assert errors is not None and len(errors) == 1
        line = "3" if where.startswith("hosts") else "2"
        assert errors[0].startswith(f"hosts.yaml:{line}: {where}: ") and why in errors[0]


_BREAKS = "\r\n\x85\u2028\u2029"  # YAML folds these into a space inside quotes


@given(st.text(max_size=12).filter(lambda v: not any(c in _BREAKS for c in v)))
def test_python_is_one_name_or_path(value: str) -> None:
    errors = _errors(f"hosts:\n  - name: a\n    python: {_quoted(value)}\n")
    fine = bool(value.strip()) and value == value.strip() and value.isprintable()
    if fine:
        assert errors is None or "python" not in errors[0]
    else:
        assert errors is not None
        if all(c.isprintable() or c in " \t" for c in value):  # else YAML may refuse it first
            assert errors[0].startswith("hosts.yaml:3: hosts[0](a).python: ")


def test_an_empty_python_is_refused_in_defaults_and_hosts() -> None:
    assert _errors("defaults:\n  python: ''\nhosts:\n  - name: a\n") == [
        "hosts.yaml:2: defaults.python: must name the interpreter (python3, or a path to one)"
    ]
    assert _errors("hosts:\n  - name: a\n    local: true\n    python: ''\n") == [
        "hosts.yaml:4: hosts[0](a).python: must name the interpreter (python3, or a path to one)"
    ]


@given(
    mantissa=st.integers(1, 9),
    exponent=st.integers(16, 400),
    field=st.sampled_from(
        [("hosts:\n  - name: a\n    port: {}\n", "hosts[0](a).port", 3),
         ("health:\n  mem_warn_pct: {}\nhosts:\n  - name: a\n", "health.mem_warn_pct", 2)]
    ),
)  # fmt: skip
def test_a_huge_number_yaml_reads_as_text_is_out_of_range(
    mantissa: int, exponent: int, field: tuple[str, str, int]
) -> None:
    template, where, line = field
    number = f"{mantissa}e{exponent}"
    assert _errors(template.format(number)) == [
        f"hosts.yaml:{line}: {where}: the number {number} is out of range"
    ]


def test_a_small_number_yaml_reads_as_text_says_how_to_write_it() -> None:
    assert _errors("hosts:\n  - name: a\n    port: 2e3\n") == [
        "hosts.yaml:3: hosts[0](a).port: must be a number: YAML reads '2e3' as text (write 2000)"
    ]


_LINE_CHARS = st.characters(min_codepoint=32, max_codepoint=0x7FF)


@given(
    before=st.lists(st.text(_LINE_CHARS, max_size=9), max_size=4),
    prefix=st.text(_LINE_CHARS, max_size=9),
    bad=st.integers(0x80, 0xFF),
)  # fmt: skip
def test_a_file_not_in_utf8_is_named_by_line_and_column(
    tmp_path_factory: pytest.TempPathFactory, before: list[str], prefix: str, bad: int
) -> None:
    """Latin-1 text (what an old editor saves): the line and column, as the editor
    shows them, of the first byte that is not UTF-8; never a byte offset."""
    good = "".join(f"# {t}\n" for t in before).encode()
    data = good + b"# " + prefix.encode() + bytes([bad]) + b"\nhosts:\n  - name: a\n"
    path = tmp_path_factory.mktemp("latin1") / "hosts.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    line = len(before) + 1
    column = 3 + len(prefix)
    assert caught.value.lines == [
        f"{path}:{line}:{column}: not UTF-8 (byte 0x{bad:02x}); save the file as UTF-8"
    ]
    assert "position" not in caught.value.lines[0]


def test_a_file_not_in_utf8_from_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_bytes(b"hosts:\n  - name: a\n    labels: {x: caf\xe9}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.lines == [f"{path}:3:20: not UTF-8 (byte 0xe9); save the file as UTF-8"]


@given(value=st.text(max_size=30))
def test_the_jobs_runtime_is_one_of_three_or_one_line_naming_it(value: str) -> None:
    """``jobs.runtime`` (the container runtime of an ``--image`` job with none named):
    a file another user may have written gets one line per mistake, never a traceback."""
    errors = _errors(f"hosts: []\njobs:\n  runtime: {_quoted(value)}\n")
    if value in ("docker", "podman", "apptainer"):
        assert errors is None
        assert parse_config(f"jobs:\n  runtime: {value}\n").jobs.runtime == value
    else:
        assert errors is not None and len(errors) == 1  # (yaml may refuse it first)
        assert errors[0].startswith("hosts.yaml:3: jobs.runtime: ") or re.match(
            r"hosts\.yaml:\d+: yaml: ",
            errors[0],  # (a quoted newline: yaml names the next)
        ), errors[0]


def test_the_jobs_section_defaults_to_docker_and_refuses_unknown_keys() -> None:
    assert parse_config("hosts: []\n").jobs.runtime == "docker"
    errors = _errors("jobs:\n  runtime: podman\n  runtim: docker\n")
    assert errors is not None and errors[0].startswith("hosts.yaml:3: jobs.runtim: ")
