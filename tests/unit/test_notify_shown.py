"""A channel's URL is never shown back in full: what ``notify show``, the audit and
the head's log carry is ``shown_of``, and apprise's own privacy form leaves whole
the tokens of its generic webhooks (``json://``, ``form://``, ``xml://``: the path,
``+Header`` values such as ``Authorization``, ``-field`` values) and an ntfy topic."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.scheduler.head.chat.channels import shown_of

TEMPLATES = [
    "json://hooks.example.com/services/{s}",
    "jsons://hooks.example.com/a/{s}/b",
    "form://hooks.example.com/?-token={s}",
    "xml://hooks.example.com/?+X-Api-Key={s}",
    "json://hooks.example.com/?+Authorization=Bearer%20{s}",
    "json://user:{s}@hooks.example.com/",
    "ntfys://ntfy.example.com/{s}",
    "ntfys://ntfy.example.com/topic?token={s}",
    "https://hooks.slack.com/services/T1JJ3T3L2/A1BRTD4JD/{s}",
    "wecombot://{s}",
]
SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                 min_size=12, max_size=40)  # fmt: skip


@settings(max_examples=200)
@given(st.sampled_from(TEMPLATES), SECRET)
def test_no_token_is_shown_whole(template: str, secret: str) -> None:
    shown = shown_of(template.format(s=secret))
    assert shown is not None
    assert secret not in shown, shown
    assert secret[5:] not in shown, shown  # at most its first few characters
    assert shown.isprintable() and " " not in shown


def test_what_is_not_a_secret_stays_readable() -> None:
    shown = shown_of("json://hooks.example.com/?method=POST")
    assert shown is not None and shown.startswith("json://hooks.example.com/")
    assert "method=POST" in shown
