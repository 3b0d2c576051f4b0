"""On PostgreSQL, the job table in partitions (docs/operations.md#history-partitions);
nothing on other databases.

The table becomes the live partition of a new partitioned table of the same name, in two
steps, each its own transaction (the migration is not atomic): a CHECK proving every row is
live, validated while writers go on; then one short lock for the rename, the new table and
the attach, which reads no row. Each step does nothing when already done, so a migration
stopped between them runs again. Finished rows already in the table stay in the live
partition until ``manage.py movejobhistory`` moves them, in batches, while workers run.
Reversed, the history's rows are written back and the table is one table again.
"""

from django.db import migrations

from django_leasejobs import dialects


def check_live_rows(apps, schema_editor):
    dialects.history_migration(schema_editor.connection, "check")


def partition_job_table(apps, schema_editor):
    dialects.history_migration(schema_editor.connection, "partition")


def unpartition_job_table(apps, schema_editor):
    dialects.history_migration(schema_editor.connection, "unpartition")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("django_leasejobs", "0025_job_in_history"),
    ]

    operations = [
        migrations.RunPython(check_live_rows, migrations.RunPython.noop, atomic=True),
        migrations.RunPython(partition_job_table, unpartition_job_table, atomic=True),
    ]
