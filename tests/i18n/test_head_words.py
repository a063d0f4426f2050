"""What the head says to a person reaches them in their language: every template the
head can send (found by scanning its source) has a zh_CN translation with the same
fields; the head builds no refusal from an English line written at the call site; and
a client shows the head's words safely whatever it sends: only a template of its own
catalogue is ever filled, by plain substitution, with cleaned and capped args, and
anything malformed falls back to the English line."""

from __future__ import annotations

import ast
import json
from functools import cache

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from i18n_messages import head_templates, plain_refusals, say_calls
from test_catalogue import translations
from untranslated import english_words

from gputui.common import i18n
from gputui.common.printable import shown as printable
from gputui.wire.words import (
    MAX_DEPTH,
    MAX_LINE_CHARS,
    MAX_LIST,
    MAX_WORDS,
    Words,
    fields_of,
    fill,
    joined,
    say,
    shown,
)

# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001


def test_every_template_the_head_can_send_has_a_translation_with_its_fields() -> None:
    have = translations()
    found = head_templates()
    assert len(found) > 150  # the scan found the head's templates, not nothing
    for template, where in sorted(found.items()):
        assert template in have, f"no zh_CN translation for {template!r} ({where})"
        assert fields_of(template) is not None, f"{template!r} ({where}): a field not plain"
        assert fields_of(have[template]) == fields_of(template), template


def test_each_say_names_a_marked_template_and_gives_exactly_its_fields() -> None:
    calls = say_calls()
    assert len(calls) > 100
    for where, call, templates in calls:
        if templates is None:  # a variable: marked where defined (its strings are above)
            assert isinstance(call.args[0], (ast.Name, ast.Attribute, ast.Subscript)), where
            continue
        if any(k.arg is None for k in call.keywords):  # **fill: checked where it is built
            continue
        given_names = {k.arg for k in call.keywords}
        for template in templates:
            assert fields_of(template) == given_names, (where, template, given_names)


def test_no_refusal_is_made_of_an_english_line_written_where_it_is_raised() -> None:
    assert plain_refusals() == []


def test_the_english_line_is_the_template_filled() -> None:
    words = say(
        "job {id} ({name}) {state} (exit {code})", id=12, name="train", state="failed", code=3
    )
    assert words.english() == "job 12 (train) failed (exit 3)"
    assert words.wire() == {
        "msg": "job {id} ({name}) {state} (exit {code})",
        "args": {"id": 12, "name": "train", "state": "failed", "code": 3},
    }
    nested = say("force-free: {why}", why=say("no host named {host} (hosts: none)", host="'x'"))
    assert nested.english() == "force-free: no host named 'x' (hosts: none)"
    assert nested.wire()["args"]["why"] == {
        "msg": "no host named {host} (hosts: none)",
        "args": {"host": "'x'"},
    }


def test_a_known_template_is_shown_in_chinese(chinese: None) -> None:
    words = say(
        "job {id} ({name}) {state} (exit {code})", id=12, name="train", state="failed", code=3
    )
    assert (
        shown(words.english(), words.msg, words.wire()["args"])
        == "作业 12（train）失败（退出码 3）"
    )
    nested = say("force-free: {why}", why=say("no host named {host} (hosts: none)", host="'x'"))
    line = shown(nested.english(), nested.msg, nested.wire()["args"])
    assert line == "force-free: 没有名为 'x' 的主机（没有主机）"


def test_in_english_the_line_is_the_heads_text_whatever_came_with_it() -> None:
    i18n.choose("en")
    try:
        assert (
            shown("job 1 failed", "job {id} ({name}) {state} (exit {code})", {"id": 2})
            == "job 1 failed"
        )
    finally:
        i18n.choose(None)


# -- hostile words ------------------------------------------------------------------


def _is_words(value: object) -> bool:
    return isinstance(value, dict) and set(value) != {"at"}


def _depth(args: object) -> int:
    """How many levels of words (or lists of them) ``args`` nests below its message."""
    if not isinstance(args, dict):
        return 0
    deepest = 0
    for value in args.values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if _is_words(item):
                deepest = max(deepest, 1 + _depth(item.get("args")))
    return deepest


