"""Workflows: a run of steps, each a job that waits for its parents (docs/workflows.md).

A ``WorkflowRun`` is one enqueue of a ``Workflow`` (or a ``chain``/``group``). Each of its
``WorkflowStep`` rows is a job not yet made: it waits (``pending_parents`` > 0) until its
parents end, and is then *released* (its ``Job`` inserted, ``Job.workflow_step`` pointing back).
The counters move inside the fenced transition that ends a parent's job, one guarded UPDATE
per edge, so a workflow's progress is never derived by counting its jobs.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class RunStatus(models.TextChoices):
    """A run's state: running until its last step ends, then how its steps ended."""

    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    """Every step succeeded."""
    FAILED = "failed", "Failed"
    """Every step ended, and at least one ended dead or cancelled."""
    CANCELLED = "cancelled", "Cancelled"
    """An operator cancelled the run (``workflows.cancel``), and its last step has ended."""


class StepState(models.TextChoices):
    """A step's state. Only ``released`` has a live job; its job's status says the rest."""

    WAITING = "waiting", "Waiting"
    """Some parents have not ended yet (``pending_parents`` > 0)."""
    HELD = "held", "Held"
    """A parent failed and the step's policy is ``hold``: it waits for an operator
    (``workflows.release``) or the run's cancel. Its descendants keep waiting on it."""
    RELEASED = "released", "Released"
    """Its job was inserted: pending, running or waiting for a retry."""
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    """Its job ended dead (a replay of its dead letter re-arms it)."""
    CANCELLED = "cancelled", "Cancelled"
    """Its job was cancelled, or it never started: a parent failed under the ``cancel``
    policy, or the run was cancelled (``reason`` says which)."""
    SKIPPED = "skipped", "Skipped"
    """Not needed: an ``on_failure`` step whose parents all succeeded. Not a failure."""


class Policy(models.TextChoices):
    """What a step does when a parent ends dead or cancelled (``on_parent_failure``)."""

    CANCEL = "cancel", "Cancel"
    """The step, and so every descendant that cancels too, is cancelled (the default)."""
    RUN = "run", "Run"
    """The step runs anyway once every parent has ended (a cleanup step)."""
    HOLD = "hold", "Hold"
    """The step is held for an operator; its descendants keep waiting."""
    ON_FAILURE = "on_failure", "Only on a failure"
    """A group's ``.on_failure(cb)``: released once, as soon as a parent ends dead or
    cancelled; skipped when every parent succeeded."""


class TakesResult(models.TextChoices):
    """What a released step's job gets as its first argument (its signature's placeholder)."""

    NONE = "none", "Nothing"
    """``fn.si(...)``, or a step without parents."""
    ONE = "one", "Its parent's result"
    """``fn.s(...)`` after one parent: a chain."""
    LIST = "list", "Its parents' results, in order"
    """``fn.s(...)`` after several parents (a group's callback): a list, in ``after`` order."""


class WorkflowRun(models.Model):
    """One enqueued workflow and its counters: ``status`` changes when its last step ends."""

    name = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING, db_index=True
    )
    created_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="When an operator cancelled the run."
    )
    steps_total = models.PositiveIntegerField(default=0)
    steps_finished = models.PositiveIntegerField(
        default=0, help_text="Steps succeeded, failed or cancelled."
    )
    steps_succeeded = models.PositiveIntegerField(default=0)
    steps_failed = models.PositiveIntegerField(default=0)
    steps_cancelled = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=[s.value for s in RunStatus]),
                name="leasejobs_workflow_status_valid",
            ),
        ]
        permissions = [("cancel_workflowrun", "Can cancel a workflow run")]

    def __str__(self) -> str:
        return f"workflow {self.name or '-'}#{self.pk} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status != RunStatus.RUNNING


class WorkflowStep(models.Model):
    """One step of a run: its job's call (a signature), its policy, and where it stands."""

    # Indexed by the unique (run, name) constraint.
    run = models.ForeignKey(
        WorkflowRun, on_delete=models.CASCADE, related_name="steps", db_index=False
    )
    name = models.CharField(max_length=200, help_text="Unique within the run.")
    job_name = models.CharField(max_length=200, help_text="The registered job it runs.")
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    options = models.JSONField(
        default=dict, blank=True, help_text="Enqueue options (fn.using(...)) for its job."
    )
    takes_result = models.CharField(
        max_length=8, choices=TakesResult.choices, default=TakesResult.NONE
    )
    on_parent_failure = models.CharField(
        max_length=16, choices=Policy.choices, default=Policy.CANCEL
    )
    state = models.CharField(max_length=16, choices=StepState.choices, default=StepState.WAITING)
    reason = models.CharField(
        max_length=200, blank=True, default="", help_text="Why it was cancelled or held."
    )
    pending_parents = models.PositiveIntegerField(
        default=0, help_text="Parents that have not ended: released at zero."
    )
    parents = models.ManyToManyField(
        "self",
        symmetrical=False,
        through="WorkflowEdge",
        through_fields=("child", "parent"),
        related_name="children",
        blank=True,
    )
    # Not a database constraint: pruning deletes the jobs of finished runs by their own rules.
    job = models.ForeignKey(
        "Job",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
        help_text="Its latest job (a replay's, after one).",
    )
    created_at = models.DateTimeField(db_default=Now())
    released_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="leasejobs_step_name_per_run"),
            models.CheckConstraint(
                condition=models.Q(state__in=[s.value for s in StepState]),
                name="leasejobs_step_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"step {self.name} of run {self.run_id} ({self.state})"


class WorkflowEdge(models.Model):
    """``child`` waits for ``parent``; ``position`` is the parent's place in ``after=[...]``
    (the order of a group callback's results)."""

    # Indexed by the unique (parent, child) constraint.
    parent = models.ForeignKey(
        WorkflowStep, on_delete=models.CASCADE, related_name="child_edges", db_index=False
    )
    child = models.ForeignKey(WorkflowStep, on_delete=models.CASCADE, related_name="parent_edges")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["child", "position"]
        constraints = [
            models.UniqueConstraint(fields=["parent", "child"], name="leasejobs_edge_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.parent_id} -> {self.child_id}"
