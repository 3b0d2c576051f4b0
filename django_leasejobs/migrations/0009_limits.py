"""Concurrency and rate limits: the limit columns on the job, the limiter table, three indexes.

The new columns are nullable, so adding them rewrites no row. The indexes on the busy job
table are built by hand, as in 0004, so that no lock stops claims or enqueues on PostgreSQL:

- ``leasejobs_claimable`` now leaves out jobs with limits (built under a temporary name with
  ``CREATE INDEX CONCURRENTLY``, then swapped in), and ``leasejobs_limited`` holds them, so a
  claim of either kind never reads past rows of the other;
- ``leasejobs_running_key``: the running jobs of a concurrency key, counted by limited claims.

MySQL/MariaDB ignore index conditions: ``leasejobs_claimable`` stays as it is and
``leasejobs_limited`` (the same columns without its condition) is not built there; only the
key index is added. SQLite runs plain statements. The migration state is what the model says.
"""

from django.db import migrations, models

CLAIMABLE = models.Index(
    condition=models.Q(
        ("concurrency_key__isnull", True),
        ("rate_key__isnull", True),
        ("status__in", ["pending", "failed"]),
    ),
    fields=["queue", "-priority", "run_at", "id"],
    name="leasejobs_claimable",
)
OLD_CLAIMABLE = models.Index(
    condition=models.Q(status__in=["pending", "failed"]),
    fields=["queue", "-priority", "run_at", "id"],
    name="leasejobs_claimable",
)
LIMITED = models.Index(
    condition=models.Q(
        ("status__in", ["pending", "failed"]),
        models.Q(("concurrency_key__isnull", False), ("rate_key__isnull", False), _connector="OR"),
    ),
    fields=["queue", "-priority", "run_at", "id"],
    name="leasejobs_limited",
)
RUNNING_KEY = models.Index(
    condition=models.Q(("concurrency_key__isnull", False), ("status", "running")),
    fields=["concurrency_key", "status"],
    name="leasejobs_running_key",
)


def _renamed(index, name):
    return models.Index(fields=index.fields, condition=index.condition, name=name)


def _swap_claimable(apps, schema_editor, new, old):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    run = schema_editor.execute
    if vendor == "postgresql":
        temporary = _renamed(new, "leasejobs_claimable_0009")
        run('DROP INDEX CONCURRENTLY IF EXISTS "leasejobs_claimable_0009"')  # a half-done run
        run(temporary.create_sql(Job, schema_editor, concurrently=True))
        run('DROP INDEX CONCURRENTLY IF EXISTS "leasejobs_claimable"')
        run('ALTER INDEX "leasejobs_claimable_0009" RENAME TO "leasejobs_claimable"')
    elif vendor != "mysql":
        schema_editor.remove_index(Job, old)
        schema_editor.add_index(Job, new)


def _add(apps, schema_editor, index):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
        schema_editor.execute(index.create_sql(Job, schema_editor, concurrently=True))
    elif vendor != "mysql" or index is RUNNING_KEY:
        schema_editor.add_index(Job, index)


def _drop(apps, schema_editor, index):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
    elif vendor != "mysql" or index is RUNNING_KEY:
        schema_editor.remove_index(Job, index)


def forwards(apps, schema_editor):
    _swap_claimable(apps, schema_editor, CLAIMABLE, OLD_CLAIMABLE)
    _add(apps, schema_editor, LIMITED)
    _add(apps, schema_editor, RUNNING_KEY)


def backwards(apps, schema_editor):
    _drop(apps, schema_editor, RUNNING_KEY)
    _drop(apps, schema_editor, LIMITED)
    _swap_claimable(apps, schema_editor, OLD_CLAIMABLE, CLAIMABLE)


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0008_pauses"),
    ]

    operations = [
        migrations.CreateModel(
            name="Limiter",
            fields=[
                ("key", models.CharField(max_length=210, primary_key=True, serialize=False)),
                (
                    "name",
                    models.CharField(help_text="The key as jobs carry it.", max_length=200),
                ),
                ("window_start", models.DateTimeField(blank=True, null=True)),
                (
                    "started",
                    models.PositiveIntegerField(default=0, help_text="Starts in this window."),
                ),
                (
                    "blocked_until",
                    models.DateTimeField(
                        blank=True,
                        help_text="The window's end, once its starts reached the limit.",
                        null=True,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("blocked_until__isnull", False)),
                        fields=["blocked_until"],
                        name="leasejobs_limiter_blocked",
                    )
                ],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="concurrency_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="concurrency_limit",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="At most this many jobs of concurrency_key run at once.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="rate_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="rate_limit",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="At most this many starts of rate_key per rate_period.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="rate_period",
            field=models.PositiveIntegerField(
                blank=True, help_text="Seconds: the rate limit's window.", null=True
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.RemoveIndex(model_name="job", name="leasejobs_claimable"),
                migrations.AddIndex(model_name="job", index=CLAIMABLE),
                migrations.AddIndex(model_name="job", index=LIMITED),
                migrations.AddIndex(model_name="job", index=RUNNING_KEY),
            ],
        ),
    ]
