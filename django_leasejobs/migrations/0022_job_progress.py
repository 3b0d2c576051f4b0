"""``Job.progress``: the handler's latest ``ctx.progress()`` report.

A nullable column with no default: added in place on every database, with no table rewrite,
and a process still on older code never names it.
"""

from django.db import migrations

import django_leasejobs.models.jobs


class Migration(migrations.Migration):
    dependencies = [
        ("django_leasejobs", "0021_workflows"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="progress",
            field=django_leasejobs.models.jobs.ProgressField(
                blank=True,
                editable=False,
                help_text='The latest progress the handler reported: {"done", "total", '
                '"message", "at"}.',
                null=True,
            ),
        ),
    ]
