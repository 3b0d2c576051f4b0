"""The admin in a real browser: Debian's Chromium driven by playwright, against live_server.

Run with ``pytest -m browser`` (``.ci/run`` does, once, on SQLite). Set
``LEASEJOBS_SCREENSHOTS=docs/images`` to refresh the screenshots the docs show.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from django_leasejobs.models import DeadLetter, Job, Status

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


def screenshot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / name), full_page=True)


def test_replay_a_dead_letter_and_see_the_new_job_succeed(page, dead_letter, run_due) -> None:
    letter = dead_letter(2, 3, error="RuntimeError: upstream timed out", traceback="Traceback ...")
    page.goto("/admin/django_leasejobs/deadletter/")
    page.click(f"a[href$='/deadletter/{letter.pk}/change/']")
    assert page.locator("text=RuntimeError: upstream timed out").first.is_visible()
    screenshot(page, "admin-dead-letter.png")
    page.click("#leasejobs-replay-edited")
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
    assert page.locator(".field-status .readonly").inner_text() == "Succeeded"
    assert "42" in page.locator(".field-result_json").inner_text()


def test_replay_button_as_is(page, dead_letter, run_due) -> None:
    letter = dead_letter(1, 1)
    page.goto(f"/admin/django_leasejobs/deadletter/{letter.pk}/change/")
    page.click("#leasejobs-replay")
    assert "as job #" in page.locator("ul.messagelist li.success").inner_text()
    assert [j.status for j in run_due()] == [Status.SUCCEEDED]
    assert DeadLetter.objects.get(pk=letter.pk).replayed_job is not None
