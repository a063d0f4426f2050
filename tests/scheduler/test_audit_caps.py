"""An audit row is cut to its columns' lengths in one place, the store, whoever built
it: the fence, unfence, drain, force-free, enforcement, health-ack and admin-action
rows no longer each carry their own slices (one of them forgot some)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputui.scheduler.store.caps import text_caps
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Audit

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40).flatmap(
    lambda t: st.integers(1, 40).map(lambda n: t * n)  # long ones too, up to 1,600
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlStore]:
    path: Path = tmp_path_factory.mktemp("audit") / "state" / "gputui.db"
    mounts = path.parent.parent / "mountinfo"
    mounts.write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
    store = SqlStore(open_store(path, mountinfo=mounts))
    yield store
    store.close()


def test_every_text_column_of_the_audit_table_has_its_cap() -> None:
    assert dict(text_caps(Audit)) == {
        "user": 64, "action": 32, "target": 128, "owner": 64, "reason": 512, "outcome": 256,
    }  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(user=_TEXT, action=_TEXT, target=_TEXT, owner=_TEXT, reason=_TEXT, outcome=_TEXT)
def test_an_audit_row_is_stored_within_its_columns(
    shared: SqlStore, user: str, action: str, target: str, owner: str, reason: str, outcome: str
) -> None:
    given_row = {
        "user": user, "action": action, "target": target,
        "owner": owner, "reason": reason, "outcome": outcome,
    }  # fmt: skip
    with shared.transaction() as tx:
        row = Audit(time=1.0, uid=0, **given_row)
        tx.audit(row)
        tx.flush()
        assert row.id is not None
        audit_id = row.id
    with shared.snapshot() as tx:
        back = tx.audit_row(audit_id)
        assert back is not None
        for name, length in text_caps(Audit):
            stored = getattr(back, name)
            assert stored == given_row[name][:length]
