"""``leasejobs_name`` and ``leasejobs_concurrency_key``: the admin's filter and search by job
name and by concurrency key, read through an index at any table size.

Without them the job list filtered to a name few rows carry, or searched for a word few jobs
have, reads the whole table (716 ms and 4.5 s at ten million rows, docs/benchmarks.md "At
scale"). ``leasejobs_name`` is ``(name, id)``, so a name's newest jobs are an ordered range
read; it holds every row, and so costs an entry on each claim and completion.
``leasejobs_concurrency_key`` is partial: only jobs with a key have an entry.

Built as in 0014, so that no lock stops claims or enqueues: ``CREATE INDEX CONCURRENTLY`` on
PostgreSQL; on MySQL/MariaDB an in-place ``ADD INDEX`` of the name only (MySQL ignores index
conditions, and there ``leasejobs_running_key``, with no condition, already leads with the
key); SQLite runs the plain statements. The migration state is what the model says.
"""

from django.db import migrations, models

NAME = models.Index(fields=["name", "id"], name="leasejobs_name")
CONCURRENCY_KEY = models.Index(
    condition=models.Q(("concurrency_key__isnull", False)),
    fields=["concurrency_key"],
    name="leasejobs_concurrency_key",
)


def _built_on(vendor):
    return (NAME,) if vendor == "mysql" else (NAME, CONCURRENCY_KEY)


def forwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    for index in _built_on(vendor):
        if vendor == "postgresql":
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
            schema_editor.execute(index.create_sql(Job, schema_editor, concurrently=True))
        else:
            schema_editor.add_index(Job, index)


def backwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    for index in _built_on(vendor):
        if vendor == "postgresql":
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
        else:
            schema_editor.remove_index(Job, index)


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0014_job_waiting_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.AddIndex(model_name="job", index=NAME),
                migrations.AddIndex(model_name="job", index=CONCURRENCY_KEY),
            ],
        ),
    ]
