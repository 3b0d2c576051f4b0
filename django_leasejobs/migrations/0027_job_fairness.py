"""Fair ordering: the fair key, weight and place in line on the job, and their two indexes.

The new columns are nullable, so adding them rewrites no row (on PostgreSQL the partitioned
table passes them to every partition). The indexes are built as in 0014, so that no lock stops
claims or enqueues: ``CREATE INDEX CONCURRENTLY`` on PostgreSQL, on the live partition when
the table is partitioned (0026: a partitioned table cannot build one concurrently, and only
waiting jobs are in them). MySQL/MariaDB ignore index conditions, so there a plain index
would hold every finished job, which a read walks past: the two indexes are built on virtual
columns instead (``fair_waiting_run_at``, ``fair_waiting_at``: ``run_at`` and ``fair_at`` while
a fair job waits, NULL otherwise), which the model does not list. SQLite runs the plain
statements. The migration state is what the model says.

On PostgreSQL, ``leasejobs_fair_place(queue, priority, key, weight, run_at)``: the place of
one new fair job (the queue's head, the key's last place and how many of its jobs are there,
then ``core.fairness.Place``'s rule), or NULL for a job asked to run later, for the one
statement of an ``enqueue()``. In PL/pgSQL, whose statements are planned once per session:
as a plain statement, planning the reads (the partial indexes' conditions, the partitions)
took 0.7 ms of each enqueue, ten times their execution, since Django does not prepare
statements by default.
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


FAIR_PLACE = """
CREATE OR REPLACE FUNCTION leasejobs_fair_place(
    line_queue text, line_priority integer, line_key text, line_weight integer,
    asked timestamptz
) RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
DECLARE
    head timestamptz;
    last timestamptz;
    at_last bigint;
    clock timestamptz := STATEMENT_TIMESTAMP();
BEGIN
    IF asked > clock THEN
        RETURN NULL;
    END IF;
    SELECT run_at INTO head FROM django_leasejobs_job
    WHERE queue = line_queue AND priority = line_priority
      AND status IN ('pending', 'failed') AND fair_key IS NOT NULL
    ORDER BY run_at LIMIT 1;
    clock := LEAST(clock, COALESCE(head, clock));
    SELECT fair_at, COUNT(*) INTO last, at_last FROM django_leasejobs_job
    WHERE queue = line_queue AND priority = line_priority AND fair_key = line_key
      AND status IN ('pending', 'failed') AND fair_at IS NOT NULL
    GROUP BY fair_at ORDER BY fair_at DESC LIMIT 1;
    IF last IS NULL OR last < clock THEN
        RETURN clock;
    ELSIF at_last >= line_weight THEN
        RETURN last + INTERVAL '1 microsecond';
    END IF;
    RETURN last;
END
$$
"""
DROP_FAIR_PLACE = (
    "DROP FUNCTION IF EXISTS leasejobs_fair_place(text, integer, text, integer, timestamptz)"
)


MYSQL_COLUMNS = """
ALTER TABLE django_leasejobs_job
ADD COLUMN fair_waiting_run_at datetime(6) AS (CASE WHEN fair_key IS NOT NULL
    AND status IN ('pending', 'failed') THEN run_at END) VIRTUAL,
ADD COLUMN fair_waiting_at datetime(6) AS (CASE WHEN status IN ('pending', 'failed')
    THEN fair_at END) VIRTUAL,
ADD INDEX leasejobs_fair_head (queue, priority, fair_waiting_run_at),
ADD INDEX leasejobs_fair_key (queue, priority, fair_key, fair_waiting_at)
"""
DROP_MYSQL_COLUMNS = """
ALTER TABLE django_leasejobs_job
DROP INDEX leasejobs_fair_head, DROP INDEX leasejobs_fair_key,
DROP COLUMN fair_waiting_run_at, DROP COLUMN fair_waiting_at
"""


def _partitioned(schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [JOB])
        row = cursor.fetchone()
    return bool(row) and row[0] == "p"


def forwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(FAIR_PLACE)
    elif vendor == "mysql":
        schema_editor.execute(MYSQL_COLUMNS)
        return
    for index in (FAIR_HEAD, FAIR_KEY):
        if vendor == "postgresql":
            statement = index.create_sql(Job, schema_editor, concurrently=True)
            if _partitioned(schema_editor):
                statement.rename_table_references(JOB, LIVE)
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
            schema_editor.execute(statement)
        else:
            schema_editor.add_index(Job, index)


def backwards(apps, schema_editor):
    Job = apps.get_model("django_leasejobs", "Job")
    vendor = schema_editor.connection.vendor
    if vendor == "mysql":
        schema_editor.execute(DROP_MYSQL_COLUMNS)
        return
    for index in (FAIR_KEY, FAIR_HEAD):
        if vendor == "postgresql":
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{index.name}"')
        else:
            schema_editor.remove_index(Job, index)
    if vendor == "postgresql":
        schema_editor.execute(DROP_FAIR_PLACE)


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
