"""The submission fast path writes and shows a job with the ``Job`` table's own
columns and defaults: nothing a row carries is dropped, nothing it leaves out differs
from the model's default, and its view is the view of the row read back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticUndefined

from gputui.scheduler.head.views import job_row_view, job_view
from gputui.scheduler.store.engine import open_store
from gputui.scheduler.store.jobrow import JOB_COLUMNS, JOB_NULLABLE
from gputui.scheduler.store.sqlstore import SqlStore
from gputui.scheduler.store.tables import Job

_TEXT = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FFF), max_size=12)
_BY_TYPE: dict[type, st.SearchStrategy[Any]] = {
    bool: st.booleans(),
    int: st.integers(0, 2**40),
    float: st.floats(0, 2e9, allow_nan=False),
    str: _TEXT,
}


def _values(column: str) -> st.SearchStrategy[Any]:
    annotation = Job.model_fields[column].annotation
    kinds = [k for k in (get_args(annotation) or (annotation,)) if k is not type(None)]
    values = _BY_TYPE[kinds[0]]
    return st.none() | values if type(None) in get_args(annotation) else values


def _required() -> list[str]:
    return [c for c in JOB_COLUMNS if Job.model_fields[c].default is PydanticUndefined]


@st.composite
def rows(draw: st.DrawFn) -> dict[str, Any]:
    """A job row: every required column, and any of the others."""
    optional = [c for c in JOB_COLUMNS if c not in _required()]
    chosen = draw(st.lists(st.sampled_from(optional), unique=True))
    return {c: draw(_values(c)) for c in [*_required(), *chosen]}


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqlStore]:
    path: Path = tmp_path_factory.mktemp("rows") / "state" / "gputui.db"
    mounts = path.parent.parent / "mountinfo"
    mounts.write_text("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
    store = SqlStore(open_store(path, mountinfo=mounts))
    yield store
    store.close()


def test_the_fast_path_writes_every_column_of_the_table() -> None:
    assert set(JOB_COLUMNS) == {c for c in Job.model_fields if c != "id"}


def test_a_column_an_insert_may_leave_out_is_null_in_the_database_unless_set(
    shared: SqlStore,
) -> None:
    """The fast path leaves out a column that is None in every row it writes: in the
    migrated database each such column takes NULL and has no default of its own."""
    with shared.transaction() as tx:
        info = tx.s.connection().exec_driver_sql("PRAGMA table_info(job)").all()
    schema = {name: (notnull, default) for _, name, _, notnull, default, _ in info}
    assert JOB_NULLABLE and set(schema) >= JOB_NULLABLE
    for column in JOB_NULLABLE:
        assert schema[column] == (0, None), column
    # Those are all the columns that are NULL unless set (the others are written).
    nullable = {c for c, (notnull, default) in schema.items() if not notnull and default is None}
    assert nullable - {"id"} == JOB_NULLABLE


def test_an_insert_leaves_out_only_what_is_null_in_every_row(shared: SqlStore) -> None:
    required = dict.fromkeys(_required(), 1) | {"argv": "[]", "user": "u"}
    batch = [required | {"pool": "p"}, required | {"pool": None, "pid": 7}, required]
    with shared.transaction() as tx:
        ids = tx.insert_jobs(batch)
        back = [tx.job(i) for i in ids]
        read = [(j.pool, j.pid, j.cwd) for j in back if j is not None]
    assert read == [
        ("p", None, None),
        (None, 7, None),
        (None, None, None),
    ]


@settings(max_examples=80, deadline=None)
@given(batch=st.lists(rows(), min_size=1, max_size=3))
def test_a_fast_path_row_reads_back_as_written_and_shows_as_the_table_does(
    shared: SqlStore, batch: list[dict[str, Any]]
) -> None:
    with shared.transaction() as tx:
        ids = tx.insert_jobs(batch)
        for row, job_id in zip(batch, ids, strict=True):
            back = tx.job(job_id)
            assert back is not None
            for column in JOB_COLUMNS:
                default = Job.model_fields[column].default
                assert getattr(back, column) == row.get(column, default), column
            assert job_row_view({**row, "id": job_id}) == job_view(back)


def test_a_row_with_a_key_the_table_lacks_is_refused(shared: SqlStore) -> None:
    row = dict.fromkeys(_required(), 1) | {"no_such_column": 1}
    with pytest.raises(ValueError, match="no_such_column"), shared.transaction() as tx:
        tx.insert_jobs([row])
