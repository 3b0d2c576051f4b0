"""The dashboard's samples are pruned with the jobs: ``prunejobs`` deletes those older than
``--samples-older-than`` (7 days by default) on every run, and a dry run only counts them."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_leasejobs import upkeep
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import QueueSample

pytestmark = pytest.mark.django_db

MINUTE = dt.timedelta(minutes=1)


def run(*args: Any, **options: Any) -> str:
    out = io.StringIO()
    call_command("prunejobs", *args, stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue()


def samples_aged(*ages: dt.timedelta, queues: tuple[str, ...] = ("default",)) -> dt.datetime:
    """One sample per queue for the minute ``age`` before the database's current minute, which
    is returned: the ages left are read against it, not against a later minute."""
    now = db_now().replace(second=0, microsecond=0)
    QueueSample.objects.bulk_create(
        QueueSample(minute=now - age, queue=queue) for age in ages for queue in queues
    )
    return now


def ages_left(now: dt.datetime) -> list[dt.timedelta]:
    return sorted({now - m for m in QueueSample.objects.values_list("minute", flat=True)})


def test_prune_samples_deletes_only_the_old_ones_in_batches() -> None:
    old = [dt.timedelta(days=8) + MINUTE * i for i in range(5)]
    kept = [dt.timedelta(days=6), MINUTE]
    now = samples_aged(*old, *kept, queues=("a", "b"))
    week = dt.timedelta(days=7)
    assert upkeep.count_prunable_samples(week) == 10
    assert upkeep.prune_samples(week, batch=4) == 4
    assert upkeep.prune_samples(week, batch=4) == 4
    assert upkeep.prune_samples(week, batch=4) == 2
    assert upkeep.prune_samples(week, batch=4) == 0
    assert ages_left(now) == sorted(kept)


def test_a_batch_must_be_a_positive_whole_number() -> None:
    for batch in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="batch must be a positive integer"):
            upkeep.prune_samples(dt.timedelta(days=7), batch=batch)  # type: ignore[arg-type]


def test_prunejobs_prunes_samples_older_than_a_week_by_default() -> None:
    now = samples_aged(dt.timedelta(days=7, minutes=1), dt.timedelta(days=6, hours=23))
    output = run("--succeeded-older-than", "30d")
    assert "samples: deleted 1 older than 7d00h" in output
    assert ages_left(now) == [dt.timedelta(days=6, hours=23)]


def test_prunejobs_takes_the_samples_age_and_a_dry_run_deletes_nothing() -> None:
    now = samples_aged(dt.timedelta(hours=3), dt.timedelta(hours=1))
    assert "samples: would delete 1 older than 2h00m" in run(
        "--dead-older-than", "30d", "--samples-older-than", "2h", "--dry-run"
    )
    assert len(ages_left(now)) == 2
    assert "samples: deleted 1 older than 2h00m" in run(
        "--dead-older-than", "30d", "--samples-older-than", "2h"
    )
    assert ages_left(now) == [dt.timedelta(hours=1)]


def test_a_bad_samples_age_is_refused_and_nothing_is_deleted() -> None:
    samples_aged(dt.timedelta(days=30))
    with pytest.raises(CommandError, match="'a week' is not a duration"):
        run("--succeeded-older-than", "7d", "--samples-older-than", "a week")
    with pytest.raises(CommandError, match="--samples-older-than: 'soon' is not"):
        run(succeeded_older_than="7d", samples_older_than="soon")
    assert QueueSample.objects.count() == 1
