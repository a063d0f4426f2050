"""The head's args carry no English phrase: where an arg is a phrase (the scope of a
request no host can hold, the processes a notice lists), it travels as words (a
template and its args, or a list of them) and a Chinese client shows it in Chinese,
while the English line stays exactly what it was. A list arg is as safe as any other:
only templates of the client's own catalogue are filled, at most ``MAX_LIST`` of them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from untranslated import english_words

from gputui.common.printable import shown as printable
from gputui.scheduler.head.watch.flags import NOTICE_PIDS, _told
from gputui.scheduler.policy.model import GpuSlot, Want, impossible_words
from gputui.scheduler.policy.ownership import GpuProc, Offence
from gputui.wire.words import MAX_LINE_CHARS, MAX_LIST, Words, say, shown

# Chinese punctuation in the expected lines is full-width, as the catalogue writes it.
# ruff: noqa: RUF001

SLOTS = [GpuSlot(f"GPU-{i}", "gpu01", i, pool="a100", model="A100") for i in range(4)]
HOSTS = {"gpu", "a100"}  # gpu01's letters, the pool's name: the test's own data


def _in_chinese(words: Words) -> str:
    return shown(words.english(), words.msg, words.wire()["args"])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    pool=st.booleans(), host=st.booleans(), model=st.booleans(), mig=st.booleans(),
    gpus=st.integers(5, 64),
)  # fmt: skip
def test_the_scope_of_too_many_gpus_is_chinese_and_the_english_line_as_before(
    chinese: None, pool: bool, host: bool, model: bool, mig: bool, gpus: int
) -> None:
    want = Want(
        "job", 1, gpus,
        pool="a100" if pool else None, host="gpu01" if host else None,
        model="A100" if model else None, mig="1g.10gb" if mig else None,
    )  # fmt: skip
    words = impossible_words(want, SLOTS)
    assert words is not None
    parts = [("pool a100", pool), ("host gpu01", host), ("model A100", model)]
    parts.append(("MIG 1g.10gb slices", mig))
    scope = ", ".join(text for text, on in parts if on)
    english = words.english()
    assert english.startswith(f"{gpus} GPUs asked for, but no host")
    if scope:
        assert f"no host ({scope}) has more than" in english
    line = _in_chinese(words)
    assert line != english
    assert english_words(line, HOSTS) == [], line
    if pool and host:
        assert "资源池 a100，主机 gpu01" in line


@pytest.mark.parametrize("count", range(2, NOTICE_PIDS + 3))
@pytest.mark.parametrize("enforce", [False, True])
def test_a_notice_of_several_processes_lists_them_in_chinese(
    chinese: None, count: int, enforce: bool
) -> None:
    mine = [
        Offence(
            GpuProc("gpu01", f"GPU-{i}", i % 4, 100 + i, 1000, "alice", "python", 1),
            "no-allocation",
        )
        for i in range(count)
    ]
    words = _told(mine, enforce, 60.0)
    english = words.english()
    assert "pid 100 on gpu01 GPU 0, pid 101 on gpu01 GPU 1" in english
    line = _in_chinese(words)
    assert "gpu01 GPU 0 上的 PID 100，gpu01 GPU 1 上的 PID 101" in line, line
    assert english_words(line, {*HOSTS, "alice", "claim", "HOST"}) == [], line


ITEM = st.fixed_dictionaries(
    {"msg": st.sampled_from(["pid {pid} on {host} GPU {gpu}", "{0.__class__}", "nope {x}"]),
     "args": st.dictionaries(st.sampled_from(["pid", "host", "gpu", "x"]),
                             st.integers() | st.text(max_size=20) | st.none(), max_size=4)}
)  # fmt: skip


def _fills(value: object) -> bool:
    """Whether the head's arg ``value`` fills a field: text, or a number in range (an
    integer past 64 bits is refused, as every number from outside is range-checked)."""
    return isinstance(value, str) or (isinstance(value, int) and -(2**63) <= value < 2**63)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(items=st.lists(ITEM | st.integers() | st.text(max_size=8), max_size=MAX_LIST + 3))
@example(
    items=[{"msg": "pid {pid} on {host} GPU {gpu}", "args": {"pid": 0, "host": 0, "gpu": 2**63}}]
)
def test_a_list_arg_is_filled_only_from_the_catalogue_and_capped(
    chinese: None, items: list[object]
) -> None:
    text = "the head's line"
    msg = (
        "{n} processes of {owner} run on GPUs not given to them: {shown}; claim the GPU"
        " (gputui claim HOST:GPU) or stop it"
    )
    line = shown(text, msg, {"n": len(items), "owner": "alice", "shown": items})
    assert isinstance(line, str) and len(line) <= MAX_LINE_CHARS
    assert printable(line, MAX_LINE_CHARS) == line
    good = all(
        isinstance(i, dict) and i["msg"] == "pid {pid} on {host} GPU {gpu}"
        and set(i["args"]) >= {"pid", "host", "gpu"} and all(map(_fills, i["args"].values()))
        for i in items
    )  # fmt: skip
    if len(items) > MAX_LIST or not good:
        assert line == text
    else:
        assert line != text and "__class__" not in line


def test_in_english_a_list_arg_reads_as_before() -> None:
    words = say(
        "{n} processes of {owner}: {shown}",
        n=2, owner="alice",
        shown=(say("pid {pid} on {host} GPU {gpu}", pid=1, host="h", gpu=0),
               say("pid {pid} on {host} GPU {gpu}", pid=2, host="h", gpu=1)),
    )  # fmt: skip
    assert words.english() == "2 processes of alice: pid 1 on h GPU 0, pid 2 on h GPU 1"
    assert words.wire()["args"]["shown"][1] == {
        "msg": "pid {pid} on {host} GPU {gpu}",
        "args": {"pid": 2, "host": "h", "gpu": 1},
    }
