"""``leasejobs_waiting_id``: the waiting jobs by id, for the admin's list filtered to them.

The job list is ordered newest first; filtered to pending (or failed) it walked the primary key
backwards past every newer finished row, 170-200 ms past a million of them (docs/benchmarks.md,
"At scale"). This index makes it a read of its first 50 entries. Built as 0014
(``_partial_index``): concurrently on PostgreSQL, not on MySQL/MariaDB.
"""

from django.db import migrations, models

from ._partial_index import add_partial_index


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0014_job_waiting_index"),
    ]

    operations = [
        add_partial_index(
            models.Index(
                condition=models.Q(("status__in", ["pending", "failed"])),
                fields=["id"],
                name="leasejobs_waiting_id",
            )
        ),
    ]
