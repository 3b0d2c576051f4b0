"""Workflows (docs/workflows.md): runs, their steps and the edges between steps, and
``Job.workflow_step``, the step a job runs. New tables, and one nullable column on the job
table without default, index or constraint: added in place, no table rewrite, no lock held
past the statement; rows written by older code have NULL there (a job alone).
"""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_leasejobs", "0019_job_deferrals"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkflowEdge",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("position", models.PositiveIntegerField(default=0)),
            ],
            options={
                "ordering": ["child", "position"],
            },
        ),
        migrations.CreateModel(
            name="WorkflowRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(blank=True, default="", max_length=200)),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                        ],
                        db_index=True,
                        default="running",
                        max_length=16,
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "cancel_requested_at",
                    models.DateTimeField(
                        blank=True, help_text="When an operator cancelled the run.", null=True
                    ),
                ),
                ("steps_total", models.PositiveIntegerField(default=0)),
                (
                    "steps_finished",
                    models.PositiveIntegerField(
                        default=0, help_text="Steps succeeded, failed or cancelled."
                    ),
                ),
                ("steps_succeeded", models.PositiveIntegerField(default=0)),
                ("steps_failed", models.PositiveIntegerField(default=0)),
                ("steps_cancelled", models.PositiveIntegerField(default=0)),
            ],
            options={
                "ordering": ["-id"],
                "permissions": [("cancel_workflowrun", "Can cancel a workflow run")],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            ("status__in", ["running", "succeeded", "failed", "cancelled"])
                        ),
                        name="leasejobs_workflow_status_valid",
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="WorkflowStep",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(help_text="Unique within the run.", max_length=200)),
                (
                    "job_name",
                    models.CharField(help_text="The registered job it runs.", max_length=200),
                ),
                ("args", models.JSONField(blank=True, default=list)),
                ("kwargs", models.JSONField(blank=True, default=dict)),
                (
                    "options",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text="Enqueue options (fn.using(...)) for its job.",
                    ),
                ),
                (
                    "takes_result",
                    models.CharField(
                        choices=[
                            ("none", "Nothing"),
                            ("one", "Its parent's result"),
                            ("list", "Its parents' results, in order"),
                        ],
                        default="none",
                        max_length=8,
                    ),
                ),
                (
                    "on_parent_failure",
                    models.CharField(
                        choices=[
                            ("cancel", "Cancel"),
                            ("run", "Run"),
                            ("hold", "Hold"),
                            ("on_failure", "Only on a failure"),
                        ],
                        default="cancel",
                        max_length=16,
                    ),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("waiting", "Waiting"),
                            ("held", "Held"),
                            ("released", "Released"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                            ("cancelled", "Cancelled"),
                            ("skipped", "Skipped"),
                        ],
                        default="waiting",
                        max_length=16,
                    ),
                ),
                (
                    "reason",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Why it was cancelled or held.",
                        max_length=200,
                    ),
                ),
                (
                    "pending_parents",
                    models.PositiveIntegerField(
                        default=0, help_text="Parents that have not ended: released at zero."
                    ),
                ),
                (
                    "created_at",
                    models.DateTimeField(db_default=django.db.models.functions.datetime.Now()),
                ),
                ("released_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "job",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        help_text="Its latest job (a replay's, after one).",
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="django_leasejobs.job",
                    ),
                ),
                (
                    "parents",
                    models.ManyToManyField(
                        blank=True,
                        related_name="children",
                        through="django_leasejobs.WorkflowEdge",
                        through_fields=("child", "parent"),
                        to="django_leasejobs.workflowstep",
                    ),
                ),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="django_leasejobs.workflowrun",
                    ),
                ),
            ],
            options={
                "ordering": ["id"],
            },
        ),
        migrations.AddField(
            model_name="workflowedge",
            name="child",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="parent_edges",
                to="django_leasejobs.workflowstep",
            ),
        ),
        migrations.AddField(
            model_name="workflowedge",
            name="parent",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="child_edges",
                to="django_leasejobs.workflowstep",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="workflow_step",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="jobs",
                to="django_leasejobs.workflowstep",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowstep",
            constraint=models.UniqueConstraint(
                fields=("run", "name"), name="leasejobs_step_name_per_run"
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowstep",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "state__in",
                        [
                            "waiting",
                            "held",
                            "released",
                            "succeeded",
                            "failed",
                            "cancelled",
                            "skipped",
                        ],
                    )
                ),
                name="leasejobs_step_state_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="workflowedge",
            constraint=models.UniqueConstraint(
                fields=("parent", "child"), name="leasejobs_edge_unique"
            ),
        ),
    ]
