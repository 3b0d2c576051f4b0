"""Jobs whose name a worker could not run wait for one that can: ``Job.deferrals`` (db_default
0, so a process still on older code inserts rows without naming it), ``first_deferred_at``
(``LEASEJOBS_UNKNOWN_JOB_GRACE`` counts from it) and ``deferred_until`` (the ``run_at`` the last
deferral set: only that delay is ever cut short). Nullable or constant-default columns: added
in place, no table rewrite.

``leasejobs_deferred`` indexes ``deferred_until``, which only a deferral or a wake-up writes, so
claims and completions never touch it. Built concurrently on PostgreSQL; partial (rows ever
deferred) where supported; MySQL/MariaDB ignore the condition and keep the NULLs of the other
rows, which the range read ``deferred_until > now`` or ``IS NOT NULL`` skips.
"""

from django.db import migrations, models

DEFERRED = models.Index(
    condition=models.Q(("deferred_until__isnull", False)),
    fields=["deferred_until"],
    name="leasejobs_deferred",
)


def forwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{DEFERRED.name}"')
        schema_editor.execute(DEFERRED.create_sql(Job, schema_editor, concurrently=True))
    else:
        schema_editor.add_index(Job, DEFERRED)


def backwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{DEFERRED.name}"')
    else:
        schema_editor.remove_index(Job, DEFERRED)


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0018_maintenance_lease"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="deferrals",
            field=models.PositiveIntegerField(
                db_default=0,
                default=0,
                help_text="Claims handed back by workers that could not run this name (not charged).",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="first_deferred_at",
            field=models.DateTimeField(
                blank=True,
                help_text="The first such claim: LEASEJOBS_UNKNOWN_JOB_GRACE counts from here.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="deferred_until",
            field=models.DateTimeField(
                blank=True,
                help_text="The run_at the last deferral set: a worker that knows the name makes "
                "the job due at once only while run_at is still this (no other write moved it).",
                null=True,
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[migrations.AddIndex(model_name="job", index=DEFERRED)],
        ),
    ]
