"""Two small additions: the ``MaintenanceLease`` table, whose rows let one worker at a time
prune by ``LEASEJOBS_RETENTION``; and ``Schedule.from_code``, marking schedules declared by
``@job(cron=...)`` so that a sync by a process that does not register their job leaves them
alone. Both are cheap on a live database: a new table, and a boolean column with a constant
default on the small schedules table.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_leasejobs', '0017_job_snoozes'),
    ]

    operations = [
        migrations.CreateModel(
            name='MaintenanceLease',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='The work, e.g. retention.', max_length=100, unique=True)),
                ('holder', models.CharField(blank=True, default='', help_text='The worker id that took it last.', max_length=200)),
                ('expires_at', models.DateTimeField(blank=True, help_text='Free once past (database time); empty: never taken.', null=True)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.AddField(
            model_name='schedule',
            name='from_code',
            field=models.BooleanField(default=False, editable=False, help_text='Declared by @job(cron=...): a sync by a process that does not register the job leaves it alone.'),
        ),
        migrations.AlterField(
            model_name='schedule',
            name='synced_spec',
            field=models.JSONField(blank=True, editable=False, help_text='The LEASEJOBS_SCHEDULES entry or @job(cron=...) declaration last applied by a sync; admin edits stay until the declaration changes.', null=True),
        ),
    ]
