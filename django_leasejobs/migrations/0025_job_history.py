"""``Job.in_history`` and, on PostgreSQL, the job table in partitions (docs/operations.md#history-partitions).

The flag is a new column with a constant default: added in place on every database. The
foreign keys of dead letters and effects to the job table lose their database constraint (a
partitioned table cannot be referenced); pruning deletes what hangs off a job itself.

On PostgreSQL the table then becomes the live partition of a new partitioned table of the same
name, in two steps, each its own transaction (the migration is not atomic): a CHECK proving
every row is live, validated while writers go on; then one short lock for the rename, the new
table and the attach, which reads nothing. Finished rows already in the table stay in the live
partition until ``manage.py movejobhistory`` moves them, in batches, while workers run.
"""

import datetime as dt

import django.db.models.deletion
from django.db import migrations, models

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
        ("django_leasejobs", "0024_job_logs"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="in_history",
            field=models.BooleanField(
                db_default=False,
                default=False,
                editable=False,
                help_text="The job is final and its row is in the history (PostgreSQL: its partitions).",
            ),
        ),
        migrations.AlterField(
            model_name="deadletter",
            name="job",
            field=models.OneToOneField(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="dead_letter",
                to="django_leasejobs.job",
            ),
        ),
        migrations.AlterField(
            model_name="deadletter",
            name="replayed_job",
            field=models.OneToOneField(
                blank=True,
                db_constraint=False,
                help_text="The job a replay created; set once, so replaying twice creates one job.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="replay_of",
                to="django_leasejobs.job",
            ),
        ),
        migrations.AlterField(
            model_name="effect",
            name="job",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                to="django_leasejobs.job",
            ),
        ),
        migrations.RunPython(check_live_rows, migrations.RunPython.noop, atomic=True),
        migrations.RunPython(partition_job_table, unpartition_job_table, atomic=True),
    ]
