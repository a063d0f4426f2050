"""hosts.yaml's refusals in Chinese, whatever is wrong and wherever: a bad value in
every field of every section (the pydantic models, ``slurm:``'s own checks, notify's
channels, ProxyJump chains, listen addresses, durations, the YAML reader's bounds)
is one line with no English but the file's own words (its keys and values), the
names of settings, and the technical names a Chinese reader keeps (URL, ASCII...)."""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import typing
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from untranslated import WORD, english_words

import gputui.config.models as models
import gputui.config.notify as notify
import gputui.config.scheduler as scheduler
from gputui.common import i18n
from gputui.config import where
from gputui.config.loader import ConfigError, parse_config
from gputui.config.slurm import SlurmConfig
from gputui.remote.sim import spec as sim_spec

KEPT = frozenset(
    {"URL", "ASCII", "OpenSSH", "Lark", "webhook", "apprise", "true", "false", "a-z", "A-Za-z"}
    | {"ADDR", "PORT", "IPv4", "IPv6", "all"}
    | {"slack", "mailto", "https"}  # URL schemes, as a URL is written
    | {"xrtx", "xa", "xh", "gb"}  # a sim spec's example, as it is typed: 4xrtx3090, 2xa100-80gb
    | {w for model in sim_spec.MODELS for w in WORD.findall(model)}  # the simulator's models
)
"""Technical names (and YAML's own words) the Chinese lines keep as they are."""


def _models_in(annotation: Any) -> list[tuple[type[BaseModel], bool]]:
    """The models an annotation holds, each with whether it is a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, False)]
    listed = typing.get_origin(annotation) is list
    return [(m, inner or listed) for a in typing.get_args(annotation) for m, inner in _models_in(a)]


def _paths(
    model: type[BaseModel], prefix: tuple[str | int, ...] = ()
) -> Iterator[tuple[str | int, ...]]:
    for name, info in model.model_fields.items():
        yield (*prefix, name)
        for inner, listed in _models_in(info.annotation)[:1]:
            yield from _paths(inner, (*prefix, name, 0) if listed else (*prefix, name))


PATHS = [*_paths(models.Config)] + [("slurm", f.name) for f in fields(SlurmConfig)]
"""Every setting hosts.yaml has (a list's first item standing for each)."""
SEEDED: dict[str, dict[str, Any]] = {
    "hosts": {"name": "g1", "local": True},
    "channels": {"name": "t", "url": "https://example.org/x"},
}
"""A valid first item for a list whose items' fields are tried one at a time."""
NAMES = frozenset(
    {w for p in PATHS for k in p if isinstance(k, str) for w in WORD.findall(k)}
    | {
        n
        for module in (models, scheduler, notify)
        for n, c in vars(module).items()
        if isinstance(c, type) and issubclass(c, BaseModel)
    }
)
"""The names of settings and of sections' models (a config's own words)."""
VALUES = frozenset(
    {c.name for c in scheduler.SchedulerConfig().classes} | set(notify.EVENTS) | set(i18n.LANGUAGES)
)
"""Values a config may give that a line lists: the default priority classes, the
events of a channel, the languages."""

BAD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "x", "a b", "yes", "-5", "1.5", "x" * 5000, "bad\u200bvalue", "::"]),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.sampled_from(["a", "zz", "name"]), st.integers(), max_size=2),
)


def _document(path: tuple[str | int, ...], value: object) -> dict[str, Any] | None:
    doc: dict[str, Any] = {"hosts": [dict(SEEDED["hosts"])]}
    node: Any = doc
    for key, after in itertools.pairwise(path):
        if isinstance(key, int):
            continue
        if isinstance(after, int):
            items = node.setdefault(key, [])
            if not items:
                items.append(dict(SEEDED.get(key, {})))
            node = items[0]
        else:
            node = node.setdefault(key, {})
        if not isinstance(node, dict):
            return None
    node[path[-1]] = value
    return doc


@pytest.fixture(autouse=True)
def chinese() -> Iterator[None]:
    i18n.choose("zh_CN")
    yield
    i18n.choose(None)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=BAD)
def test_a_bad_value_anywhere_is_a_chinese_line(path: tuple[str | int, ...], value: object) -> None:
    document = _document(path, value)
    if document is None:
        return
    text = yaml.safe_dump(document, allow_unicode=True)
    try:
        parse_config(text, "h.yaml")
    except ConfigError as exc:
        assert exc.lines
        printable = "".join(c for c in str(value) if c.isprintable())
        given_words = set(WORD.findall(text)) | set(WORD.findall(printable))
        given_words |= set(WORD.findall(ascii(value)))  # as a line escapes what it shows
        given_words |= {w.lower() for w in given_words}  # a sim spec is read in lower case
        for line in exc.lines:
            field = line.split(": ")[1] if line.count(": ") >= 2 else ""
            quoted = set(WORD.findall(" ".join(re.findall(r"'([^']*)'", line))))
            allowed = given_words | NAMES | VALUES | KEPT | quoted | set(WORD.findall(field))
            allowed |= {"h.yaml"}
            left = english_words(line, allowed)  # a dotted path of the file's keys is theirs
            assert [w for w in left if not set(w.split(".")) <= allowed] == [], (
                line,
                left,
                ascii(value),
            )


def test_every_pydantic_error_our_models_raise_is_translated() -> None:
    """Every field, fed each kind of bad value: each type pydantic said is one
    ``PYDANTIC_SAID`` translates (or one of ours: a value error, an unknown key)."""
    seen: set[str] = set()
    said = where._pydantic_said

    def spy(kind: str, ctx: object, message: str) -> str:
        seen.add(kind)
        return said(kind, ctx, message)

    values = [None, True, 0, -1, 2**70, 0.5, math.inf, math.nan, "", "x", "x" * 300, [], [1]]
    values += [{}, {"zz": 1}, "-5", "a b"]
    where._pydantic_said = spy
    try:
        for path in PATHS:
            for value in values:
                document = _document(path, value)
                if document is None:
                    continue
                with contextlib.suppress(ConfigError):
                    parse_config(yaml.safe_dump(document), "h.yaml")
    finally:
        where._pydantic_said = said
    ours = {"value_error", "extra_forbidden"}
    assert seen - ours - set(where.PYDANTIC_SAID) == set()
    assert {"literal_error", "string_pattern_mismatch", "finite_number"} <= seen
    for kind in where.PYDANTIC_SAID:
        assert i18n.translates(where.PYDANTIC_SAID[kind]), kind


def test_the_english_lines_stay_as_they_were() -> None:
    i18n.choose("en")
    with pytest.raises(ConfigError) as caught:
        parse_config("head: {metrics: x}\nhosts: [{name: g1, local: true, proxy_jump: 'a:0'}]\n")
    assert [line.split(": ", 1)[1] for line in caught.value.lines] == [
        "head.metrics: 'x' has no port: expected ADDR:PORT, e.g. 127.0.0.1:9400",
        "hosts[0](g1).proxy_jump: port must be a number from 1 to 65535",
    ]
    with pytest.raises(ConfigError) as caught:
        parse_config(
            "slurm: {login: 'a@'}\nscheduler: {ownership: {mode: x}}\n"
            "hosts: [{name: g1, local: true}]\n"
        )
    assert [line.split(": ", 1)[1] for line in caught.value.lines] == [
        "slurm: login: no host",
        "scheduler.ownership.mode: Input should be 'off', 'warn' or 'enforce'",
    ]
