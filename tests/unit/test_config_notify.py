"""hosts.yaml's ``notify:`` section and the checks every channel URL passes: bad values
(the file may have been written by another user) are one line naming the field;
hostile text never passes; tokens are masked."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gputui.cli import head as head_cli
from gputui.cli.check_config import check_config
from gputui.config.loader import ConfigError, parse_config
from gputui.config.notify import (
    EVENTS,
    check_url,
    kind_of,
    mask_webhook,
    parse_events,
)

BASE = "hosts:\n  - name: gpu01\n    address: gpu01.lab\n"


def _lines(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE + text, "hosts.yaml")
    return info.value.lines


def test_a_team_channel_is_read_with_its_events_and_group() -> None:
    config = parse_config(
        BASE
        + "notify:\n  tries: 3\n  channels:\n"
        + "    - name: lab\n      url: slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7\n"
        + "      events: [fail, preempt]\n      group: ml\n",
        "hosts.yaml",
    )
    (team,) = config.notify.channels
    assert (team.name, team.events, team.group, config.notify.tries) == (
        "lab",
        ["fail", "preempt"],
        "ml",
        3,
    )


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "notify:\n  channels:\n    - name: lab\n      url: http://chat.example.com/hook\n",
            "hosts.yaml:7: notify.channels[0].url: http:// sends the token in clear",
        ),
        (
            "notify:\n  channels:\n    - name: lab\n      url: slack://a/b/c\n      events: [x]\n",
            "hosts.yaml:8: notify.channels[0].events: 'x' not known",
        ),
        ("notify:\n  tries: 0\n", "hosts.yaml:5: notify.tries:"),
        ("notify:\n  queue_max: true\n", "hosts.yaml:5: notify.queue_max:"),
        ("notify:\n  sendto: x\n", "hosts.yaml:5: notify.sendto:"),
        (
            "notify:\n  channels:\n    - name: lab\n      url: slack://a/b/c\n      secret: s\n",
            "--secret is for Feishu/Lark and DingTalk",
        ),
        (
            "notify:\n  channels:\n    - name: lab\n",
            "give one of url and url_file",
        ),
        (
            "notify:\n  channels:\n    - {name: a, url: 'slack://a/b/c'}\n"
            "    - {name: a, url: 'slack://a/b/d'}\n",
            "the name 'a' is given twice",
        ),
    ],
)
def test_a_bad_value_is_one_line_naming_its_field(text: str, line: str) -> None:
    lines = _lines(text)
    assert len(lines) == 1, lines
    assert line in lines[0], lines


@given(st.text(max_size=300))
def test_a_url_check_never_raises_and_passes_only_printable_ascii(url: str) -> None:
    problem = check_url(url)
    if problem is None:
        assert url.isascii() and url.isprintable() and " " not in url and "://" in url
        kind_of(url)  # never raises either
    else:
        assert "\n" not in problem and len(problem) < 120


@given(st.lists(st.sampled_from(EVENTS), min_size=1, max_size=12))
def test_events_keep_their_order_whatever_order_they_are_given(names: list[str]) -> None:
    assert parse_events(",".join(names)) == tuple(e for e in EVENTS if e in names)


def test_signed_webhooks_are_ours_and_their_tokens_are_masked() -> None:
    feishu = "https://open.feishu.cn/open-apis/bot/v2/hook/0123456789abcdef"
    lark = "https://open.larksuite.com/open-apis/bot/v2/hook/0123456789abcdef"
    ding = "https://oapi.dingtalk.com/robot/send?access_token=0123456789abcdef"
    assert [kind_of(u) for u in (feishu, lark, ding, "feishu://token")] == [
        "feishu",
        "feishu",
        "dingtalk",
        "apprise",
    ]
    assert mask_webhook(feishu) == "https://open.feishu.cn/open-apis/bot/v2/hook/0123…"
    assert mask_webhook(ding) == "https://oapi.dingtalk.com/robot/send?access_token=0123…"


def test_check_config_and_the_head_refuse_a_team_url_no_sender_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hosts.yaml"
    path.write_text(
        BASE + "notify:\n  channels:\n    - name: ok\n      url: slack://a1/b1/c1\n"
        "    - name: lab\n      url: nonsense://abc\n"
    )
    path.chmod(0o644)
    with pytest.raises(ConfigError) as info:
        check_config(str(path))
    assert info.value.lines == [
        f"{path}:9: notify.channels[1].url: apprise does not know this URL"
        " (see its list of services)"
    ]
    code = head_cli.main(["--hosts", str(path), "--socket", str(tmp_path / "h.sock")])
    assert code == 1
    assert capsys.readouterr().err == (
        f"{path}:9: notify.channels[1]: url: apprise does not know this URL"
        " (see its list of services)\n"
    )
    assert not (tmp_path / "h.sock").exists()
