"""``leasejobs_waiting``: the waiting jobs of a queue by status and ``run_at``, for the stats.

``stats.collect()`` (the dashboard, the health view, ``checkjobs``) counts each queue's pending,
failed and due jobs up to a cap and finds its oldest due job; with ten million waiting rows the
claim indexes (ordered by priority first) make both a scan of the whole queue. This index makes
each a short range read (docs/benchmarks.md, "At scale").

Built as in 0009, so that no lock stops claims or enqueues: ``CREATE INDEX CONCURRENTLY`` on
PostgreSQL. MySQL/MariaDB ignore index conditions, so there the index would hold every row and
be rewritten by every claim and completion: it is not built there. SQLite runs the plain
statement. The migration state is what the model says.
"""

from django.db import migrations, models

WAITING = models.Index(
    condition=models.Q(("status__in", ["pending", "failed"])),
    fields=["queue", "status", "run_at"],
    name="leasejobs_waiting",
)


def forwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{WAITING.name}"')
        schema_editor.execute(WAITING.create_sql(Job, schema_editor, concurrently=True))
    elif vendor != "mysql":
        schema_editor.add_index(Job, WAITING)


def backwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{WAITING.name}"')
    elif vendor != "mysql":
        schema_editor.remove_index(Job, WAITING)


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0013_worker"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[migrations.AddIndex(model_name="job", index=WAITING)],
        ),
    ]
