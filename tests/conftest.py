"""Shared fixtures. Time is controlled by moving timestamps in the database, never by sleeping."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.models import ExpressionWrapper, F, Value
from django.db.models.fields import DateTimeField
from django.db.models.functions import Now

from django_leasejobs.models import Job


def shifted(seconds: float) -> ExpressionWrapper:
    """The database's now plus ``seconds`` (negative for the past)."""
    return ExpressionWrapper(
        Now() + Value(dt.timedelta(seconds=seconds)), output_field=DateTimeField()
    )


@pytest.fixture
def make_due() -> Callable[..., None]:
    """Move jobs' run_at into the past, as if their time had come."""

    def move(*jobs: Job | int, seconds_ago: float = 1) -> None:
        ids = [j if isinstance(j, int) else j.pk for j in jobs]
        Job.objects.filter(pk__in=ids).update(run_at=shifted(-seconds_ago))

    return move


@pytest.fixture
def expire_lease() -> Callable[..., None]:
    """Move running jobs' lease expiry into the past, as if their worker had stopped."""

    def move(*jobs: Job | int, seconds_ago: float = 1) -> None:
        ids = [j if isinstance(j, int) else j.pk for j in jobs]
        Job.objects.filter(pk__in=ids).update(lease_expires_at=shifted(-seconds_ago))

    return move


@pytest.fixture
def vendor() -> str:
    return connection.vendor


def fields(job_id: int, *names: str) -> dict[str, Any]:
    return Job.objects.filter(pk=job_id).values(*names).get()


@pytest.fixture
def all_due() -> Iterator[Callable[[], None]]:
    """Make every pending/failed job due now."""

    def move() -> None:
        Job.objects.filter(status__in=["pending", "failed"]).update(
            run_at=ExpressionWrapper(
                F("created_at") - Value(dt.timedelta(days=1)), output_field=DateTimeField()
            )
        )

    return move
