"""``replica_lag``: the sentence the admin shows above what it read from a replica."""

from __future__ import annotations

import pytest
from django.test import override_settings

from django_leasejobs.reports import replica_lag
from django_leasejobs.reports.replica_lag import ReplicaLag

pytestmark = pytest.mark.django_db


def test_nothing_without_a_replica() -> None:
    assert replica_lag.read() is None


@override_settings(LEASEJOBS_READ_DATABASES={"default": "default"}, LEASEJOBS_READ_MAX_LAG=5)
def test_a_replica_that_is_no_standby_is_current() -> None:
    lag = replica_lag.read()
    assert lag == ReplicaLag("default", standby=False, seconds=0.0, limit=5.0)
    assert not lag.stale
    assert lag.text() == "Read from the replica default (not a standby: its rows are current)."
    assert lag.as_dict() == {
        "database": "default",
        "standby": False,
        "lag_seconds": 0.0,
        "stale": False,
    }


def test_a_standby_s_lag_and_when_it_is_too_stale() -> None:
    # The words for a figure a standby reported (a real one: tests/acceptance).
    behind = ReplicaLag("jobs_replica", standby=True, seconds=2.34, limit=30.0)
    assert behind.text() == "Read from the replica jobs_replica, 2.3 s behind."
    assert not behind.stale
    stale = ReplicaLag("jobs_replica", standby=True, seconds=125.0, limit=30.0)
    assert stale.stale
    assert stale.text() == (
        "Read from the replica jobs_replica, 2m05s behind: too stale to trust (over "
        "LEASEJOBS_READ_MAX_LAG, 30.0 s). A job's own page reads the primary."
    )
    at_limit = ReplicaLag("jobs_replica", standby=True, seconds=30.0, limit=30.0)
    assert not at_limit.stale


def test_an_unknown_lag_says_so_and_is_not_called_stale() -> None:
    lag = ReplicaLag("r", standby=True, seconds=None, limit=30.0, why="nothing replayed yet")
    assert not lag.stale
    assert lag.text() == (
        "Read from the replica r; its lag is unknown (nothing replayed yet): figures may be behind."
    )
