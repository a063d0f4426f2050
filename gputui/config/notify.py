"""Notices in the team's chat: hosts.yaml's ``notify:`` section, the names of the
events a channel may filter on, and the checks every channel URL passes (a user's,
given to ``gputui notify set``, and an admin's, from this section).

Pure: nothing here sends, reads a file or imports apprise. The head's sender is
``gputui.scheduler.head.chat``; what a URL means to apprise is apprise's to say
(the head asks it before a channel is stored). Two kinds of URL are ours, because
apprise does not sign them: a Feishu/Lark bot webhook
(``https://open.feishu.cn/open-apis/bot/v2/hook/TOKEN``) and a DingTalk robot
webhook (``https://oapi.dingtalk.com/robot/send?access_token=TOKEN``), each with
the bot's signing secret if it has one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Annotated, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from gputui.common.i18n import N_, _

EVENTS = ("start", "end", "fail", "preempt", "claim", "fence", "quota", "idle", "admin")
"""What a channel may be told of, in the order ``gputui notify show`` lists them:
a job started, ended (completed or cancelled), failed (or ran out of time), was
preempted; a claim about to expire or released (for idling, or its time); a fence
on a card you hold; a job that runs over its group's quota; a job idle on its
cards; an admin's action on what you hold (a drain, a kill) or a process flagged."""

KIND_EVENTS = {
    "started": "start",
    "ended": "end",
    "failed": "fail",
    "preempted": "preempt",
    "claim": "claim",
    "fence": "fence",
    "quota": "quota",
    "idle": "idle",
    "admin": "admin",
    "ownership": "admin",
}
"""A stored notice's kind -> the event it is (an ``ended`` job that failed or timed
out is ``fail``: the head looks at the job)."""

URL_MAX = 2048
SECRET_MAX = 256
NAME_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}")
"""A channel's name (``--name``, a team channel's ``name:``)."""

Kind = Literal["apprise", "feishu", "dingtalk"]

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,31}")
_FEISHU_PATH = re.compile(r"/open-apis/bot/v2/hook/([A-Za-z0-9_-]{8,128})/?")
_TOKEN = re.compile(r"[A-Za-z0-9_-]{8,128}")


def _same(text: str) -> str:
    """English, as the head says it (its words reach a client as the head's own)."""
    return text


def check_url(url: str, say: Callable[[str], str] = _same) -> str | None:
    """What is wrong with ``url`` as a channel (one line), or None.

    Printable ASCII without spaces, at most ``URL_MAX`` characters, a scheme; plain
    ``http://`` only to this machine (a local relay: a chat's token never crosses a
    network in clear). ``say``: the language it is said in (hosts.yaml's checks: the
    reader's; the head's: English)."""
    if not url:
        return say(N_("give a channel URL"))
    if len(url) > URL_MAX:
        return say(N_("a channel URL is at most {most} characters")).format(most=URL_MAX)
    if not all(33 <= ord(c) < 127 for c in url):
        return say(N_("a channel URL is printable ASCII with no spaces"))
    scheme, sep, _rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme.lower()):
        return say(N_("a channel URL starts with a scheme (slack://, mailto://, https://, …)"))
    if scheme.lower() == "http" and not _loopback(urlsplit(url).hostname or ""):
        return say(N_("http:// sends the token in clear: use https:// (http only to this machine)"))
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


