"""The admin in a real browser: Debian's Chromium driven by playwright, against live_server.

Run with ``pytest -m browser`` (``.ci/run`` does, once, on SQLite). Set
``LEASEJOBS_SCREENSHOTS=docs/images`` to refresh the screenshots the docs show.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db import dbtime
from django_leasejobs.models import (
    RUN_TIME_EDGES,
    DeadLetter,
    Job,
    QueueSample,
    Schedule,
    ScheduleSkip,
    Status,
)
from django_leasejobs.protocol import Failure

from .. import workflow_rows
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


def log_in(browser: Any, live_server: Any, **options: Any) -> Any:
    """A new browser context (``options``: playwright's, e.g. ``color_scheme``), logged in."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, base_url=live_server.url, **options
    )
    page = context.new_page()
    page.goto("/admin/login/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "admin-pw")
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    return page


@pytest.fixture
def page(browser, live_server) -> Iterator[Any]:
    User.objects.create_superuser("admin", password="admin-pw")
    page = log_in(browser, live_server)
    yield page
    page.context.close()


def expect(locator: Any) -> Any:
    """playwright's retrying assertions (imported late: playwright is an optional extra)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def screenshot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=True)


def screenshot_of(locator: Any, name: str) -> None:
    """One part of a page (a queue's charts), for the docs."""
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        locator.screenshot(path=str(Path(SCREENSHOTS) / name))


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


def an_hour_of_samples() -> None:
    """A busy hour of two queues: a stall 20 to 30 minutes ago, then a burst of retries and
    two dead jobs, and four minutes (a restart of every worker) nobody sampled."""
    now = dbtime.db_now().replace(second=0, microsecond=0)
    rows = []
    for ago in range(1, 61):
        if 35 <= ago <= 38:
            continue
        stalled = 20 <= ago <= 30
        wave = math.sin(ago / 6)
        fast, slow = (0, 0) if stalled else (int(30 + 10 * wave), 3 + ago % 3)
        for queue, scale in (("default", 1), ("mail", 3)):
            runs = fast * scale + slow
            rows.append(
                QueueSample(
                    minute=now - dt.timedelta(minutes=ago),
                    queue=queue,
                    succeeded=runs - (ago in (14, 15)),
                    retried=(6 if ago in (14, 15, 16) else ago % 9 == 0) * scale,
                    dead=int(ago in (14, 15)),
                    due=(31 - ago) * 12 if stalled else 3 + ago % 5,
                    running=0 if stalled else 4,
                    oldest_due_age=(31 - ago) * 60.0 if stalled else 0.4 + ago % 3,
                    runs=runs,
                    **run_time_counts(fast * scale, slow),
                )
            )
    QueueSample.objects.bulk_create(rows)


def run_time_counts(fast: int, slow: int) -> dict[str, int]:
    """``fast`` runs of 80 ms and ``slow`` runs of 3 s, as the histogram's cumulative columns."""
    return {
        name: (fast if edge >= 0.08 else 0) + (slow if edge >= 3 else 0)
        for name, edge in RUN_TIME_EDGES
    }


def chart_colours(page: Any) -> dict[str, str]:
    """The computed colours a chart is drawn in: lines, dead line, labels."""
    return page.evaluate(
        """() => {
            const chart = document.querySelector("svg.leasejobs-chart");
            const style = (selector) => getComputedStyle(chart.querySelector(selector));
            return {
                succeeded: style("polyline.leasejobs-line-succeeded").stroke,
                dead: style("polyline.leasejobs-line-dead").stroke,
                label: style("text").fill,
                background: getComputedStyle(document.body).backgroundColor,
            };
        }"""
    )


@pytest.mark.parametrize(
    ("scheme", "colours", "name"),
    [
        (
            "light",
            {
                "succeeded": "rgb(65, 120, 147)",
                "dead": "rgb(186, 33, 33)",
                "label": "rgb(102, 102, 102)",
                "background": "rgb(255, 255, 255)",
            },
            "admin-dashboard-charts.png",
        ),
        (
            "dark",
            {
                "succeeded": "rgb(129, 212, 250)",
                "dead": "rgb(227, 95, 95)",
                "label": "rgb(208, 208, 208)",
                "background": "rgb(18, 18, 18)",
            },
            "admin-dashboard-charts-dark.png",
        ),
    ],
)
def test_the_dashboard_charts_in_the_light_and_dark_themes(
    browser, live_server, scheme: str, colours: dict[str, str], name: str
) -> None:
    User.objects.create_superuser("admin", password="admin-pw")
    an_hour_of_samples()
    page = log_in(browser, live_server, color_scheme=scheme)
    try:
        page.goto("/admin/django_leasejobs/job/dashboard/")
        expect(page.locator("#leasejobs-history")).to_have_text("History, last hour")
        section = page.locator("#leasejobs-history-0")
        expect(section.locator("h3")).to_have_text("Queue default")
        assert page.locator("svg.leasejobs-chart").count() == 8
        assert chart_colours(page) == colours  # the admin theme's, in each scheme
        box = section.locator("svg.leasejobs-chart").first.bounding_box()
        assert box is not None
        assert box["width"] > 400  # two charts side by side at most, readable
        assert section.get_by_role("img", name="default: p95 run time, last hour").is_visible()
        screenshot_of(section, name)
        table = section.locator("table.leasejobs-history-table")
        assert not table.is_visible()  # folded until asked for
        section.locator("summary").click()
        expect(table).to_be_visible()
        assert table.locator("tbody tr").count() == 60
        first = table.locator("tbody tr").last.inner_text()
        assert "no sample" not in first
        assert table.locator("td", has_text="no sample").count() == 4
        page.click("text=last 24 hours")
        page.wait_for_url("**/dashboard/?range=24h*")
        expect(page.locator("#leasejobs-history")).to_have_text("History, last 24 hours")
        assert page.locator("strong[aria-current=page]").inner_text() == "last 24 hours"
    finally:
        page.context.close()


def test_a_workflow_runs_graph_links_to_its_jobs_and_the_run_is_cancelled(page) -> None:
    run = workflow_rows.diamond()
    page.goto("/admin/django_leasejobs/workflowrun/")
    page.click(f"a[href$='/workflowrun/{run.pk}/change/']")
    graph = page.locator("svg#leasejobs-workflow-graph")
    expect(graph).to_be_visible()
    box = graph.locator("g.leasejobs-step-dead rect")
    expect(box).to_be_visible()
    assert box.bounding_box()["width"] > 0
    screenshot(page, "admin-workflow-run.png")
    page.click("#leasejobs-cancel-run")
    expect(page.locator(".messagelist")).to_contain_text(f"Cancelled workflow run #{run.pk}")
    expect(graph.locator("g.leasejobs-step-cancelled")).to_contain_text("publish")
    graph.locator("g.leasejobs-step-dead").click()
    page.wait_for_url("**/job/*/change/")
    expect(page.locator(".field-status")).to_contain_text("Dead")


@pytest.fixture
def imports_at_info() -> Iterator[None]:
    """The project's LOGGING giving testapp.imports INFO, as docs/observability.md says."""
    import logging

    logger = logging.getLogger("testapp.imports")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield
    logger.setLevel(level)


def test_a_job_page_shows_each_attempts_logs_and_the_progress(page, imports_at_info) -> None:
    from django_leasejobs.testing import drain

    row = jobs.import_customers.enqueue(1200)
    drain(with_scheduled=True)
    row.refresh_from_db()
    assert (row.status, row.attempt) == (Status.SUCCEEDED, 2)
    page.goto(f"/admin/django_leasejobs/job/{row.pk}/change/")
    expect(page.locator("progress.leasejobs-progress")).to_have_attribute("value", "1200")
    progress = page.locator(".form-row", has_text="Progress:")
    expect(progress).to_contain_text("1200 / 1200 (100%) — row 1200")
    first = page.locator("h3", has_text="Attempt 1")
    expect(first).to_be_visible()
    expect(page.get_by_text("CRM unavailable (503)").first).to_be_visible()
    expect(page.get_by_text("the CRM answered 503, giving up on this attempt")).to_be_visible()
    expect(page.get_by_text("imported 1200 customers")).to_be_visible()
    screenshot_of(progress, "admin-job-progress.png")
    screenshot_of(page.locator("fieldset", has_text="Logs:"), "admin-job-logs.png")
