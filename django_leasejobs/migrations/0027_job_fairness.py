"""Fair ordering: the fair key, weight and place in line on the job, and their two indexes.

The new columns are nullable, so adding them rewrites no row (on PostgreSQL the partitioned
table passes them to every partition). The indexes are built as in 0014, so that no lock stops
claims or enqueues: ``CREATE INDEX CONCURRENTLY`` on PostgreSQL, on the live partition when
the table is partitioned (0026: a partitioned table cannot build one concurrently, and only
waiting jobs are in them). MySQL/MariaDB ignore index conditions: ``leasejobs_fair_head``
would hold every row, and ``leasejobs_claimable`` (plain there) already leads with its
columns, so only ``leasejobs_fair_key`` is built there. SQLite runs the plain statements. The
migration state is what the model says.

On PostgreSQL, ``leasejobs_fair_line(queue, priority, key)``: a fair enqueue's three reads
(the queue's head, the key's last place, how many of its jobs are there) with the clock. In
PL/pgSQL, whose statements are planned once per session: as a plain statement, planning
them (the partial indexes' conditions, the partitions) took 0.7 ms of each enqueue, ten times
their execution, since Django does not prepare statements by default.
"""

from django.db import migrations, models

JOB = "django_leasejobs_job"
LIVE = "django_leasejobs_job_live"

FAIR_HEAD = models.Index(
    condition=models.Q(("fair_key__isnull", False), ("status__in", ["pending", "failed"])),
    fields=["queue", "priority", "run_at"],
    name="leasejobs_fair_head",
)
FAIR_KEY = models.Index(
    condition=models.Q(("fair_at__isnull", False), ("status__in", ["pending", "failed"])),
    fields=["queue", "priority", "fair_key", "fair_at"],
    name="leasejobs_fair_key",
)


FAIR_LINE = """
CREATE OR REPLACE FUNCTION leasejobs_fair_line(
    line_queue text, line_priority integer, line_key text,
    OUT head timestamptz, OUT last timestamptz, OUT at_last bigint, OUT now timestamptz
) LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT run_at INTO head FROM django_leasejobs_job
    WHERE queue = line_queue AND priority = line_priority
      AND status IN ('pending', 'failed') AND fair_key IS NOT NULL
    ORDER BY run_at LIMIT 1;
    SELECT fair_at INTO last FROM django_leasejobs_job
    WHERE queue = line_queue AND priority = line_priority AND fair_key = line_key
      AND status IN ('pending', 'failed') AND fair_at IS NOT NULL
    ORDER BY fair_at DESC LIMIT 1;
    SELECT COUNT(*) INTO at_last FROM django_leasejobs_job
    WHERE queue = line_queue AND priority = line_priority AND fair_key = line_key
      AND status IN ('pending', 'failed') AND fair_at IS NOT NULL AND fair_at = last;
    now := STATEMENT_TIMESTAMP();
END
$$
"""
DROP_FAIR_LINE = "DROP FUNCTION IF EXISTS leasejobs_fair_line(text, integer, text)"


def _partitioned(schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [JOB])
        row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def forwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(FAIR_LINE)
    for index in (FAIR_HEAD, FAIR_KEY):
        if vendor == "postgresql":
            statement = index.create_sql(Job, schema_editor, concurrently=True)
            if _partitioned(schema_editor):
                statement.rename_table_references(JOB, LIVE)
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
            schema_editor.execute(statement)
        elif vendor != "mysql" or index is FAIR_KEY:
            schema_editor.add_index(Job, index)


def backwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    for index in (FAIR_KEY, FAIR_HEAD):
        if vendor == "postgresql":
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
        elif vendor != "mysql" or index is FAIR_KEY:
            schema_editor.remove_index(Job, index)
    if vendor == "postgresql":
        schema_editor.execute(DROP_FAIR_LINE)


class Migration(migrations.Migration):
    # CREATE/DROP INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ("django_leasejobs", "0026_job_history_partitions"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="fair_key",
            field=models.CharField(blank=True, max_length=200, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="fair_weight",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="The key's share of the queue against weight-1 keys.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="fair_at",
            field=models.DateTimeField(
                blank=True,
                help_text="The place in line the enqueue gave the job among its key's "
                "(its run_at then).",
                null=True,
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(forwards, backwards)],
            state_operations=[
                migrations.AddIndex(model_name="job", index=FAIR_HEAD),
                migrations.AddIndex(model_name="job", index=FAIR_KEY),
            ],
        ),
    ]
