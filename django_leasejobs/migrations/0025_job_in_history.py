"""``Job.in_history``, and the foreign keys into the job table without their database
constraint (docs/operations.md#history-partitions).

The flag is a new column with a constant default: added in place on every database. The
foreign keys of dead letters and effects lose their database constraint: on PostgreSQL the
next migration partitions the job table, and a partitioned table cannot be referenced;
pruning deletes what hangs off a job itself.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
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
    ]
