"""PostgreSQL: the two unique keys of a job index only the rows that have one.

``live_dedupe_key`` is NULL on every job enqueued without a dedupe key, and ``schedule_id`` on
every job not emitted by a schedule: most rows. A unique B-tree still holds an entry for each
of them (NULLs never conflict), so each INSERT wrote four index entries where two serve, and
every claim and completion, which change ``status`` and so are never HOT updates, wrote those
two useless entries again. Measured on copies of the table (docs/benchmarks.md): 20,000
INSERTs 133-198 -> 111-156 ms, setting them running 222-259 -> 157-180 ms.

Each unique constraint becomes a unique index with the same name, partial on the rows whose
key is set: the same uniqueness (rows left out are the ones that could never conflict), the
same ``IntegrityError`` for the dedupe race and the schedulers' insert-or-ignore, and
``leasejobs_one_job_per_occurrence`` still serves the foreign key's lookups by
``schedule_id`` (``schedule_id = x`` implies the index's ``schedule_id IS NOT NULL``). The
new index is built ``CONCURRENTLY`` under a temporary name, then the constraint is dropped (a
brief lock) and the index renamed: enqueues and claims go on meanwhile.

SQLite and MySQL/MariaDB keep their full unique indexes (MySQL cannot make a unique index
partial, and its foreign key on ``schedule_id`` uses that index). The migration state still
says plain unique constraints, which is what the model declares, so ``makemigrations`` sees no
change; a later migration that drops one of these constraints on PostgreSQL must drop the
index (``DROP INDEX``), not the constraint.
"""

from django.db import migrations

TABLE = "django_leasejobs_job"
KEYS = {
    "leasejobs_live_dedupe": ('"live_dedupe_key"', '"live_dedupe_key" IS NOT NULL'),
    "leasejobs_one_job_per_occurrence": (
        '"schedule_id", "occurrence_at"',
        '"schedule_id" IS NOT NULL',
    ),
}


def _is_partial(schema_editor, name):
    if schema_editor.collect_sql:  # sqlmigrate: show every statement, read nothing
        return False
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        row = cursor.fetchone()
    return row is not None and " WHERE " in row[0]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    run = schema_editor.execute
    for name, (columns, condition) in KEYS.items():
        if _is_partial(schema_editor, name):  # done by an earlier, interrupted run
            continue
        building = f"{name}_0005"
        run(f'DROP INDEX CONCURRENTLY IF EXISTS "{building}"')  # a half-built one
        run(
            f'CREATE UNIQUE INDEX CONCURRENTLY "{building}" ON "{TABLE}" ({columns}) '
            f"WHERE {condition}"
        )
        run(f'ALTER TABLE "{TABLE}" DROP CONSTRAINT IF EXISTS "{name}"')
        run(f'ALTER INDEX "{building}" RENAME TO "{name}"')


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    run = schema_editor.execute
    for name, (columns, _condition) in KEYS.items():
        if not schema_editor.collect_sql and not _is_partial(schema_editor, name):
            continue
        building = f"{name}_0004"
        run(f'DROP INDEX CONCURRENTLY IF EXISTS "{building}"')
        run(f'CREATE UNIQUE INDEX CONCURRENTLY "{building}" ON "{TABLE}" ({columns})')
        run(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
        run(f'ALTER TABLE "{TABLE}" ADD CONSTRAINT "{name}" UNIQUE USING INDEX "{building}"')


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0004_lean_job_indexes"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