def _count(args: object) -> int:
    """How many words ``args`` carries below its message (list items counted)."""
    if not isinstance(args, dict):
        return 0
    found = 0
    for value in args.values():
        items = value if isinstance(value, list) else [value]
        for item in items:
            if _is_words(item):
                found += 1 + _count(item.get("args"))
    return found


def _longest(args: object) -> int:
    """The longest list of words ``args`` carries, at any depth."""
    if not isinstance(args, dict):
        return 0
    out = 0
    for value in args.values():
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list):
            out = max(out, len(value))
        for item in items:
            if _is_words(item):
                out = max(out, _longest(item.get("args")))
    return out


def _deep(levels: int) -> dict[str, object]:
    """``levels`` of "force-free: {why}" in one another, "none" at the bottom."""
    words: dict[str, object] = {"msg": "none", "args": {}}
    for _ in range(levels - 1):
        words = {"msg": "force-free: {why}", "args": {"why": words}}
    return words


def _wide(count: int) -> list[dict[str, object]]:
    return [{"msg": "pid {pid}", "args": {"pid": i}} for i in range(count)]


def _bushy() -> dict[str, object]:
    """Within the depth and every list short, but more than ``MAX_WORDS`` words."""
    leaf = {"msg": "{a}; {b}", "args": {"a": _wide(MAX_LIST), "b": _wide(MAX_LIST)}}
    return {"msg": "{a}; {b}", "args": {"a": [leaf] * 4, "b": "x"}}


KNOWN = sorted(head_templates())
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
NAMES = st.sampled_from(["id", "name", "state", "user", "host", "why", "job", "n", "action", "x"])
ATTACK_TEXTS = [
    "{0.__class__}",
    "{id.__class__.__mro__}",
    "{name.__init__.__globals__}",
    "{id[0]}",
    "{id:>99999999}",
    "{id!r}",
    "{",
    "}",
    "{{id}}",
    "job {id} is {state}, not held {0}",
]
ATTACKS_ = st.sampled_from(ATTACK_TEXTS)
NESTING = ["force-free: {why}", "{a}; {b}", "{why} (used last)", "job {job} not killed: {why}"]
"""Templates of the catalogue with a field that is words where the head nests them."""
SCALAR = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
LEAVES = (
    st.builds(lambda pid: {"msg": "pid {pid}", "args": {"pid": pid}}, SCALAR | st.integers(0, 99))
    | st.just({"msg": "none", "args": {}})
    | st.fixed_dictionaries(
        {"msg": st.sampled_from(KNOWN) | ATTACKS_, "args": st.dictionaries(NAMES, SCALAR)}
    )
)
WORDS = st.recursive(
    LEAVES,
    lambda inner: st.fixed_dictionaries(
        {
            "msg": st.sampled_from(NESTING) | ATTACKS_,
            "args": st.dictionaries(
                st.sampled_from(["a", "b", "why", "job", "x"]),
                inner | st.lists(inner, max_size=MAX_LIST + 2) | SCALAR,
                max_size=3,
            ),
        }
    ),
    max_leaves=16,
)
"""Words nested in words (and lists of them), as a hostile head might send them."""
ARGS = st.dictionaries(NAMES | st.text(max_size=12), JSON, max_size=20) | JSON
NESTED_ARGS = st.dictionaries(
    st.sampled_from(["a", "b", "why", "job", "shown"]) | NAMES,
    WORDS | st.lists(WORDS, max_size=MAX_LIST + 2) | SCALAR,
    max_size=3,
)
ATTACKS = ATTACKS_
MSGS = st.sampled_from(KNOWN) | st.sampled_from(NESTING) | ATTACKS | st.text(max_size=60) | JSON


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(msg=MSGS, args=ARGS)
@example(msg="{0.__class__}", args={"0": "x"})
@example(msg="job {id} belongs to {user}", args={"id": "{user.__class__}", "user": "\x1b[31mroot"})
@example(msg="job {id} belongs to {user}", args={"id": True, "user": "root"})
@example(msg="job {id} belongs to {user}", args={"id": float("nan"), "user": "root"})
@example(msg="force-free: {why}", args={"why": {"msg": "force-free: {why}", "args": {"why": {}}}})
def test_whatever_the_head_sends_the_line_is_safe(chinese: None, msg: object, args: object) -> None:
    _safe(msg, args)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(msg=st.sampled_from(NESTING) | MSGS, args=NESTED_ARGS)
