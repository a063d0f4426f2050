"""The health board's rows on both databases: each write inserts the rows not stored
and updates those that are (one upsert statement, SQLite's and PostgreSQL's), drops
what it is told to, and what is read back is the last write of each key, whatever
order the keys come and go in."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from gputui.scheduler.store.api import TrackRow
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import HealthAck, HealthTrack

_runs = itertools.count(1)
KEYS = st.sampled_from(["a", "b", "c", "d"])
TRACK = st.tuples(
    KEYS,
    st.integers(0, 1_000_000),  # count
    st.booleans(),  # active
    st.floats(0, 2e9, allow_nan=False),  # last seen
    st.none() | st.integers(0, 7),  # gpu
)
# (a note is plain text by then: the request's ``plain`` refuses control characters)
NOTE = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=20)
ACK = st.tuples(KEYS, NOTE, st.integers(0, 2**31 - 1))
WRITE = st.tuples(
    st.dictionaries(KEYS, TRACK.map(lambda t: t[1:]), max_size=4),
    st.dictionaries(KEYS, ACK.map(lambda a: a[1:]), max_size=3),
    st.lists(KEYS, max_size=2),  # acks gone
    st.lists(KEYS, max_size=2),  # pruned (both)
)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(WRITE, min_size=1, max_size=6))
def test_health_rows_are_the_last_write_of_each_key_on_both_databases(
    store_on_both: Engine, writes: list[tuple[dict, dict, list[str], list[str]]]
) -> None:
    store = SqlStore(store_on_both)
    run = f"r{next(_runs)}-"  # each example its own keys
    tracks: dict[str, tuple[object, ...]] = {}
    acks: dict[str, tuple[object, ...]] = {}
    for new_tracks, new_acks, gone, pruned in writes:
        track_rows = [
            TrackRow(
                key=run + k,
                host="gpu01",
                gpu=gpu,
                code="xid",
                first_seen=1.0,
                last_seen=last,
                count=count,
                active=active,
                outside=False,
            )
            for k, (count, active, last, gpu) in new_tracks.items()
        ]
        ack_rows = [
            HealthAck(key=run + k, by_uid=uid, by_user="root", note=note, at=2.0, fingerprint="{}")
            for k, (note, uid) in new_acks.items()
        ]
        with store.transaction() as tx:
            tx.health.drop([run + k for k in pruned], [run + k for k in pruned])
            tx.health.put(track_rows, ack_rows, [run + k for k in gone])
        for k in pruned:
            tracks.pop(k, None)
            acks.pop(k, None)
        for k, (count, active, last, gpu) in new_tracks.items():
            tracks[k] = (gpu, last, count, active)
        for k, (note, uid) in new_acks.items():
            acks[k] = (uid, note)
        for k in gone:
            acks.pop(k, None)
        with store.snapshot() as tx:
            got_tracks, got_acks = tx.health.rows()
            stored_tracks = {
                t.key[len(run) :]: (t.gpu, t.last_seen, t.count, t.active)
                for t in got_tracks
                if t.key.startswith(run)
            }
            stored_acks = {
                a.key[len(run) :]: (a.by_uid, a.note) for a in got_acks if a.key.startswith(run)
            }
        assert stored_tracks == tracks
        assert stored_acks == acks


def test_a_track_row_names_the_table_columns_in_their_order() -> None:
    """The head writes plain rows (``TrackRow``), each key the column of its name: a
    column added to the table and not to the row is red."""
    columns = [column.name for column in HealthTrack.__table__.columns]  # type: ignore[attr-defined]
    assert list(TrackRow.__annotations__) == columns
