"""The chat channels and their deliveries: the ``notify`` part of ``SqlTx``, run in its
transaction, on its session."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete
from sqlmodel import Session, col, select

from gputui.scheduler.store.caps import capped
from gputui.scheduler.store.tables import Notice, NotifyChannel, NotifySent

_CHUNK = 500


class SqlNotify:
    """The ``NotifyRows`` part of a transaction."""

    __slots__ = ("_s",)

    def __init__(self, session: Session) -> None:
        self._s = session

    def channels(self, uid: int | None = None) -> list[NotifyChannel]:
        query = select(NotifyChannel)
        if uid is not None:
            query = query.where(NotifyChannel.uid == uid)
        return list(self._s.exec(query.order_by(col(NotifyChannel.id))).all())

    def put_channel(self, row: NotifyChannel) -> NotifyChannel:
        found = self._s.exec(
            select(NotifyChannel).where(
                NotifyChannel.uid == row.uid, NotifyChannel.name == row.name
            )
        ).first()
        if found is None:
            self._s.add(capped(row))
            self._s.flush()
            return row
        for name in ("kind", "url", "secret", "shown", "events", "grp"):
            setattr(found, name, getattr(row, name))
        capped(found)
        self._s.flush()
        return found

    def drop_channels(self, uid: int, names: Sequence[str] | None = None) -> list[str]:
        query = select(NotifyChannel).where(NotifyChannel.uid == uid)
        if names is not None:
            query = query.where(col(NotifyChannel.name).in_(list(names)))
        rows = list(self._s.exec(query).all())
        ids = [r.id for r in rows if r.id is not None]
        dropped = [r.name for r in rows]
        for row in rows:
            self._s.delete(row)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            self._s.execute(delete(NotifySent).where(col(NotifySent.channel_id).in_(chunk)))
        self._s.flush()
        return dropped

    def notices_since(self, since: float, after_id: int, limit: int) -> list[Notice]:
        query = select(Notice).where(col(Notice.id) > after_id, col(Notice.time) >= since)
        return list(self._s.exec(query.order_by(col(Notice.id)).limit(limit)).all())

    def settled(self, notice_ids: Sequence[int]) -> set[tuple[int, int]]:
        out: set[tuple[int, int]] = set()
        ids = list(notice_ids)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            query = select(NotifySent.notice_id, NotifySent.channel_id).where(
                col(NotifySent.notice_id).in_(chunk)
            )
            out.update((int(n), int(c)) for n, c in self._s.exec(query).all())
        return out

    def settle(self, rows: Sequence[NotifySent]) -> None:
        for row in rows:
            self._s.merge(capped(row))
        self._s.flush()

    def forget_settled(self, before: float) -> int:
        result = self._s.execute(delete(NotifySent).where(col(NotifySent.at) < before))
        return int(getattr(result, "rowcount", 0) or 0)