@example(msg="force-free: {why}", args={"why": _deep(MAX_DEPTH + 1)})
@example(msg="force-free: {why}", args={"why": _deep(60)})
@example(msg="{a}; {b}", args={"a": _wide(MAX_LIST + 1), "b": _wide(MAX_LIST)})
@example(msg="{a}; {b}", args={"a": _wide(10**4), "b": "x"})
@example(msg="{a}; {b}", args={"a": _bushy(), "b": "x"})
@example(
    msg="force-free: {why}",
    args={"why": {"msg": "job {job} not killed: {why}", "args": {"job": 1, "why": {
        "msg": "{0.__class__}", "args": {"0": "x"}}}}},
)  # fmt: skip
def test_whatever_words_in_words_the_head_sends_the_line_is_safe(
    chinese: None, msg: object, args: object
) -> None:
    _safe(msg, args)


@cache
def _translated() -> frozenset[str]:
    return frozenset(translations())


def _safe(msg: object, args: object) -> None:
    """The line ``shown`` makes of what a (hostile) head sent is safe and bounded."""
    text = "the head's line"
    line = shown(text, msg, args)
    assert isinstance(line, str) and len(line) <= MAX_LINE_CHARS
    assert printable(line, MAX_LINE_CHARS) == line  # no control character, no escape
    if not isinstance(msg, str) or msg not in _translated():
        assert line == text  # a template not in the catalogue is never filled
    if _depth(args) > MAX_DEPTH or _count(args) + 1 > MAX_WORDS or _longest(args) > MAX_LIST:
        assert line == text  # past the bounds: the English line
    if line != text:
        assert "__" not in line or (isinstance(args, dict) and "__" in repr(args))
        assert "{0" not in line or "{0" in repr(args)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(template=st.sampled_from(KNOWN), value=st.text(max_size=30))
def test_an_arg_is_put_in_as_text_never_expanded_again(
    chinese: None, template: str, value: str
) -> None:
    fields = fields_of(template)
    assert fields is not None
    args = dict.fromkeys(fields, value)
    line = shown("english", template, args)
    assert line != "english"  # every template of the head's is shown in Chinese
    if fields:
        assert printable(value, 512) in line or value == ""


@given(
    template=st.text(max_size=40), args=st.dictionaries(st.text(max_size=5), st.text(max_size=5))
)
def test_fill_only_substitutes_plain_fields(template: str, args: dict[str, str]) -> None:
    filled = fill(template, args)
    fields = fields_of(template)
    if fields is None or not fields <= set(args):
        assert filled is None
    else:
        assert isinstance(filled, str)


def test_words_carry_their_args_as_given() -> None:
    assert Words("no job {job}", {"job": 3}).english() == "no job 3"
    assert Words("{n} GPU", {"n": 1.5}).english() == "1.5 GPU"


# -- words nested by the head -------------------------------------------------------


def _part(draw: st.DrawFn) -> Words:
    pid = draw(st.integers(0, 10**6))
    who = draw(st.sampled_from(["", " (alice)"]))
    return say("pid {pid}{who} gone already", pid=pid, who=who)


def _not_killed(job: int, why: Words) -> Words:
    return say("job {job} not killed: {why}", job=job, why=why)


LISTED = (
    "{n} processes of {owner} run on GPUs not given to them: {shown}; claim the GPU"
    " (gputui claim HOST:GPU) or stop it"
)


def _listed(items: list[Words]) -> Words:
    return say(LISTED, n=len(items), owner="bob", shown=tuple(items))


