"""The change stream on PostgreSQL: a row trigger that notifies each changed row's key.

Every insert, update (one that changes something) and delete of a row a console is
shown (jobs, claims, allocations, hosts, GPUs, notices) sends ``NOTIFY
gputui_changes, '<table>:<key>'`` inside its transaction: the server delivers it at
commit only, and folds repeats within one transaction. The key, never the row. A
transaction's first 200 rows are sent one key each; past that (or for a key that
would not fit a payload) a row is sent as ``<table>:*``, which the server folds into
one per table (``store.changes``: ``KEYS_PER_TX``). The count lives in a
transaction-local setting, so a savepoint rolled back takes its count back with the
notifications it queued. SQLite has no NOTIFY: nothing changes there.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None

KEYS = {"job": "id", "claim": "id", "allocation": "id", "host": "name", "gpu": "uuid",
        "notice": "id"}  # fmt: skip

FUNCTION = """
CREATE OR REPLACE FUNCTION gputui_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed record;
    key text;
    payload text;
    sent integer;
BEGIN
    IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
    IF TG_TABLE_NAME = 'host' THEN key := changed.name;
    ELSIF TG_TABLE_NAME = 'gpu' THEN key := changed.uuid;
    ELSE key := changed.id::text;
    END IF;
    sent := coalesce(nullif(current_setting('gputui.changes_sent', true), ''), '0')::integer;
    PERFORM set_config('gputui.changes_sent', (sent + 1)::text, true);
    payload := TG_TABLE_NAME || ':' || coalesce(key, '*');
    IF sent >= 200 OR octet_length(payload) > 7999 THEN
        payload := TG_TABLE_NAME || ':*';
    END IF;
    PERFORM pg_notify('gputui_changes', payload);
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FUNCTION)
    for table in KEYS:
        op.execute(
            f"CREATE TRIGGER gputui_change_row AFTER INSERT OR DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION gputui_change()"
        )
        op.execute(
            f"CREATE TRIGGER gputui_change_update AFTER UPDATE ON {table} FOR EACH ROW"
            " WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION gputui_change()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in KEYS:
        op.execute(f"DROP TRIGGER IF EXISTS gputui_change_update ON {table}")
        op.execute(f"DROP TRIGGER IF EXISTS gputui_change_row ON {table}")
    op.execute("DROP FUNCTION IF EXISTS gputui_change()")
