"""``Job.trace_context``: the W3C context of the enqueue's send span (docs/observability.md).

Nullable with no default, so the column is added in place with no table rewrite, rows already
there have none (their attempts start their own traces), and a process still on older code
inserts rows without naming it.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_leasejobs", "0022_job_progress"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="trace_context",
            field=models.JSONField(
                blank=True,
                editable=False,
                help_text="The enqueue's trace context (traceparent, tracestate), for the "
                "job's spans.",
                null=True,
            ),
        ),
    ]
