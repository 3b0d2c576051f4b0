"""The time of a kept record as a job's logs write it: ``datetime``'s own text, made faster."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_leasejobs.runtime.job_logs import iso_at


def written_by_datetime(created: float) -> str:
    return dt.datetime.fromtimestamp(created, tz=dt.timezone.utc).isoformat().replace("+00:00", "Z")


@pytest.mark.fuzz
@given(st.floats(min_value=-(2**33), max_value=2**33, allow_nan=False), st.floats(0, 0.999_999_9))
def test_a_record_s_time_is_written_as_datetime_writes_it(created: float, later: float) -> None:
    """Two records of one second: the second's date and time are made once, then reused."""
    assert iso_at(created) == written_by_datetime(created)
    assert iso_at(created + later) == written_by_datetime(created + later)


def test_a_whole_second_and_one_rounded_up_to_the_next() -> None:
    assert iso_at(1_700_000_000.0) == "2023-11-14T22:13:20Z"
    assert iso_at(1_700_000_000.9999997) == "2023-11-14T22:13:21Z"
    assert iso_at(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"
    assert iso_at(-0.3) == "1969-12-31T23:59:59.700000Z"
