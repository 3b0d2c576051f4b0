"""``Job.version``: the ``@job(version=)`` a row's arguments were written for.

A constant database default (1), so the column is added in place with no table rewrite, every
row already there reads as version 1, and a process still on older code inserts version-1 rows
without naming the column.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_leasejobs", "0019_job_deferrals"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="version",
            field=models.PositiveIntegerField(
                db_default=1,
                default=1,
                help_text="The job's version its arguments were written for (@job(version=)).",
            ),
        ),
    ]
