"""Finished workflow runs pruned with their jobs: the run, its steps and its edges go once its
jobs are gone and it finished longer ago than its state's age; a live run's rows never go."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import pytest
from django.core.management import call_command
from testapp import workflow_jobs as w

from django_leasejobs import Workflow, chain, group, upkeep
from django_leasejobs.models import Job, WorkflowEdge, WorkflowRun, WorkflowStep
from django_leasejobs.testing.running import drain
from django_leasejobs.upkeep.retention import Retention

from ..conftest import shifted
from .helpers import counters

pytestmark = pytest.mark.django_db(transaction=True)

DAY = 86400.0
WEEK = dt.timedelta(days=7)
CARD = "4111 1111 1111 1111"


def finished_days_ago(days: float, *runs: WorkflowRun) -> None:
    """Move the runs' finish, and their jobs', ``days`` into the past (database time)."""
    ids = [run.pk for run in runs]
    WorkflowRun.objects.filter(pk__in=ids).update(finished_at=shifted(-days * DAY))
    Job.objects.filter(workflow_step__run__in=ids).update(finished_at=shifted(-days * DAY))


def paid(label: str = "paid") -> WorkflowRun:
    """A succeeded run whose step arguments hold a card number."""
    run = chain(w.fetch.s(CARD), w.parse.s(), w.tick.si(label)).enqueue()
    drain()
    assert counters(run)[0] == "succeeded"
    return run


def failed() -> WorkflowRun:
    run = group(w.square.s(2), w.boom.s()).then(w.total.s()).enqueue()
    drain()
    assert counters(run)[0] == "failed"
    return run


def rows_of(run: WorkflowRun) -> tuple[int, int, int]:
    """(run rows, step rows, edge rows) left of ``run``."""
    return (
        WorkflowRun.objects.filter(pk=run.pk).count(),
        WorkflowStep.objects.filter(run_id=run.pk).count(),
        WorkflowEdge.objects.filter(child__run_id=run.pk).count(),
    )


def prune_all(status: str, age: dt.timedelta) -> tuple[int, int]:
    """Prune the jobs of ``status`` past ``age``, then the runs; (jobs, runs) deleted."""
    jobs = upkeep.prune_finished(status, age)[0]
    return jobs, upkeep.prune_runs(status, age)[0]


def test_a_finished_runs_steps_and_edges_go_with_its_jobs() -> None:
    old, recent = paid("old"), paid("recent")
    finished_days_ago(8, old)
    finished_days_ago(6, recent)
    assert rows_of(old) == (1, 3, 2)
    assert upkeep.count_prunable_runs("succeeded", WEEK) == 0  # its jobs are still there
    assert upkeep.prune_runs("succeeded", WEEK) == (0, 0)
    assert prune_all("succeeded", WEEK) == (3, 1)
    assert rows_of(old) == (0, 0, 0)
    assert rows_of(recent) == (1, 3, 2)  # not old enough: kept, with its jobs
    assert Job.objects.filter(workflow_step__run=recent).count() == 3


def test_a_running_run_is_never_pruned_however_old() -> None:
    wf = Workflow()
    first = wf.add(w.fetch.s(CARD))
    wf.add(w.parse.s(), after=[first])
    run = wf.enqueue()
    WorkflowRun.objects.filter(pk=run.pk).update(
        created_at=shifted(-400 * DAY), finished_at=shifted(-400 * DAY)
    )
    Job.objects.update(finished_at=shifted(-400 * DAY))
    for status in upkeep.RUN_STATES:
        assert prune_all(status, dt.timedelta(seconds=1))[1] == 0
    assert rows_of(run) == (1, 2, 1)


def test_each_state_of_run_goes_by_its_own_age() -> None:
    """A succeeded run by the succeeded jobs' age, a failed one by the dead jobs' (its dead
    job kept it until then: a replay of its dead letter would re-arm it)."""
    ok, bad = paid(), failed()
    finished_days_ago(8, ok, bad)
    assert prune_all("succeeded", WEEK)[1] == 1
    assert rows_of(ok) == (0, 0, 0)
    assert rows_of(bad)[0] == 1  # its square job went, its dead boom job is kept
    assert upkeep.prune_runs("dead", WEEK) == (0, 0)
    assert prune_all("dead", dt.timedelta(days=30)) == (0, 0)  # not 30 days old
    assert prune_all("dead", WEEK)[1] == 1
    assert rows_of(bad) == (0, 0, 0)
    assert not Job.objects.exists()


def test_batches_walk_the_runs_in_key_order() -> None:
    runs = [paid(f"r{i}") for i in range(3)]
    finished_days_ago(8, *runs)
    upkeep.prune_finished("succeeded", WEEK)
    # Three steps a run: a batch of 4 steps takes one run, then the runs of each batch go.
    assert upkeep.prune_runs("succeeded", WEEK, batch=4) == (1, runs[0].pk)
    assert upkeep.prune_runs("succeeded", WEEK, batch=6, after_id=runs[0].pk) == (2, runs[2].pk)
    assert upkeep.prune_runs("succeeded", WEEK, after_id=runs[2].pk) == (0, runs[2].pk)
    assert not WorkflowRun.objects.exists()


@pytest.mark.parametrize(
    ("status", "batch", "message"),
    [("failed", 10, "not 'failed'"), ("running", 10, "not 'running'"), ("dead", 0, "batch")],
)
def test_bad_arguments_are_refused(status: str, batch: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        upkeep.prune_runs(status, WEEK, batch=batch)


def test_retention_prunes_the_runs_after_their_jobs_in_one_round(settings: Any) -> None:
    settings.LEASEJOBS_RETENTION = {"succeeded": "7d", "dead": "30d"}
    old, recent = paid("old"), paid("recent")
    finished_days_ago(8, old)
    assert Retention("a").tick() == 3 + 1  # the run's three jobs, then the run
    assert rows_of(old) == (0, 0, 0)
    assert rows_of(recent) == (1, 3, 2)


def test_prunejobs_prunes_the_runs_and_counts_them_in_a_dry_run() -> None:
    old = paid()
    finished_days_ago(8, old)

    def run(*args: str) -> str:
        out = io.StringIO()
        call_command("prunejobs", *args, stdout=out)
        return out.getvalue()

    dry = run("--succeeded-older-than", "7d", "--dry-run")
    assert "succeeded workflow runs: would delete 0 finished over 7d00h ago" in dry
    assert rows_of(old) == (1, 3, 2)
    out = run("--succeeded-older-than", "7d", "--dead-older-than", "30d")
    assert "succeeded: deleted 3 jobs" in out
    assert "succeeded workflow runs: deleted 1 finished over 7d00h ago in 1 batch(es)" in out
    assert "failed workflow runs: deleted 0" in out
    assert rows_of(old) == (0, 0, 0)