METADATA = frozenset(
    {
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("fd00:ec2::254"),  # AWS, over IPv6
    }
)
"""Cloud metadata services outside link-local (169.254.0.0/16 is refused whole)."""
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def address_problem(host: str, private_ok: bool) -> str | None:
    """Why a user's channel may not make the head connect to ``host`` (an IP address
    as a socket is given it), or None.

    Never: link-local (cloud metadata at 169.254.169.254), multicast, unspecified or
    reserved addresses, nor a known metadata address; loopback and private addresses
    only with ``private_ok`` (``notify: user_private``). The head may sit on a network
    its users cannot reach, and it connects as itself."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(
            host.partition("%")[0]
        )
    except ValueError:
        return f"{host[:60]!r} is not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in METADATA or ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        return f"{ip} is a link-local, metadata or reserved address"
    if ip.is_global or private_ok:
        return None
    return f"{ip} is a loopback or private address (notify: user_private)"


def kind_of(url: str) -> Kind:
    """``feishu`` or ``dingtalk`` for a bot webhook we send ourselves (signed), else
    ``apprise`` (apprise's own URL forms, its Slack, WeCom, email, ...)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("https", "http"):
        return "apprise"
    if _FEISHU_PATH.fullmatch(parts.path):
        return "feishu"
    if parts.path.rstrip("/") == "/robot/send" and _TOKEN.fullmatch(
        (parse_qs(parts.query).get("access_token") or [""])[0]
    ):
        return "dingtalk"
    return "apprise"


def check_secret(secret: str | None, kind: Kind, say: Callable[[str], str] = _same) -> str | None:
    """What is wrong with a signing secret for a channel of ``kind``, or None (``say``:
    as for ``check_url``)."""
    if secret is None:
        return None
    if kind == "apprise":
        return say(
            N_(
                "--secret is for Feishu/Lark and DingTalk bot webhooks"
                " (apprise's URLs carry their own secrets)"
            )
        )
    if not secret or len(secret) > SECRET_MAX or not all(33 <= ord(c) < 127 for c in secret):
        return say(
            N_("a signing secret is 1 to {most} printable characters with no spaces")
        ).format(most=SECRET_MAX)
    return None


def mask(text: str) -> str:
    """A token shown without giving it away: its first 4 characters, then ``…``."""
    return text if len(text) <= 4 else text[:4] + "…"


def mask_webhook(url: str) -> str:
    """One of our signed webhooks' URLs with its token masked."""
    parts = urlsplit(url)
    where = f"{parts.scheme}://{parts.netloc}"
    found = _FEISHU_PATH.fullmatch(parts.path)
    if found:
        return f"{where}/open-apis/bot/v2/hook/{mask(found.group(1))}"
    token = (parse_qs(parts.query).get("access_token") or [""])[0]
    return f"{where}/robot/send?access_token={mask(token)}"


def parse_events(text: str, say: Callable[[str], str] = _same) -> tuple[str, ...]:
    """``start,end,fail`` -> its events in ``EVENTS`` order; ``all``: every one
    (``say``: as for ``check_url``)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return EVENTS
    unknown = [n for n in names if n not in EVENTS]
    if unknown or not names:
        shown = ", ".join(repr(n[:20]) for n in unknown[:3]) or say(N_("none"))
        raise ValueError(
            say(N_("{names} not known; give some of {events} (or all)")).format(
                names=shown, events=",".join(EVENTS)
            )
        )
    return tuple(e for e in EVENTS if e in names)


def _url(value: str) -> str:
    problem = check_url(value, _)
    if problem is not None:
        raise ValueError(problem)
    return value


def _events(value: list[str]) -> list[str]:
    return list(parse_events(",".join(value), _))


def _name(value: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise ValueError(
            _("a channel's name is 1-32 of a-z 0-9 _ . - (starting with a letter/digit)")
        )
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class TeamChannel(_Model):
    """A channel the admin set for a team: every notice of its members goes there."""

    name: Annotated[str, AfterValidator(_name)]
    """How ``gputui notify show`` and the audit name it."""
    url: Annotated[str, AfterValidator(_url)] | None = None
    """An apprise URL, or a Feishu/Lark or DingTalk bot webhook. hosts.yaml is read by
    every console: rather put the URL in ``url_file``."""
    url_file: Annotated[str, Field(min_length=2, max_length=4096)] | None = None
    """A file only the head's user may read (mode 0600, its owner): the URL on its
    first line, the signing secret (if any) on the second."""
    secret: Annotated[str, Field(min_length=1, max_length=SECRET_MAX)] | None = None
    """The bot's signing secret (Feishu/Lark, DingTalk webhooks)."""
    events: Annotated[list[str], AfterValidator(_events)] = Field(
        default_factory=lambda: list(EVENTS)
    )
    """Which events it is told of (default: all)."""
    group: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    """Only notices of this Unix group's members (default: everyone's)."""

    @model_validator(mode="after")
    def _secret_fits(self) -> TeamChannel:
        if (self.url is None) == (self.url_file is None):
            raise ValueError(_("give one of url and url_file"))
        if self.url_file is not None and not self.url_file.startswith("/"):
            raise ValueError(_("url_file: give an absolute path"))
        if self.url is not None:
            problem = check_secret(self.secret, kind_of(self.url), _)
            if problem is not None:
                raise ValueError(problem)
        return self


class NotifyConfig(_Model):
    """hosts.yaml's ``notify:``: team channels and how the head sends."""

    channels: Annotated[list[TeamChannel], Field(max_length=64)] = Field(default_factory=list)
    """Team channels (each with a unique name)."""
    user_channels: bool = True
    """Users may set their own channels (``gputui notify set``)."""
    user_schemes: (
        Annotated[
            list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9+.-]{0,31}$")]], Field(max_length=64)
        ]
        | None
    ) = None
    """The URL schemes a user's channel may have (e.g. ``[slack, https, wecombot,
    mailtos]``); None: any apprise knows. The head sends where a user's URL points:
    on a network with HTTP services only the head should reach, list what is used."""
    user_private: bool = False
    """A user's channel may reach loopback and private addresses (a relay on this
    machine, a chat server on the site's network); off by default, since the head
    (often root) sends from inside the site's network. Link-local (cloud metadata),
    multicast and reserved addresses it never may; the head checks each address it
    connects to for a user's channel, after the name is resolved."""
    user_channels_max: Annotated[int, Field(ge=1, le=64)] = 8
    """Channels one user may have."""
    tries: Annotated[int, Field(ge=1, le=20)] = 6
    """Sends of one notice to one channel before it is given up (and audited)."""
    backoff_s: Annotated[float, Field(ge=0.01, le=600)] = 2.0
    """The wait after the first failed send; doubled after each next one."""
    backoff_max_s: Annotated[float, Field(ge=0.01, le=3600)] = 300.0
    """The longest wait between two sends of one notice."""
    timeout_s: Annotated[float, Field(ge=0.5, le=120)] = 10.0
    """How long one send may take."""
    queue_max: Annotated[int, Field(ge=1, le=100_000)] = 10_000
    """Sends waiting at most; past it the oldest is dropped (counted and audited)."""
    resume_s: Annotated[float, Field(ge=0, le=30 * 86400)] = 86400.0
    """After a restart, unsent notices this recent are still sent."""
    senders: Annotated[int, Field(ge=1, le=32)] = 4
    """Sends in flight at once (one hung channel never holds the others up)."""

    @model_validator(mode="after")
    def _unique(self) -> NotifyConfig:
        names = [c.name for c in self.channels]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                _("channels: the name {name} is given twice").format(name=repr(twice[0]))
            )
        return self
