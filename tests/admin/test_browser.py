"""The admin in a real browser: Debian's Chromium driven by playwright, against live_server.

Run with ``pytest -m browser`` (``.ci/run`` does, once, on SQLite). Set
``LEASEJOBS_SCREENSHOTS=docs/images`` to refresh the screenshots the docs show.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from testapp import jobs

from django_leasejobs import dbtime, protocol
from django_leasejobs.models import DeadLetter, Job, Schedule, ScheduleSkip, Status
from django_leasejobs.protocol import Failure

from .conftest import occurrence_job

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("LEASEJOBS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = os.environ.get("LEASEJOBS_SCREENSHOTS", "")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Missing tools fail (never skip): a skipped browser suite must not pass CI.
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (never playwright install)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: pip install '.[browser]'")
    # Playwright's sync API keeps an event loop running in this thread; the ORM calls the test
    # makes between page actions are ordinary synchronous calls, so Django may allow them.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def page(browser, live_server) -> Iterator[Any]:
    User.objects.create_superuser("admin", password="admin-pw")
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
    page = context.new_page()
    page.goto("/admin/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "admin-pw")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    yield page
    context.close()


def expect(locator: Any) -> Any:
    """playwright's retrying assertions (imported late: playwright is an optional extra)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def screenshot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=True)


def test_replay_a_dead_letter_and_see_the_new_job_succeed(page, dead_letter, run_due) -> None:
    letter = dead_letter(2, 3, error="RuntimeError: upstream timed out", traceback="Traceback ...")
    page.goto("/admin/django_leasejobs/deadletter/")
    page.click(f"a[href$='/deadletter/{letter.pk}/change/']")
    expect(page.locator(".field-last_error_text")).to_contain_text("upstream timed out")
    screenshot(page, "admin-dead-letter.png")
    page.click("#leasejobs-replay-edited")
    page.wait_for_url("**/replay/")
    page.fill("#id_args", "[40, 2]")
    screenshot(page, "admin-replay.png")
    page.click("#leasejobs-replay-submit")
    message = page.locator("ul.messagelist li.success")
    assert "with edited arguments as job" in message.inner_text()
    letter.refresh_from_db()
    new = Job.objects.get(pk=letter.replayed_job_id)
    assert (new.status, new.args) == (Status.PENDING, [40, 2])

    assert [(j.pk, j.status) for j in run_due()] == [(new.pk, Status.SUCCEEDED)]
    page.goto(f"/admin/django_leasejobs/deadletter/{letter.pk}/change/")
    assert page.locator("#leasejobs-replay").count() == 0  # replayed: no second button
    screenshot(page, "admin-replayed.png")
    page.click(f"a[href$='/job/{new.pk}/change/']")
    page.wait_for_url(f"**/job/{new.pk}/change/")
    assert page.locator(".field-status .readonly").inner_text() == "Succeeded"
    assert "42" in page.locator(".field-result_json").inner_text()


def test_replay_button_as_is(page, dead_letter, run_due) -> None:
    letter = dead_letter(1, 1)
    page.goto(f"/admin/django_leasejobs/deadletter/{letter.pk}/change/")
    page.click("#leasejobs-replay")
    assert "as job #" in page.locator("ul.messagelist li.success").inner_text()
    assert [j.status for j in run_due()] == [Status.SUCCEEDED]
    assert DeadLetter.objects.get(pk=letter.pk).replayed_job is not None


