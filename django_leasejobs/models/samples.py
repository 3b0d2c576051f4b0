"""Queue history: one row per queue and minute, the numbers the dashboard's charts draw.

Written by :mod:`django_leasejobs.reports.samples` once a minute, by whichever worker's
maintenance gets there first: the unique (minute, queue) key makes the write an
insert-or-ignore, so any number of workers may try and no leader is needed. Deleted by
``prunejobs`` with the jobs.
"""

from __future__ import annotations

from django.db import models

RUN_TIME_EDGES: tuple[tuple[str, float], ...] = (
    ("run_le_10ms", 0.01),
    ("run_le_25ms", 0.025),
    ("run_le_50ms", 0.05),
    ("run_le_100ms", 0.1),
    ("run_le_250ms", 0.25),
    ("run_le_500ms", 0.5),
    ("run_le_1s", 1.0),
    ("run_le_2500ms", 2.5),
    ("run_le_5s", 5.0),
    ("run_le_10s", 10.0),
    ("run_le_25s", 25.0),
    ("run_le_1min", 60.0),
    ("run_le_150s", 150.0),
    ("run_le_5min", 300.0),
    ("run_le_15min", 900.0),
    ("run_le_1h", 3600.0),
)
"""The run-time histogram's columns and their upper edges in seconds (a 1-2.5-5 scale).

Cumulative counts (jobs that ran at most that long) add up across minutes and queues in SQL,
so a chart point of an hour or a day gets its p95 from the summed counts instead of from a
guess over per-minute percentiles, and the dashboard never reads the minutes one by one."""


def _runs_within(seconds: float) -> models.PositiveIntegerField:
    return models.PositiveIntegerField(
        default=0, help_text=f"Jobs of ``runs`` that ran at most {seconds:g} s."
    )


class QueueSample(models.Model):
    """A queue's numbers for one minute of database time.

    ``minute`` is the minute's start. ``succeeded`` and ``dead`` count jobs whose
    ``finished_at`` falls in the minute, ``retried`` jobs whose ``retried_at`` does (a job that
    failed twice in one minute counts once). ``due``, ``running`` and ``oldest_due_age`` are
    read when the row is written, just after the minute ends. ``runs`` counts the succeeded and
    dead jobs with a run time (``finished_at - started_at`` of their last attempt), and each
    ``run_le_*`` column how many of them took at most that long.
    """

    minute = models.DateTimeField()
    queue = models.CharField(max_length=100)
    succeeded = models.PositiveIntegerField(default=0)
    retried = models.PositiveIntegerField(default=0)
    dead = models.PositiveIntegerField(default=0)
    due = models.PositiveIntegerField(default=0, help_text="Jobs a worker could claim.")
    running = models.PositiveIntegerField(default=0)
    oldest_due_age = models.FloatField(default=0.0, help_text="Seconds.")
    runs = models.PositiveIntegerField(default=0)
    run_le_10ms = _runs_within(0.01)
    run_le_25ms = _runs_within(0.025)
    run_le_50ms = _runs_within(0.05)
    run_le_100ms = _runs_within(0.1)
    run_le_250ms = _runs_within(0.25)
    run_le_500ms = _runs_within(0.5)
    run_le_1s = _runs_within(1.0)
    run_le_2500ms = _runs_within(2.5)
    run_le_5s = _runs_within(5.0)
    run_le_10s = _runs_within(10.0)
    run_le_25s = _runs_within(25.0)
    run_le_1min = _runs_within(60.0)
    run_le_150s = _runs_within(150.0)
    run_le_5min = _runs_within(300.0)
    run_le_15min = _runs_within(900.0)
    run_le_1h = _runs_within(3600.0)

    class Meta:
        ordering = ["minute", "queue"]
        constraints = [
            # The minute leads: the charts and pruning read ranges of minutes over every queue,
            # and the write checks whether a minute was sampled yet, all through this index.
            models.UniqueConstraint(fields=["minute", "queue"], name="leasejobs_one_sample"),
        ]

    def __str__(self) -> str:
        return f"{self.queue} at {self.minute:%Y-%m-%d %H:%M}"
