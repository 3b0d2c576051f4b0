"""``Job.snoozes``: the claims a handler snoozed (``raise Snooze``), capped by
``LEASEJOBS_MAX_SNOOZES``.

A constant default in the schema (``db_default``): existing rows read 0 without a rewrite of the
table (PostgreSQL 11+, MariaDB 10.3+ and MySQL 8 add such a column in place), and a process
still running the code from before this column inserts jobs without naming it.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_leasejobs', '0016_dedupe_key_per_name'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='snoozes',
            field=models.PositiveIntegerField(db_default=0, default=0, help_text='Claims the handler snoozed (raise Snooze): counted in released too.'),
        ),
    ]
