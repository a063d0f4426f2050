"""The ``notify_*`` ops (``gputui notify set|show|clear|test``) and the team channels of
hosts.yaml, stored beside the users' own.

Identity is the connection's (``SO_PEERCRED``), as for every op: a user sets, shows,
clears and tests only their own channels; the team's are the admin's, in hosts.yaml.
A channel's URL and secret go into the head's database and never come back out:
what any answer shows is ``shown``, the URL with its tokens masked (apprise's own
privacy form for its URLs, ours for the signed webhooks).
"""

from __future__ import annotations

import ipaddress
import os
import re
import stat
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from gputui.common.i18n import N_
from gputui.config.notify import (
    EVENTS,
    NotifyConfig,
    TeamChannel,
    address_problem,
    check_secret,
    check_url,
    kind_of,
    mask_webhook,
    parse_events,
)
from gputui.scheduler.head.chat.outbox import CallTx, Outbox, ReadFn, channel_of
from gputui.scheduler.head.chat.senders import Channel
from gputui.scheduler.server import wire
from gputui.scheduler.server.listener import Connection
from gputui.scheduler.server.peer import Caller
from gputui.scheduler.store.api import Store, Tx
from gputui.scheduler.store.tables import TEAM_UID, NotifyChannel
from gputui.wire.words import say

OPS = frozenset({"notify_set", "notify_clear", "notify_show", "notify_test"})
TEST_TEXT = "a test from gputui notify test: this channel gets your notices"


class ReadUrl(NamedTuple):
    """What a channel's URL says, read once: ``shown`` (its tokens masked) and the
    ``host`` it points to (lower case, no brackets; "" when it names none)."""

    shown: str
    host: str


def read_url(url: str) -> ReadUrl | None:
    """``url`` read once, or None when no sender takes it (apprise is asked about its
    URLs: it parses them, it sends nothing)."""
    if kind_of(url) != "apprise":
        host = urlsplit(url).hostname or ""
        return ReadUrl(mask_webhook(url), host.strip("[]").lower())
    import apprise

    service = apprise.Apprise.instantiate(url)
    if service is None:
        return None
    shown = masked_more(str(service.url(privacy=True)))  # type: ignore[no-untyped-call]
    return ReadUrl(shown, str(getattr(service, "host", None) or "").strip("[]").lower())


def shown_of(url: str) -> str | None:
    """``url`` with its tokens masked, or None when no sender takes it."""
    read = read_url(url)
    return None if read is None else read.shown


_MASKED = ("...", "****", "…")
_SECRET_KEY = re.compile(r"token|key|secret|pass|auth|sig|code|cred|session|apikey", re.I)


def _cut(text: str) -> str:
    """A part of a shown URL (decoded), masked unless short or masked already, quoted
    again (no control character reaches a terminal)."""
    if len(text) <= 4 or any(m in text for m in _MASKED):
        return quote(text, safe="*.@")
    return quote(text[:4], safe="") + "…"


