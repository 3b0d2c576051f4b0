"""``JobLog``: each attempt's own logs (``LEASEJOBS_JOB_LOGS``), in a table of their own.

A new table: no lock on the job table, nothing rewritten; no foreign key constraint (the
rows are written after an attempt's end, and pruning deletes them itself).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_leasejobs', '0023_job_trace_context'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobLog',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('attempt', models.PositiveIntegerField()),
                ('records', models.JSONField(default=list)),
                ('size', models.PositiveIntegerField(default=0, help_text="The records' size in bytes, counted against the job's cap.")),
                ('job', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.CASCADE, related_name='log_records', to='django_leasejobs.job')),
            ],
            options={
                'ordering': ['job', 'attempt', 'id'],
            },
        ),
    ]
