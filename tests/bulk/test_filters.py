"""A bulk action's filter: each key read and checked once, for every face."""

from __future__ import annotations

import datetime as dt

import pytest
from testapp import jobs

from django_leasejobs import bulk
from django_leasejobs.models import Job, Status

from ..conftest import shifted

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        pytest.param([], None, "must be an object", id="not an object"),
        pytest.param("queue=a", None, "must be an object", id="a string"),
        pytest.param({}, None, "is empty", id="empty"),
        pytest.param({"queue": None}, None, "is empty", id="only nulls"),
        pytest.param({"colour": "red"}, "colour", "Unknown filter key 'colour'", id="unknown"),
        pytest.param({"queue": ""}, "queue", "non-empty string", id="empty queue"),
        pytest.param({"queue": 3}, "queue", "non-empty string", id="queue not text"),
        pytest.param({"name": "a\x00b"}, "name", "NUL", id="NUL"),
        pytest.param({"status": "done"}, "status", "must be one of", id="bad status"),
        pytest.param({"status": []}, "status", "non-empty list", id="no statuses"),
        pytest.param({"created_before": "yesterday"}, "created_before", "ISO 8601", id="bad date"),
        pytest.param({"finished_after": 5}, "finished_after", "ISO 8601", id="date not text"),
        pytest.param(
            {"created_after": "2025-01-31T12:00:00"}, "created_after", "UTC offset", id="naive"
        ),
        pytest.param(
            {"created_after": "0001-01-01T01:00:00+16:46"},
            "created_after",
            "out of the range",
            id="before year 1 in UTC",
        ),
    ],
)
def test_bad_filters_are_refused_naming_the_key(value, field, words) -> None:
    with pytest.raises(bulk.FilterError, match=words) as refused:
        bulk.parse(value)
    assert refused.value.field == field


def test_a_filter_is_read_into_its_values() -> None:
    parsed = bulk.parse(
        {
            "queue": "mail",
            "status": ["dead", "failed", "dead"],
            "created_after": "2025-01-31T12:00:00Z",
            "finished_before": dt.datetime(2025, 2, 1, tzinfo=UTC),
        }
    )
    assert parsed == {
        "queue": "mail",
        "status": ("dead", "failed"),
        "created_after": dt.datetime(2025, 1, 31, 12, tzinfo=UTC),
        "finished_before": dt.datetime(2025, 2, 1, tzinfo=UTC),
    }
    assert bulk.describe(parsed) == (
        '{"created_after": "2025-01-31T12:00:00+00:00", "finished_before": '
        '"2025-02-01T00:00:00+00:00", "queue": "mail", "status": ["dead", "failed"]}'
    )


@pytest.mark.django_db
def test_an_offset_the_database_would_refuse_is_read_in_utc() -> None:
    """Python takes UTC offsets up to 24 hours, PostgreSQL up to 16: the fuzzing's +16:46 was a
    database error (a 500 from the API). The time is the same instant, in UTC."""
    parsed = bulk.parse({"finished_after": "0141-12-10T22:24:38.16106+16:46"})
    assert parsed["finished_after"] == dt.datetime(141, 12, 10, 5, 38, 38, 161060, tzinfo=UTC)
    assert not bulk.jobs(parsed).exists()


@pytest.mark.django_db
def test_each_key_narrows_the_jobs() -> None:
    mail = jobs.noop.using(queue="mail", dedupe_key="k1").enqueue()
    other = jobs.add.using(queue="other").enqueue(1, 2)
    old = jobs.noop.using(queue="mail").enqueue()
    Job.objects.filter(pk=old.pk).update(
        created_at=shifted(-7200),
        status=Status.DEAD,
        finished_at=shifted(-3600),
        last_error="OSError: disk full",
    )
    hour_ago = dt.datetime.now(UTC) - dt.timedelta(minutes=30)

    def found(**given) -> set[int]:
        return set(bulk.jobs(bulk.parse(given)).values_list("pk", flat=True))

    assert found(queue="mail") == {mail.pk, old.pk}
    assert found(name="testapp.jobs.add") == {other.pk}
    assert found(status="dead") == {old.pk}
    assert found(status=["pending", "dead"]) == {mail.pk, other.pk, old.pk}
    assert found(created_before=hour_ago.isoformat()) == {old.pk}
    assert found(created_after=hour_ago.isoformat()) == {mail.pk, other.pk}
    assert found(finished_before=hour_ago.isoformat()) == {old.pk}
    assert found(finished_after=hour_ago.isoformat()) == set()
    assert found(dedupe_key="k1") == {mail.pk}
    assert found(error="disk full") == {old.pk}
    assert found(error="disk full", queue="other") == set()