@st.composite
def _trees(draw: st.DrawFn, depth: int = 0) -> Words:
    """Drawn step by step (a plain composite, not ``st.recursive``: its leaf budget
    made a loaded run's replay draw less than the first and Hypothesis call the
    strategy flaky)."""
    if depth >= 7 or draw(st.integers(0, 3)) == 0:
        return _part(draw)
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return say("force-free: {why}", why=draw(_trees(depth + 1)))
    if kind == 1:
        return _not_killed(draw(st.integers(0, 10**6)), draw(_trees(depth + 1)))
    width = draw(st.integers(2 if kind == 2 else 1, 12 if depth < 2 else 3))
    items = [draw(_trees(depth + 1)) for _ in range(width)]
    return joined(items) if kind == 2 else _listed(items)


TREES = _trees()
"""The head's words, nested deeper and wider than a message carries."""


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(words=TREES)
def test_the_head_sends_its_words_within_the_bounds_and_a_client_shows_them(
    chinese: None, words: Words
) -> None:
    sent = json.loads(json.dumps(words.wire()))
    assert _depth(sent["args"]) <= MAX_DEPTH
    assert _count(sent["args"]) + 1 <= MAX_WORDS
    assert _longest(sent["args"]) <= MAX_LIST
    fallback = "\u2603 the English line"  # what a client shows when it cannot fill
    line = shown(fallback, sent["msg"], sent["args"])
    assert line != fallback  # within the bounds: shown from the catalogue
    assert printable(line, MAX_LINE_CHARS) == line
    if _depth(sent["args"]) < MAX_DEPTH and _count(sent["args"]) + 1 < MAX_WORDS:
        assert english_words(line, {"force-free", "bob", "alice", "claim", "HOST"}) == [], (
            line
        )  # nothing was cut


@given(count=st.integers(MAX_LIST + 1, 40))
def test_a_list_past_its_cap_says_how_many_more_and_its_english_names_all(count: int) -> None:
    parts = [say("pid {pid}{who} gone already", pid=p, who="") for p in range(count)]
    line = joined(parts)
    assert line.english() == "; ".join(f"pid {p} gone already" for p in range(count))
    more = line.wire()["args"]["h"]
    assert more == {"msg": "and {count} more", "args": {"count": count - MAX_LIST + 1}}
    listed = _listed(parts)
    assert ", ".join(f"pid {p} gone already" for p in range(count)) + "; claim" in listed.english()
    items = listed.wire()["args"]["shown"]
    assert len(items) == MAX_LIST and items[-1]["args"] == {"count": count - MAX_LIST + 1}


def test_past_eight_parts_the_chinese_line_names_seven_and_how_many_more(chinese: None) -> None:
    parts = [say("pid {pid}{who} gone already", pid=p, who="") for p in range(11)]
    line = joined(parts)
    wired = line.wire()
    said = shown(line.english(), wired["msg"], wired["args"])
    assert said.count("进程") == 7 and said.endswith("另有 4 项"), said


def test_words_nest_to_their_depth_and_count_and_no_further(chinese: None) -> None:
    deepest = shown("english", "force-free: {why}", {"why": _deep(MAX_DEPTH)})
    assert deepest == "force-free: " * MAX_DEPTH + "无"
    assert shown("english", "force-free: {why}", {"why": _deep(MAX_DEPTH + 1)}) == "english"
    # 1 + 6 words of a list of 8 each, then one more with its list of 8: 64 words,
    # the most a message carries; one more, and it is the English line.
    row = [{"msg": "{a}; {b}", "args": {"a": _wide(MAX_LIST), "b": "x"}}] * 6
    most = {"a": row, "b": {"msg": "{a}; {b}", "args": {"a": _wide(MAX_LIST), "b": "x"}}}
    assert _count(most) + 1 == MAX_WORDS
    assert shown("english", "{a}; {b}", most).startswith("进程 0，进程 1")
    none = {"msg": "none", "args": {}}
    over = {**most, "b": {"msg": "{a}; {b}", "args": {"a": _wide(MAX_LIST), "b": none}}}
    assert _count(over) + 1 == MAX_WORDS + 1
    assert shown("english", "{a}; {b}", over) == "english"
    assert shown("english", "{a}; {b}", {"a": _wide(MAX_LIST), "b": "x"}) != "english"
    assert shown("english", "{a}; {b}", {"a": _wide(MAX_LIST + 1), "b": "x"}) == "english"
