"""The schedule admin: edit with validation, enable/disable, next occurrences, occurrence view."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.http import HttpResponse
from django.test import Client

from django_leasejobs.admin import occurrences
from django_leasejobs.core import cron
from django_leasejobs.db import dbtime
from django_leasejobs.models import Schedule, ScheduleSkip, Status

from .conftest import SCRIPT, occurrence_job, url

if TYPE_CHECKING:
    from typing import Any

pytestmark = pytest.mark.django_db

FMT = "%Y-%m-%dT%H:%M"


class Steps:
    """Counts croniter's steps: the occurrences a request computed, forward or back."""

    def __init__(self) -> None:
        self.count = 0

    def pop(self) -> int:
        count, self.count = self.count, 0
        return count


def cron_steps(monkeypatch: pytest.MonkeyPatch) -> Steps:
    steps = Steps()
    for name in ("get_next", "get_prev"):
        original = getattr(cron.croniter, name)

        def counted(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            steps.count += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cron.croniter, name, counted)
    return steps


class TestOccurrenceView:
    def test_each_occurrence_beside_its_job_with_gaps(self, viewer, hourly) -> None:
        top = dbtime.db_now().replace(minute=0, second=0, microsecond=0)
        hours = {n: top - dt.timedelta(hours=n) for n in range(1, 7)}
        done = occurrence_job(
            hourly,
            hours[5],
            Status.SUCCEEDED,
            attempt=1,
            started_at=hours[5] + dt.timedelta(seconds=1),
            finished_at=hours[5] + dt.timedelta(seconds=3.5),
        )
        dead = occurrence_job(hourly, hours[4], Status.DEAD, attempt=5)
        retrying = occurrence_job(hourly, hours[2], Status.FAILED, attempt=2)
        Schedule.objects.filter(pk=hourly.pk).update(last_occurrence_at=hours[2])
        ScheduleSkip.objects.create(
            schedule=hourly, after=hours[4], through=hours[3], count=1, reason="misfire=latest"
        )
        start = (hours[6] - dt.timedelta(minutes=30)).strftime(FMT)
        end = (hours[1] + dt.timedelta(minutes=30)).strftime(FMT)

        response = viewer.get(url("schedule_occurrences", hourly.pk), {"start": start, "end": end})
        assert response.status_code == 200
        rows = response.context["rows"]
        assert [row.at for row in rows] == [hours[n] for n in (6, 5, 4, 3, 2, 1)]
        assert [row.job.pk if row.job else None for row in rows] == [
            None,
            done.pk,
            dead.pk,
            None,
            retrying.pk,
            None,
        ]
        assert [row.gap for row in rows] == [True, False, False, True, False, True]
        assert rows[0].note == "emitted; its job was deleted since (pruned)"  # cursor passed it
        assert rows[3].note == "skipped: misfire=latest"  # the scheduler's recorded reason
        assert rows[5].note.startswith("missed")  # due, after the cursor: not emitted
        assert rows[1].duration == "2.50 s"
        page = response.content.decode()
        assert "6 occurrences in the range, 3 without a job" in page
        assert page.count('class="leasejobs-gap"') == 3
        assert url("job_change", dead.pk) in page
        assert f"<td>{dead.attempts_charged}/{dead.max_attempts}</td>" in page

    def test_upcoming_and_pre_creation_gaps_and_unexpected_jobs(self, viewer, hourly) -> None:
        now = dbtime.db_now()
        top = now.replace(minute=0, second=0, microsecond=0)
        Schedule.objects.filter(pk=hourly.pk).update(created_at=top - dt.timedelta(minutes=90))
        odd = occurrence_job(hourly, top - dt.timedelta(minutes=15), Status.SUCCEEDED)
        response = viewer.get(
            url("schedule_occurrences", hourly.pk),
            {
                "start": (top - dt.timedelta(hours=2, minutes=30)).strftime(FMT),
                "end": (top + dt.timedelta(hours=1, minutes=30)).strftime(FMT),
            },
        )
        notes = [(row.at, row.note) for row in response.context["rows"]]
        assert notes[0] == (top - dt.timedelta(hours=2), "before the schedule existed")
        assert (odd.occurrence_at, "not an occurrence of the current cron") in notes
        assert notes[-1] == (top + dt.timedelta(hours=1), "upcoming")

    def test_default_range_is_the_last_24_hours(self, viewer, hourly) -> None:
        response = viewer.get(url("schedule_occurrences", hourly.pk))
        assert response.status_code == 200
        assert response.context["total"] == 24  # start < t <= end
        links = dict(response.context["quick"])
        assert set(links) == {"last hour", "last 24 hours", "last 7 days"}
        week = viewer.get(links["last 7 days"])
        assert week.status_code == 200
        assert week.context["total"] == 24 * 7

    def test_times_are_in_the_schedules_timezone(self, viewer) -> None:
        paris = Schedule.objects.create(
            name="paris", cron="0 3 * * *", timezone="Europe/Paris", job="testapp.jobs.noop"
        )
        response = viewer.get(
            url("schedule_occurrences", paris.pk),
            {"start": "2026-01-10T00:00", "end": "2026-01-12T00:00"},
        )
        rows = response.context["rows"]
        assert [row.at.isoformat() for row in rows] == [
            "2026-01-10T03:00:00+01:00",
            "2026-01-11T03:00:00+01:00",
        ]
        assert "2026-01-10 03:00 CET" in response.content.decode()

    @pytest.mark.parametrize(
        ("query", "error"),
        [
            ({"start": "yesterday"}, "start &#x27;yesterday&#x27; is not a date and time"),
            ({"start": "2026-01-02T00:00", "end": "2026-01-01T00:00"}, "must be after its start"),
            ({"start": "2026-01-01T00:00", "end": "2026-03-01T00:00"}, "limited to 31 days"),
            # Instants Python's calendar cannot carry into UTC (year 0, year 10000).
            (
                {"start": "0001-01-01T00:00:00+14:00", "end": "0001-01-02T00:00"},
                "start &#x27;0001-01-01T00:00:00+14:00&#x27; falls outside the years 1 to 9999",
            ),
            (
                {"start": "9999-12-31T00:00", "end": "9999-12-31T23:59:59-12:00"},
                "end &#x27;9999-12-31T23:59:59-12:00&#x27; falls outside the years 1 to 9999",
            ),
            ({"end": "0001-01-01T05:00"}, "must be after its start"),  # no day before it
        ],
    )
    def test_bad_ranges_are_refused_with_a_message(self, viewer, hourly, query, error) -> None:
        response = viewer.get(url("schedule_occurrences", hourly.pk), query)
        assert response.status_code == 400
        assert error in response.content.decode()

    def test_a_long_range_is_paged_the_latest_first(self, viewer) -> None:
        every_minute = Schedule.objects.create(
            name="minutely", cron="* * * * *", timezone="UTC", job="testapp.jobs.noop"
        )
        response = viewer.get(
            url("schedule_occurrences", every_minute.pk),
            {"start": "2026-01-01T00:00", "end": "2026-01-02T00:00"},
        )
        table = response.context["table"]
        assert table.shown == occurrences.PAGE_SIZE == 500
        assert table.gaps == 500
        rows = response.context["rows"]
        assert len(rows) == 500
        assert rows[0].label == "2026-01-01 15:41 UTC"  # 1440 minutes: the latest 500
        assert rows[-1].label == "2026-01-02 00:00 UTC"
        assert response.context["total"] is None  # not counted: the range has more pages
        assert set(response.context["links"]) == {"earlier"}
        assert (
            "500 occurrences on this page (2026-01-01 15:41 UTC to 2026-01-02 00:00 UTC), "
            "500 without a job; the range has more, 500 a page."
        ) in response.content.decode()

    def test_pages_walk_a_31_day_per_minute_range_without_gap_or_duplicate(
        self, viewer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        every_minute = Schedule.objects.create(
            name="minutely", cron="* * * * *", timezone="UTC", job="testapp.jobs.noop"
        )
        start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        expected = [start + dt.timedelta(minutes=n) for n in range(1, 31 * 24 * 60 + 1)]
        done = occurrence_job(every_minute, expected[20_000], Status.SUCCEEDED)
        odd = occurrence_job(every_minute, expected[30_000] + dt.timedelta(seconds=30), "pending")
        steps = cron_steps(monkeypatch)
        query = {"start": "2026-01-01T00:00", "end": "2026-02-01T00:00"}
        first = viewer.get(url("schedule_occurrences", every_minute.pk), query)

        def walk(response: Any, direction: str) -> tuple[list[list[Any]], Any]:
            pages = []
            while True:
                assert response.status_code == 200
                rows = response.context["rows"]
                pages.append(rows)
                assert response.context["table"].shown <= occurrences.PAGE_SIZE
                # The bound: what a request computes and renders, whatever the range's length.
                assert steps.pop() <= 3 * occurrences.PAGE_SIZE
                body = response.content.decode().split("<tbody>")[1].split("</tbody>")[0]
                assert body.count("<tr") == len(rows) <= occurrences.PAGE_SIZE + 1
                link = response.context["links"].get(direction)
                if link is None:
                    return pages, response
                response = viewer.get(link)

        backward, earliest = walk(first, "earlier")
        assert len(backward) == 90  # 44,640 occurrences, 500 a page
        assert [
            sum(row.job is None or row.job.pk != odd.pk for row in page) for page in backward
        ] == [500] * 89 + [140]
        forward, _ = walk(earliest, "later")
        steps.pop()
        for pages in (backward[::-1], forward):
            rows = [row for page in pages for row in page]
            assert [row.at for row in rows if row.job is None or row.job.pk != odd.pk] == expected
            assert [row.job.pk for row in rows if row.job] == [done.pk, odd.pk]
            assert [row.note for row in rows if row.job and row.job.pk == odd.pk] == [
                "not an occurrence of the current cron"
            ]

    def test_the_ends_of_the_calendar(self, viewer, hourly) -> None:
        # The occurrence after the end (year 10000) overflowed in croniter.
        last_days = {"start": "9999-12-30T00:00", "end": "9999-12-31T23:59"}
        response = viewer.get(url("schedule_occurrences", hourly.pk), last_days)
        assert response.status_code == 200
        assert response.context["total"] == 47
        assert response.context["rows"][-1].label == "9999-12-31 23:00 UTC"
        # A page link edited past the end: the page is the range's own end, empty.
        edited = {**last_days, "after": "9999-12-31T23:59:59-12:00"}
        response = viewer.get(url("schedule_occurrences", hourly.pk), edited)
        assert response.status_code == 200
        assert response.context["rows"] == []
        # Midnight of year 1 in Tokyo is in year 0 in UTC: stepping back to it never ended.
        tokyo = Schedule.objects.create(
            name="tokyo", cron="0 * * * *", timezone="Asia/Tokyo", job="testapp.jobs.noop"
        )
        first_day = {"start": "0001-01-01T00:00", "end": "0001-01-02T00:00"}
        response = viewer.get(url("schedule_occurrences", tokyo.pk), first_day)
        assert response.status_code == 400
        assert "falls outside the years 1 to 9999 in UTC or in Asia/Tokyo" in (
            response.content.decode()
        )

    def test_a_page_link_that_was_tampered_with_is_refused(self, viewer, hourly) -> None:
        for cursor in ({"after": "soon"}, {"until": "2026-01-01T00:00"}):
            response = viewer.get(url("schedule_occurrences", hourly.pk), cursor)
            assert response.status_code == 400
            assert "is not a page of this view" in response.content.decode()

    def test_needs_the_view_permission(self, hourly) -> None:
        from .conftest import staff_client

        nobody = staff_client("nobody", ["view_job"])
        assert nobody.get(url("schedule_occurrences", hourly.pk)).status_code == 403
        assert nobody.get(url("schedule_occurrences", 99999)).status_code == 403

    def test_unknown_schedule(self, viewer) -> None:
        assert viewer.get(url("schedule_occurrences", 99999)).status_code == 404
        # Past the largest key, more digits than int() reads, a digit int() refuses.
        for schedule_id in (str(2**63), "9" * 4301, "\u00b2"):
            path = f"{url('schedule_changelist')}{schedule_id}/occurrences/"
            assert viewer.get(path).status_code == 404

    def test_a_nul_in_a_filter_is_an_invalid_lookup(self, viewer, hourly) -> None:
        # PostgreSQL's driver cannot send a NUL (a 500 there); Django's answer: ?e=1.
        response = viewer.get(f"{url('schedule_changelist')}?name=%00")
        assert response.status_code == 302
        assert response["Location"] == f"{url('schedule_changelist')}?e=1"

    def test_names_are_escaped(self, viewer) -> None:
        odd = Schedule.objects.create(
            name=SCRIPT, cron="0 * * * *", timezone="UTC", job="testapp.jobs.noop"
        )
        for page_url in (url("schedule_occurrences", odd.pk), url("schedule_change", odd.pk)):
            page = viewer.get(page_url).content.decode()
            assert "<script>alert" not in page


class TestScheduleAdmin:
    def test_detail_lists_the_next_10_occurrences(self, viewer, hourly) -> None:
        page = viewer.get(url("schedule_change", hourly.pk)).content.decode()
        assert page.count("<li>20") == 10
        assert url("schedule_occurrences", hourly.pk) in page

    def test_enable_and_disable_actions_are_logged(self, operator, hourly) -> None:
        data = {"action": "disable_schedules", "_selected_action": [hourly.pk]}
        operator.post(url("schedule_changelist"), data)
        assert not Schedule.objects.get(pk=hourly.pk).enabled
        data["action"] = "enable_schedules"
        operator.post(url("schedule_changelist"), data)
        assert Schedule.objects.get(pk=hourly.pk).enabled
        messages = list(
            LogEntry.objects.filter(object_id=str(hourly.pk)).values_list(
                "change_message", flat=True
            )
        )
        assert sorted(messages) == ["Disabled schedule hourly.", "Enabled schedule hourly."]

    def test_view_only_staff_cannot_disable(self, viewer, hourly) -> None:
        response = viewer.get(url("schedule_changelist"))
        assert response.context["action_form"] is None
        viewer.post(
            url("schedule_changelist"),
            {"action": "disable_schedules", "_selected_action": [hourly.pk]},
        )
        assert Schedule.objects.get(pk=hourly.pk).enabled
        assert not LogEntry.objects.exists()

    def form(self, **changes) -> dict:
        data = {
            "name": "nightly",
            "cron": "0 3 * * *",
            "timezone": "Europe/Paris",
            "job": "testapp.jobs.add",
            "args": "[1, 2]",
            "kwargs": "{}",
            "queue": "",
            "priority": "",
            "max_attempts": "",
            "enabled": "on",
            "jitter": "0",
            "misfire": "latest",
            "catchup_window": "3600",
        }
        data.update(changes)
        return data

    def test_a_valid_schedule_is_saved(self, admin_client) -> None:
        response = admin_client.post(url("schedule_add"), self.form())
        assert response.status_code == 302
        assert Schedule.objects.get(name="nightly").args == [1, 2]

    @pytest.mark.parametrize(
        ("changes", "error"),
        [
            ({"cron": "61 * * * *"}, "invalid cron expression &#x27;61 * * * *&#x27;"),
            ({"timezone": "Mars/Olympus"}, "Mars/Olympus"),
            ({"job": "nowhere.job"}, "no job is registered as &#x27;nowhere.job&#x27;"),
            ({"args": "[NaN]"}, "NaN"),
            ({"args": "{}"}, "args must be a list"),
            ({"queue": "no spaces"}, "is not a valid queue name"),
            ({"priority": "500"}, "out of range"),
        ],
    )
    def test_invalid_schedules_are_refused(self, admin_client, changes, error) -> None:
        response = admin_client.post(url("schedule_add"), self.form(**changes))
        assert response.status_code == 200
        assert error in response.content.decode()
        assert not Schedule.objects.exists()

    def test_the_cursor_is_not_editable(self, admin_client, hourly) -> None:
        form = admin_client.get(url("schedule_change", hourly.pk)).context["adminform"].form
        assert "cron" in form.fields
        assert "last_occurrence_at" not in form.fields


DEEP = "[" * 100_000 + "]" * 100_000
LONG_INT = "1" * 5000


class TestBadInputInTheForm:
    """What the settings sync refuses, the add form refuses too: a form error, never a 500."""

    @pytest.fixture
    def scheduler(self, db) -> Client:
        """Staff with the add permission, through a client that enforces CSRF."""
        user = User.objects.create_user("scheduler", is_staff=True)
        user.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="django_leasejobs",
                codename__in=["view_schedule", "add_schedule", "change_schedule"],
            )
        )
        client = Client(enforce_csrf_checks=True)
        client.force_login(user)
        return client

    def post(self, client: Client, **changes: str) -> HttpResponse:
        client.get(url("schedule_add"))  # sets the CSRF cookie
        token = client.cookies["csrftoken"].value
        data = {**TestScheduleAdmin.form(self, **changes), "csrfmiddlewaretoken": token}
        return client.post(url("schedule_add"), data)

    def test_a_valid_schedule_is_saved_by_staff_with_the_permission(self, scheduler) -> None:
        assert self.post(scheduler).status_code == 302
        assert Schedule.objects.get().cron == "0 3 * * *"

    @pytest.mark.parametrize(
        ("changes", "error"),
        [
            ({"cron": "R * * * *"}, "the minute field &#x27;R&#x27; is a random value (R)"),
            ({"cron": "0 H * * *"}, "the hour field &#x27;H&#x27; is a hashed value (H)"),
            ({"args": f"[{LONG_INT}]"}, "an integer too long to read"),
            ({"kwargs": f'{{"n": -{LONG_INT}}}'}, "an integer too long to read"),
            ({"args": DEEP}, "nests deeper than 31 levels"),
            ({"kwargs": '{"a": ' + DEEP + "}"}, "nests deeper than 31 levels"),
            ({"args": "[1e16]"}, "args[0] contains 1e+16: a float of 1e16 or more"),
            ({"kwargs": '{"x": -0.0}'}, "kwargs[&#x27;x&#x27;] contains -0.0: PostgreSQL"),
            ({"args": '["a\\ud800"]'}, "args[0] contains a lone surrogate"),
            ({"kwargs": '{"x": "\\udfff"}'}, "kwargs[&#x27;x&#x27;] contains a lone surrogate"),
            ({"kwargs": '{"\\ud800": 1}'}, "kwargs has a key with a lone surrogate"),
        ],
    )
    def test_bad_input_is_a_form_error_and_nothing_is_written(
        self, scheduler, changes, error
    ) -> None:
        response = self.post(scheduler, **changes)
        assert response.status_code == 200
        assert error in response.content.decode()
        assert not Schedule.objects.exists()
        assert not LogEntry.objects.exists()
