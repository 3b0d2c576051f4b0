"""``leasejobs_waiting``: the waiting jobs of a queue by status and ``run_at``, for the stats.

``stats.collect()`` (the dashboard, the health view, ``checkjobs``) counts each queue's pending,
failed and due jobs up to a cap and finds its oldest due job; with ten million waiting rows the
claim indexes (ordered by priority first) make both a scan of the whole queue. This index makes
each a short range read (docs/benchmarks.md, "At scale").

Built as in 0009, so that no lock stops claims or enqueues (``_partial_index``):
``CREATE INDEX CONCURRENTLY`` on PostgreSQL, not built on MySQL/MariaDB, which ignore index
conditions (the index would hold every row and be rewritten by every claim and completion).
"""

from django.db import migrations, models

from ._partial_index import add_partial_index


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0013_worker"),
    ]

    operations = [
        add_partial_index(
            models.Index(
                condition=models.Q(("status__in", ["pending", "failed"])),
                fields=["queue", "status", "run_at"],
                name="leasejobs_waiting",
            )
        ),
    ]
