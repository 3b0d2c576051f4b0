"""A dedupe key belongs to its job name: ``(name, live_dedupe_key)`` is unique, not the key alone.

With the key alone, an enqueue of one job could meet, return and (``on_conflict="replace"``)
rewrite a live job of another name that held the same key. Keys of different names now never
meet. Every row that was valid stays valid: a key unique on its own is unique with the name.

As 0005 did for the key alone: on PostgreSQL a unique index partial on the rows that have a
key, built ``CONCURRENTLY`` before the old one is dropped, so enqueues and claims go on and the
key is never unguarded; MySQL/MariaDB and SQLite add the new unique constraint, then drop the
old one. The migration state is what the model says (a plain unique constraint).
"""

from django.db import migrations, models

TABLE = "django_leasejobs_job"
OLD = models.UniqueConstraint(fields=["live_dedupe_key"], name="leasejobs_live_dedupe")
NEW = models.UniqueConstraint(
    fields=["name", "live_dedupe_key"], name="leasejobs_live_dedupe_per_name"
)
_PARTIAL = {
    OLD.name: '"live_dedupe_key"',
    NEW.name: '"name", "live_dedupe_key"',
}


def _swap_on_postgresql(schema_editor, add, drop):
    run = schema_editor.execute
    run(f'DROP INDEX CONCURRENTLY IF EXISTS "{add}"')  # a half-built one
    run(
        f'CREATE UNIQUE INDEX CONCURRENTLY "{add}" ON "{TABLE}" ({_PARTIAL[add]}) '
        'WHERE "live_dedupe_key" IS NOT NULL'
    )
    run(f'ALTER TABLE "{TABLE}" DROP CONSTRAINT IF EXISTS "{drop}"')
    run(f'DROP INDEX CONCURRENTLY IF EXISTS "{drop}"')


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        _swap_on_postgresql(schema_editor, NEW.name, OLD.name)


def backwards(apps, schema_editor):
    """Fails, as it must, when two live jobs of different names share a key."""
    if schema_editor.connection.vendor == "postgresql":
        _swap_on_postgresql(schema_editor, OLD.name, NEW.name)


class _NotOnPostgreSQL:
    """An operation every database but PostgreSQL runs (there ``forwards`` does its work)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class AddConstraint(_NotOnPostgreSQL, migrations.AddConstraint):
    pass


class RemoveConstraint(_NotOnPostgreSQL, migrations.RemoveConstraint):
    pass


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0015_job_name_and_key_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # The new key first, then the old one dropped: the key is never unguarded.
            database_operations=[
                migrations.RunPython(forwards, backwards),
                AddConstraint(model_name="job", constraint=NEW),
                RemoveConstraint(model_name="job", name=OLD.name),
            ],
            state_operations=[
                migrations.RemoveConstraint(model_name="job", name=OLD.name),
                migrations.AddConstraint(model_name="job", constraint=NEW),
            ],
        ),
    ]
