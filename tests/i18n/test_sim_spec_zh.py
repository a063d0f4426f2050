"""A simulated host's spec in hosts.yaml (``sim:``) that cannot be used is refused in
one line naming the file, the line and the field, in the reader's language: every
error the simulator's spec parser raises (its words are marked in the helper, which
itself speaks English) has a Chinese line with no English but the spec's own words."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from i18n_messages import marked_in
from untranslated import WORD, english_words

from gputui.common import i18n
from gputui.config.loader import ConfigError, parse_config
from gputui.remote.sim.spec import FAULT_KINDS, MODELS, SpecError, parse_spec

KEPT = (
    frozenset({"KIND", "INDEX", "HOST", "COUNT", "MODEL", "ID"})
    | {"name", "seed", "cluster", "fault"}  # the option keys
    | {"NVSwitch"}
    | {w for m in MODELS for w in WORD.findall(m)}
    | set(WORD.findall("4xrtx3090 2xa100-80gb+2xh100 xid:79@0 lost@0"))
)
"""The grammar's own placeholders, the model names the lines list and the examples."""
KINDS = frozenset(w for k in FAULT_KINDS for w in WORD.findall(k)) | {"xid", "NN"}

_WORD = st.sampled_from(
    ["4xrtx3090", "h100", "2xa100-80gb", "mi300x", "v100", "rtx3090", "a10", "0xh100",
     "9xh100+9xh100+9xh100+9xh100+9xh100+9xh100+9xh100+9xh100", "4*h100", "rtx9999", ""]
)  # fmt: skip
_OPTIONS = ["name=gpu-a", "name=-bad", "seed=7", "seed=x", "cluster=c1", "cluster=a b",
            "fault=", "colour=red", "plain"]  # fmt: skip
_OPTION = st.one_of(
    st.sampled_from(_OPTIONS),
    st.builds(
        lambda sign, kind, index: f"fault={sign}{kind}@{index}",
        st.sampled_from(["", "-"]),
        st.sampled_from([*FAULT_KINDS, "xid:79", "xid:0", "xid:abc", "melt", "clear"]),
        st.sampled_from(["0", "1", "7", "99", "x", ""]),
    ),
)
SPECS = st.builds(
    lambda groups, options: ",".join([groups, *options]),
    st.lists(_WORD, min_size=1, max_size=3).map("+".join),
    st.lists(_OPTION, max_size=3),
)


@contextlib.contextmanager
def speaking(language: str) -> Iterator[None]:
    i18n.choose(language)
    try:
        yield
    finally:
        i18n.choose(None)


WHERE = "h.yaml:4: hosts[0](g1).sim: "
"""The file, the line of ``sim:`` and the field."""


def _refusal(spec: str) -> list[str]:
    text = f"hosts:\n  - name: g1\n    address: g1.lab\n    sim: {json.dumps(spec)}\n"
    try:
        parse_config(text, "h.yaml")
    except ConfigError as exc:
        return exc.lines
    return []


@settings(max_examples=300, deadline=None)
@given(SPECS)
def test_a_bad_sim_spec_is_one_chinese_line_naming_file_line_and_field(spec: str) -> None:
    with speaking("zh_CN"):
        lines = _refusal(spec)
    try:
        parse_spec(spec)
    except SpecError:
        pass
    else:
        assert lines == []
        return
    assert len(lines) == 1 and "\n" not in lines[0], lines
    line = lines[0]
    assert line.startswith(WHERE), line
    said = line.removeprefix(WHERE)
    allowed = set(WORD.findall(spec)) | KEPT | KINDS
    assert english_words(said, allowed) == [], line


@given(SPECS)
def test_the_english_line_is_the_helpers_own(spec: str) -> None:
    """In English hosts.yaml says exactly what the helper would (``--sim``)."""
    try:
        parse_spec(spec)
    except SpecError as exc:
        with speaking("en"):
            assert _refusal(spec) == [f"{WHERE}{exc}"]


EACH = [
    "",
    "4*h100",
    "4xrtx9999",
    "0xh100",
    "33xh100+33xh100",
    "h100,plain",
    "h100,name=-bad",
    "h100,seed=x",
    "h100,cluster=a b",
    "h100,colour=red",
    "h100,fault=lost",
    "h100,fault=xid:0@0",
    "h100,fault=melt@0",
    "h100,fault=lost@1",
    "h100,fault=-lost@0",
    "mi300x,fault=throttle@0",
    "rtx3090,fault=ecc@0",
    "v100,fault=remap-pending@0",
    "h100,fault=retired@0",
    "a10,fault=nvlink-down@0",
    "a100-80gb,fault=fabric@0",
]
"""A spec for each error the parser has (``test_each_error_is_tried`` holds it so)."""


def test_each_error_is_tried() -> None:
    import gputui.remote.sim.spec as spec_module

    said = set()
    for spec in EACH:
        with pytest.raises(SpecError) as caught:
            parse_spec(spec)
        said.add(caught.value.message)
    source = Path(spec_module.__file__).read_text(encoding="utf-8")
    assert said == marked_in(source)


@pytest.mark.parametrize("spec", EACH)
def test_each_error_is_a_chinese_line(spec: str) -> None:
    with speaking("zh_CN"):
        (line,) = _refusal(spec)
    assert line.startswith(WHERE), line
    assert english_words(line.removeprefix(WHERE), set(WORD.findall(spec)) | KEPT | KINDS) == []
