"""Sending one message to one channel: blocking, so the head runs it on a thread of
its own (``outbox``), never on its event loop.

Apprise sends to the URLs it knows (Slack, WeCom, email, DingTalk, ...). Feishu/Lark
and DingTalk bot webhooks are sent here, signed when the bot has a secret, because
apprise's Feishu plugin does not sign:

- Feishu/Lark: ``timestamp`` (seconds) and ``sign`` in the JSON body; ``sign`` is
  base64 of HMAC-SHA256 keyed by ``timestamp + "\\n" + secret`` over nothing.
- DingTalk: ``timestamp`` (milliseconds) and ``sign`` in the query; ``sign`` is the
  URL-quoted base64 of HMAC-SHA256 keyed by the secret over ``timestamp + "\\n" +
  secret``.

Either answers HTTP 200 with a JSON code: anything but 0 is a failure, as is any
other status, a timeout or a refused connection (``SendFailed``, one line).
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import hmac
import json
import logging
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from gputui.common.text import clean
from gputui.config.notify import Kind, address_problem

logging.getLogger("apprise").setLevel(logging.CRITICAL)
"""Apprise's own log lines may hold a channel's URL, token and all: the head logs
its own one-line reasons (``SendFailed``) instead."""

ANSWER_MAX = 65536
"""The most of a webhook's answer read."""
TEXT_MAX = 4000
"""The most characters of a message sent (a chat's own limits are higher)."""


class SendFailed(Exception):
    """A send that did not get through; ``str()`` is one line (no secret in it)."""


@dataclass(frozen=True, slots=True)
class Channel:
    """A channel as the head sends to it (copied out of its row)."""

    id: int
    uid: int
    name: str
    kind: Kind
    url: str
    secret: str | None
    shown: str
    events: frozenset[str]
    group: str | None = None


_GUARD: contextvars.ContextVar[bool | None] = contextvars.ContextVar("gputui_chat_guard")
"""The policy of the send in this context: None (a team channel's, or no send), else
whether a loopback or private address may be reached (``address_problem``). A context
variable, not a thread's: apprise sends on threads of its own, each given a copy of
the caller's context."""
_GUARDED_EVENTS = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Every socket a user's channel's send opens is checked where it connects, after
    DNS and whatever host a plugin takes from its URL (apprise's ``?smtp=``, ...): a
    name that resolves to an internal address is refused like the address itself."""
    if event not in _GUARDED_EVENTS:
        return
    private_ok = _GUARD.get(None)
    if private_ok is None:
        return
    address = args[1]
    if not (isinstance(address, tuple) and address and isinstance(address[0], str)):
        raise PermissionError("a user's channel reaches only internet addresses")
    problem = address_problem(address[0], private_ok)
    if problem is not None:
        raise PermissionError(f"not sent to {problem}")


sys.addaudithook(_audit)


def guarded_send(private_ok: bool | None, sender: Callable[..., None], *args: Any) -> None:
    """``sender(*args)`` on this thread, every socket it opens checked
    (``address_problem``) unless ``private_ok`` is None (a team channel)."""
    token = _GUARD.set(private_ok)
    try:
        sender(*args)
    finally:
        _GUARD.reset(token)


def feishu_sign(timestamp: int, secret: str) -> str:
    """Feishu/Lark's signature of a bot message sent at ``timestamp`` (seconds)."""
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def dingtalk_sign(timestamp_ms: int, secret: str) -> str:
    """DingTalk's signature (before URL quoting) of a message sent at ``timestamp_ms``."""
    text = f"{timestamp_ms}\n{secret}".encode()
    digest = hmac.new(secret.encode(), text, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def send(
    channel: Channel,
    title: str,
    body: str,
    timeout: float,
    clock: Callable[[], float] = time.time,
) -> None:
    """Send ``title`` and ``body`` to ``channel``; ``SendFailed`` when it did not go."""
    body = body[:TEXT_MAX]
    if channel.kind == "apprise":
        _apprise(channel, title, body, timeout)
    elif channel.kind == "feishu":
        _feishu(channel, title, body, timeout, clock())
    else:
        _dingtalk(channel, title, body, timeout, clock())


def _apprise(channel: Channel, title: str, body: str, timeout: float) -> None:
    import apprise

    service = apprise.Apprise.instantiate(channel.url)
    if service is None:
        raise SendFailed("apprise does not take this URL any more")
    for name in ("socket_connect_timeout", "socket_read_timeout"):
        if hasattr(service, name):
            setattr(service, name, timeout)
    sender = apprise.Apprise()
    sender.add(service)
    if not sender.notify(body=body, title=title):
        raise SendFailed(f"{channel.kind}: not delivered (apprise)")


def _feishu(channel: Channel, title: str, body: str, timeout: float, now: float) -> None:
    payload: dict[str, Any] = {"msg_type": "text", "content": {"text": f"{title}\n{body}"}}
    if channel.secret:
        stamp = int(now)
        payload = {"timestamp": str(stamp), "sign": feishu_sign(stamp, channel.secret), **payload}
    answer = _post(channel.url, payload, timeout, "feishu")
    code = answer.get("code", answer.get("StatusCode", 0))
    if code != 0:
        raise SendFailed(f"feishu: code {code}: {clean(str(answer.get('msg', '')), 80)}")


def _dingtalk(channel: Channel, title: str, body: str, timeout: float, now: float) -> None:
    url = channel.url
    if channel.secret:
        stamp = int(now * 1000)
        sign = quote(dingtalk_sign(stamp, channel.secret), safe="")
        parts = urlsplit(url)
        url = urlunsplit(parts._replace(query=f"{parts.query}&timestamp={stamp}&sign={sign}"))
    payload = {"msgtype": "text", "text": {"content": f"{title}\n{body}"}}
    answer = _post(url, payload, timeout, "dingtalk")
    code = answer.get("errcode", 0)
    if code != 0:
        raise SendFailed(f"dingtalk: errcode {code}: {clean(str(answer.get('errmsg', '')), 80)}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a webhook that redirects is answered as its status, never followed


_OPENER = urllib.request.build_opener(_NoRedirect)


def _post(url: str, payload: dict[str, Any], timeout: float, what: str) -> dict[str, Any]:
    data = json.dumps(payload, ensure_ascii=False).encode()
    request = urllib.request.Request(  # noqa: S310 (the URL was checked: http(s) only)
        url, data=data, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            raw = response.read(ANSWER_MAX)
    except urllib.error.HTTPError as exc:
        raise SendFailed(f"{what}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:  # refused, timed out, reset, bad URL
        raise SendFailed(f"{what}: {clean(str(exc) or type(exc).__name__, 120)}") from None
    try:
        answer = json.loads(raw or b"{}")
    except ValueError:
        raise SendFailed(f"{what}: the answer is not JSON") from None
    return answer if isinstance(answer, dict) else {}
