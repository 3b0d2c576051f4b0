"""Pauses (a table the claim consults), the ``pause_queue`` permission, and the dedupe key index.

``leasejobs_dedupe_key`` serves the holder lookup of dedupe over finished states
(``dedupe_states``); partial on PostgreSQL and SQLite, so jobs without a key have no entry.
"""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_leasejobs', '0007_apitoken'),
    ]

    operations = [
        migrations.CreateModel(
            name='Pause',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('queue', 'Queue'), ('job', 'Job name')], max_length=8)),
                ('name', models.CharField(help_text='The queue or the registered job name.', max_length=200)),
                ('paused_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('paused_by', models.CharField(blank=True, default='', max_length=200)),
            ],
            options={
                'ordering': ['kind', 'name'],
            },
        ),
        migrations.AlterModelOptions(
            name='job',
            options={'ordering': ['-id'], 'permissions': [('cancel_job', 'Can cancel a job'), ('run_job_now', 'Can run a job now or retry it'), ('pause_queue', 'Can pause and resume queues and job names')]},
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('dedupe_key__isnull', False)), fields=['dedupe_key'], name='leasejobs_dedupe_key'),
        ),
        migrations.AddConstraint(
            model_name='pause',
            constraint=models.UniqueConstraint(fields=('kind', 'name'), name='leasejobs_one_pause'),
        ),
        migrations.AddConstraint(
            model_name='pause',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['queue', 'job'])), name='leasejobs_pause_kind_valid'),
        ),
    ]