def masked_more(shown: str) -> str:
    """Apprise's privacy form with what it leaves whole masked too: each path part
    (a ``json://``/``form://``/``xml://`` webhook's token, an ntfy topic), each
    ``+header``, ``-field`` and ``:payload`` value (``+Authorization=Bearer …``) and
    each value of a query key that names a token, key, secret, password or
    signature."""
    parts = urlsplit(shown)
    path = "/".join(_cut(unquote(p)) for p in parts.path.split("/"))
    query = "&".join(
        f"{quote(k, safe='+-:')}="
        + (_cut(v) if k[:1] in "+-:" or _SECRET_KEY.search(k) else quote(v, safe=""))
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit(parts._replace(path=path, query=query))


def destination_problem(host: str, private_ok: bool) -> str | None:
    """Why a user may not set a URL to ``host`` (``ReadUrl.host``), when it is an
    address (or ``localhost``) the head would refuse to connect to for them (a name is
    checked only when a send connects: see ``senders.guarded_send``)."""
    if host == "localhost" or host.endswith(".localhost"):
        host = "127.0.0.1"
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return None
    return address_problem(host, private_ok)


def sync_team(tx: Tx, rows: Sequence[NotifyChannel]) -> None:
    """Store the team channels of hosts.yaml as they are now (a channel kept keeps
    when it was first set; one gone from the file is removed)."""
    gone = {c.name for c in tx.notify.channels(TEAM_UID)} - {r.name for r in rows}
    if gone:
        tx.notify.drop_channels(TEAM_UID, sorted(gone))
    for row in rows:
        tx.notify.put_channel(row)


def view(row: NotifyChannel) -> dict[str, Any]:
    """A channel as an answer shows it: never its URL nor its secret."""
    return {
        "name": row.name,
        "team": row.uid == TEAM_UID,
        "kind": row.kind,
        "shown": row.shown,
        "signed": bool(row.secret),
        "events": [e for e in row.events.split(",") if e],
        "group": row.grp,
        "since": row.created_at,
    }


class ChatOps:
    """Answers the ``notify_*`` ops (spawned off the loop's line handler: a set asks
    apprise on a thread; a test waits for its send)."""

    def __init__(
        self,
        *,
        config: NotifyConfig,
        outbox: Outbox,
        store: Store,
        read: ReadFn,
        call_tx: CallTx,
        members: Callable[[int, str], bool],
    ) -> None:
        self.config = config
        self.outbox = outbox
        self.store = store
        self._read = read
        self._call_tx = call_tx
        self._members = members
        self._testing: set[int] = set()
        """Users with a ``notify_test`` in flight."""

    async def answer(self, conn: Connection, request: wire.Request) -> None:
        try:
            body = await self._op(conn.caller, request.op, request.args)
        except wire.Refusal as refusal:
            conn.send(wire.refused(request.id, refusal))
            return
        conn.send(wire.response(request.id, body))

    async def _op(self, caller: Caller, op: str, args: Any) -> dict[str, Any]:
        if op == "notify_set":
            return await self._set(caller, args)
        if op == "notify_clear":
            names = None if args.name is None else [args.name]

            def clear(tx: Tx, _ctx: Any) -> tuple[list[str], set[int]]:
                ids = {
                    c.id
                    for c in tx.notify.channels(caller.uid)
                    if c.id is not None and (names is None or c.name in names)
                }
                return tx.notify.drop_channels(caller.uid, names), ids

            cleared, ids = await self._call_tx(clear)
            self.outbox.forget(ids)
            if args.name is not None and not cleared:
                raise wire.Refusal(
                    "no-channel", say(N_("you have no channel {name}"), name=repr(args.name))
                )
            return {"cleared": cleared}
        if op == "notify_show":
            return {
                "channels": [v for v, _ in await self._channels(caller, None, team=True)],
                "events": list(EVENTS),
                "user_channels": self.config.user_channels,
                "outbox": {
                    "waiting": self.outbox.waiting(),
                    "sent": self.outbox.sent,
                    "failed": self.outbox.failed,
                    "dropped": self.outbox.dropped,
                },
            }
        return await self._test(caller, args.name)

    async def _set(self, caller: Caller, args: Any) -> dict[str, Any]:
        if not self.config.user_channels:
            raise wire.Refusal(
                "refused", say(N_("this head takes no user channels (notify: user_channels)"))
            )
        allowed = self.config.user_schemes
        scheme = args.url.partition("://")[0].lower()
        if allowed is not None and not allowed:
            raise wire.Refusal(
                "refused",
                say(
                    N_(
                        "this head takes channels of no scheme only (notify: user_schemes), not {scheme}://"
                    ),
                    scheme=scheme,
                ),
            )
        if allowed is not None and scheme not in allowed:
            raise wire.Refusal(
                "refused",
                say(
                    N_(
                        "this head takes channels of {schemes} only (notify: user_schemes), not {scheme}://"
                    ),
                    schemes=", ".join(allowed),
                    scheme=scheme,
                ),
            )
        read = await self._read(lambda: read_url(args.url))
        if read is None:
            raise wire.Refusal(
                "bad-args",
                say(N_("notify_set: url: apprise does not know this URL (see its services)")),
            )
        problem = destination_problem(read.host, self.config.user_private)
        if problem is not None:
            raise wire.Refusal("refused", say(N_("notify_set: url: {problem}"), problem=problem))
        events = EVENTS if args.events is None else parse_events(",".join(args.events))
        row = NotifyChannel(
            uid=caller.uid,
            name=args.name,
            kind=kind_of(args.url),
            url=args.url,
            secret=args.secret,
            shown=read.shown,
            events=",".join(events),
            created_at=self.outbox.clock(),
        )

        most = self.config.user_channels_max

        def put(tx: Tx, _ctx: Any) -> dict[str, Any]:
            names = {c.name for c in tx.notify.channels(caller.uid)}
            if row.name not in names and len(names) >= most:
                raise wire.Refusal(
                    "refused",
                    say(
                        N_(
                            "you have {n} channels, the most this head keeps for one user (gputui"
                            " notify clear --name NAME)"
                        ),
                        n=len(names),
                    ),
                )
            return view(tx.notify.put_channel(row))

        stored: dict[str, Any] = await self._call_tx(put)
        self.outbox.channels_changed()
        return {"channel": stored}

    async def _channels(
        self, caller: Caller, name: str | None, team: bool
    ) -> list[tuple[dict[str, Any], Channel]]:
        """The caller's channels (and with ``team`` the team's that reach them), each as
        its view and its sender's copy."""

        def load() -> list[tuple[dict[str, Any], Channel]]:
            with self.store.snapshot() as tx:
                rows = [(view(r), channel_of(r)) for r in tx.notify.channels()]
            return [
                (shown, channel)
                for shown, channel in rows
                if (name is None or channel.name == name)
                and (
                    channel.uid == caller.uid
                    or (
                        team
                        and channel.uid == TEAM_UID
                        and (channel.group is None or self._members(caller.uid, channel.group))
                    )
                )
            ]

        found: list[tuple[dict[str, Any], Channel]] = await self._read(load)
        return found

    async def _test(self, caller: Caller, name: str | None) -> dict[str, Any]:
        if caller.uid in self._testing:
            # Each test waits for its sends: one at a time, so no user has the head
            # post to their URLs as fast as they can ask.
            raise wire.Refusal("refused", say(N_("your last notify test is still being sent")))
        self._testing.add(caller.uid)
        try:
            return await self._test_now(caller, name)
        finally:
            self._testing.discard(caller.uid)

    async def _test_now(self, caller: Caller, name: str | None) -> dict[str, Any]:
        rows = await self._channels(caller, name, team=False)
        if not rows:
            raise wire.Refusal(
                "no-channel",
                say(
                    N_("you have no channel {name}; set one: gputui notify set URL"),
                    name=repr(name),
                )
                if name
                else say(N_("you have no channel; set one: gputui notify set URL")),
            )
        results = []
        for shown, channel in rows:
            error = await self.outbox.send_now(channel, "gputui: test", TEST_TEXT)
            results.append({**shown, "ok": error is None, "error": error})
        return {"results": results}


URL_FILE_MAX = 4096


def resolve_team(
    config: NotifyConfig, now: float
) -> tuple[list[NotifyChannel], list[tuple[int, str]]]:
    """hosts.yaml's team channels as rows, each ``url_file`` read (only if the head's
    user owns it and no one else may read or write it) and each URL read once; and
    (index, one line) for each that is refused: a file not so kept, a URL or secret
    that does not pass, a URL no sender takes."""
    rows: list[NotifyChannel] = []
    problems: list[tuple[int, str]] = []
    for i, team in enumerate(config.channels):
        try:
            resolved = _resolved(team)
        except ValueError as exc:
            problems.append((i, str(exc)))
            continue
        assert resolved.url is not None
        read = read_url(resolved.url)
        if read is None:
            problems.append((i, "url: apprise does not know this URL (see its list of services)"))
            continue
        rows.append(
            NotifyChannel(
                uid=TEAM_UID,
                name=resolved.name,
                kind=kind_of(resolved.url),
                url=resolved.url,
                secret=resolved.secret,
                shown=read.shown,
                events=",".join(resolved.events),
                grp=resolved.group,
                created_at=now,
            )
        )
    return rows, problems


def _resolved(team: TeamChannel) -> TeamChannel:
    if team.url_file is None:
        return team
    path = team.url_file
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError(f"url_file: cannot open {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(file.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"url_file: {path} is not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ValueError(
                f"url_file: {path} must be the head's user's own, mode 0600 (it holds a token)"
            )
        raw = file.read(URL_FILE_MAX + 1)
    if len(raw) > URL_FILE_MAX:
        raise ValueError(f"url_file: {path} is over {URL_FILE_MAX} bytes")
    try:
        lines = [line.strip() for line in raw.decode().splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise ValueError(f"url_file: {path} is not UTF-8 text") from None
    if not 1 <= len(lines) <= 2:
        raise ValueError(f"url_file: {path}: give the URL on one line, the secret on the next")
    url, secret = lines[0], (lines[1] if len(lines) == 2 else team.secret)
    problem = check_url(url) or check_secret(secret, kind_of(url))
    if problem is not None:
        raise ValueError(f"url_file: {path}: {problem}")
    return team.model_copy(update={"url": url, "secret": secret, "url_file": None})