def test_a_schedules_occurrence_view_shows_jobs_and_gaps(page, hourly) -> None:
    top = dbtime.db_now().replace(minute=0, second=0, microsecond=0)
    for hours_ago, status in ((6, Status.SUCCEEDED), (5, Status.SUCCEEDED), (3, Status.DEAD)):
        at = top - dt.timedelta(hours=hours_ago)
        occurrence_job(
            hourly,
            at,
            status,
            attempt=1,
            started_at=at + dt.timedelta(seconds=2),
            finished_at=at + dt.timedelta(seconds=3, milliseconds=250),
        )
    occurrence_job(hourly, top - dt.timedelta(hours=1), Status.RUNNING, attempt=1)
    Schedule.objects.filter(pk=hourly.pk).update(last_occurrence_at=top - dt.timedelta(hours=3))
    ScheduleSkip.objects.create(
        schedule=hourly,
        after=top - dt.timedelta(hours=5),
        through=top - dt.timedelta(hours=4),
        count=1,
        reason="misfire=latest: only the newest due occurrence runs",
    )
    page.goto(f"/admin/django_leasejobs/schedule/{hourly.pk}/change/")
    page.click("#leasejobs-occurrences")
    page.wait_for_url("**/occurrences/")
    page.fill("#id_start", (top - dt.timedelta(hours=6, minutes=30)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_end", (top + dt.timedelta(hours=2, minutes=30)).strftime("%Y-%m-%dT%H:%M"))
    page.click("#occurrence-range input[type=submit]")
    page.wait_for_url("**/occurrences/?start=*")
    expect(page.locator("#occurrence-summary")).to_contain_text(
        "9 occurrences in the range, 5 without a job"
    )
    gaps = page.locator("#occurrences tr.leasejobs-gap")
    assert gaps.count() == 5
    assert "skipped: misfire=latest" in gaps.nth(0).inner_text()  # 4 hours ago
    assert "missed" in gaps.nth(1).inner_text()  # 2 hours ago, after the cursor
    assert "upcoming" in gaps.nth(4).inner_text()
    screenshot(page, "admin-occurrences.png")


def test_the_dashboard_from_the_app_index(page, make_due) -> None:
    make_due(jobs.noop.enqueue(), seconds_ago=600)
    jobs.other_queue.enqueue(delay=60)
    page.goto("/admin/django_leasejobs/")
    page.click("#leasejobs-dashboard-link")
    page.wait_for_url("**/job/dashboard/")
    table = page.locator("#leasejobs-dashboard")
    assert "10 min" in table.locator("tbody tr").first.inner_text()
    screenshot(page, "admin-dashboard.png")


def test_dead_letters_grouped_by_error_and_a_group_replayed(page, make_due, run_due) -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/shop/payments.py", line {line}, in charge\n'
        "    raise {cls}(order)\n"
        "{cls}: {message}\n"
    )

    def bury(job_function, *args, cls: str, message: str, line: int) -> DeadLetter:
        job = job_function.enqueue(*args, max_attempts=1)
        make_due(job)
        (claimed,) = protocol.claim("browser-worker", batch=1)
        text = traceback.format(line=line, cls=cls, message=message)
        protocol.fail(claimed.pk, claimed.attempt, Failure(f"{cls}: {message}", text))
        return DeadLetter.objects.get(job_id=job.pk)

    declined = [
        bury(jobs.add, n, 1, cls="shop.payments.Declined", message=f"order {n}", line=40 + n)
        for n in range(3)
    ]
    bury(jobs.noop, cls="shop.payments.Declined", message="order 9", line=88)
    bury(jobs.add, 1, 1, cls="KeyError", message="'currency'", line=12)
    page.goto("/admin/django_leasejobs/deadletter/")
    page.click("#leasejobs-groups-link")
    page.wait_for_url("**/deadletter/groups/")
    expect(page.locator("#leasejobs-groups-summary")).to_contain_text("2 groups")
    row = page.locator(f"#leasejobs-groups tr[data-fingerprint='{declined[0].fingerprint}']")
    expect(row).to_contain_text("shop.payments.Declined in shop.payments.charge")
    expect(row).to_contain_text("testapp.jobs.add (3)")
    expect(row).to_contain_text("testapp.jobs.noop (1)")
    assert row.locator("td.leasejobs-count").inner_text() == "4"
    screenshot(page, "admin-dead-letter-groups.png")
    row.locator("a.leasejobs-replay-group").click()
    page.wait_for_url("**/replay/")
    expect(page.locator("#leasejobs-group-count")).to_contain_text(
        "4 dead letters will be replayed"
    )
    screenshot(page, "admin-replay-group.png")
    page.click("#leasejobs-group-submit")
    page.wait_for_url("**/deadletter/groups/")
    expect(page.locator("ul.messagelist li.success")).to_contain_text(
        f"Replayed 4 dead letters of group {declined[0].fingerprint}."
    )
    assert row.locator("td.leasejobs-not-replayed").inner_text() == "0"
    assert row.locator("a.leasejobs-replay-group").count() == 0  # nothing left to replay
    ran = run_due()
    assert sorted(j.status for j in ran) == [Status.SUCCEEDED] * 4
