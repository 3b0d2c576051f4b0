"""Fewer index writes per job: every claim and completion changes ``status``, so PostgreSQL
cannot make it a HOT update and writes an entry into each index of the table again.

Dropped: the index on ``name`` (and its ``LIKE`` twin) and the one on ``schedule_id`` (the
unique ``(schedule, occurrence_at)`` constraint leads with it). ``leasejobs_finished`` becomes
partial on the final states, so a claim writes nothing there. Nine index entries per
transition become five on PostgreSQL (see docs/benchmarks.md).

The job table of a busy installation is large and always in use, so the database side is
written by hand instead of Django's ``AlterField``/``RemoveIndex``/``AddIndex`` (which on
PostgreSQL drop and re-validate the ``schedule`` foreign key and build the new index while
holding the table's lock, and on MariaDB copy the whole table to re-add the foreign key):

- PostgreSQL: ``DROP INDEX CONCURRENTLY`` / ``CREATE INDEX CONCURRENTLY`` (no lock that stops
  claims or enqueues), the new partial index built under a temporary name and renamed.
- MySQL/MariaDB: only the ``name`` index is dropped (in place). The foreign key keeps using the
  unique ``(schedule, occurrence_at)`` index, and ``leasejobs_finished`` stays as it is: MySQL
  ignores index conditions.
- SQLite: plain ``DROP INDEX`` / ``CREATE INDEX``.

The migration state is exactly what the model says, so ``makemigrations`` sees no change.
"""

from django.db import migrations, models

TABLE = "django_leasejobs_job"
NAME_INDEX = "django_leasejobs_job_name_246c485f"
NAME_LIKE_INDEX = "django_leasejobs_job_name_246c485f_like"
SCHEDULE_INDEX = "django_leasejobs_job_schedule_id_b2980c98"
FINISHED = "leasejobs_finished"
FINAL = "('succeeded', 'dead', 'cancelled')"


def _mysql_has_index(schema_editor, name):
    if schema_editor.collect_sql:  # sqlmigrate: show the statement, read nothing
        return True
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, TABLE)
    return name in constraints


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    run = schema_editor.execute
    if vendor == "postgresql":
        for name in (NAME_INDEX, NAME_LIKE_INDEX, SCHEDULE_INDEX):
            run(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
        run(f'DROP INDEX CONCURRENTLY IF EXISTS "{FINISHED}_0004"')  # a half-done earlier run
        run(
            f'CREATE INDEX CONCURRENTLY "{FINISHED}_0004" ON "{TABLE}" ("status", "finished_at") '
            f'WHERE "status" IN {FINAL}'
        )
        run(f'DROP INDEX CONCURRENTLY IF EXISTS "{FINISHED}"')
        run(f'ALTER INDEX "{FINISHED}_0004" RENAME TO "{FINISHED}"')
    elif vendor == "mysql":
        if _mysql_has_index(schema_editor, NAME_INDEX):
            run(f"ALTER TABLE `{TABLE}` DROP INDEX `{NAME_INDEX}`, ALGORITHM=INPLACE, LOCK=NONE")
    else:
        for name in (NAME_INDEX, SCHEDULE_INDEX, FINISHED):
            run(f'DROP INDEX IF EXISTS "{name}"')
        run(
            f'CREATE INDEX "{FINISHED}" ON "{TABLE}" ("status", "finished_at") '
            f'WHERE "status" IN {FINAL}'
        )


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    run = schema_editor.execute
    if vendor == "postgresql":
        run(f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{NAME_INDEX}" ON "{TABLE}" ("name")')
        run(
            f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{NAME_LIKE_INDEX}" '
            f'ON "{TABLE}" ("name" varchar_pattern_ops)'
        )
        run(
            f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{SCHEDULE_INDEX}" ON "{TABLE}" ("schedule_id")'
        )
        run(f'DROP INDEX CONCURRENTLY IF EXISTS "{FINISHED}_0003"')
        run(
            f'CREATE INDEX CONCURRENTLY "{FINISHED}_0003" ON "{TABLE}" ("status", "finished_at")'
        )
        run(f'DROP INDEX CONCURRENTLY IF EXISTS "{FINISHED}"')
        run(f'ALTER INDEX "{FINISHED}_0003" RENAME TO "{FINISHED}"')
    elif vendor == "mysql":
        if schema_editor.collect_sql or not _mysql_has_index(schema_editor, NAME_INDEX):
            run(f"ALTER TABLE `{TABLE}` ADD INDEX `{NAME_INDEX}` (`name`), ALGORITHM=INPLACE, LOCK=NONE")
    else:
        run(f'DROP INDEX IF EXISTS "{FINISHED}"')
        run(f'CREATE INDEX "{FINISHED}" ON "{TABLE}" ("status", "finished_at")')
        run(f'CREATE INDEX IF NOT EXISTS "{NAME_INDEX}" ON "{TABLE}" ("name")')
        run(f'CREATE INDEX IF NOT EXISTS "{SCHEDULE_INDEX}" ON "{TABLE}" ("schedule_id")')


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0003_job_task_backend"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.RemoveIndex(
                    model_name="job",
                    name="leasejobs_finished",
                ),
                migrations.AlterField(
                    model_name="job",
                    name="name",
                    field=models.CharField(help_text="Registered dotted path.", max_length=200),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="schedule",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=models.deletion.SET_NULL,
                        related_name="jobs",
                        to="django_leasejobs.schedule",
                    ),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(
                        condition=models.Q(("status__in", ["succeeded", "dead", "cancelled"])),
                        fields=["status", "finished_at"],
                        name="leasejobs_finished",
                    ),
                ),
            ],
        ),
    ]
