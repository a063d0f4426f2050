"""The change stream on PostgreSQL: one notification per statement, not per row.

0011's row triggers ran a PL/pgSQL function for every row the head wrote, and the
keys they sent were never used: the head pushes its whole state on any change. Here
each watched table (jobs, claims, allocations, hosts, GPUs, notices) gets one
``AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ... FOR EACH STATEMENT`` trigger
that sends ``NOTIFY gputui_changes, '<table>:*'``: inside the transaction, so the
server delivers it at commit only (a rollback, or a savepoint rolled back, takes it
back), and folds repeats, so a transaction sends at most one per table whatever it
writes. No transition tables: nothing reads the rows. A statement that changed no
row notifies too (a push that finds nothing new). SQLite has no NOTIFY: nothing
changes there.

The revision id and its parent are below, and nowhere else.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

TABLES = ("job", "claim", "allocation", "host", "gpu", "notice")

FUNCTION = """
CREATE OR REPLACE FUNCTION gputui_change_statement() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gputui_changes', TG_TABLE_NAME || ':*');
    RETURN NULL;
END
$$
"""

ROW_KEYS = {"job": "id", "claim": "id", "allocation": "id", "host": "name", "gpu": "uuid",
            "notice": "id"}  # fmt: skip
ROW_FUNCTION = """
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
"""0011's row function, as it was: what ``downgrade`` puts back."""


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS gputui_change_update ON {table}")
        op.execute(f"DROP TRIGGER IF EXISTS gputui_change_row ON {table}")
    op.execute("DROP FUNCTION IF EXISTS gputui_change()")
    op.execute(FUNCTION)
    for table in TABLES:
        op.execute(
            f"CREATE TRIGGER gputui_change_statement"
            f" AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}"
            " FOR EACH STATEMENT EXECUTE FUNCTION gputui_change_statement()"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS gputui_change_statement ON {table}")
    op.execute("DROP FUNCTION IF EXISTS gputui_change_statement()")
    op.execute(ROW_FUNCTION)
    for table in ROW_KEYS:
        op.execute(
            f"CREATE TRIGGER gputui_change_row AFTER INSERT OR DELETE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION gputui_change()"
        )
        op.execute(
            f"CREATE TRIGGER gputui_change_update AFTER UPDATE ON {table} FOR EACH ROW"
            " WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION gputui_change()"
        )
