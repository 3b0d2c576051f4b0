"""The admin on shards: ``?database=ALIAS`` chooses the queue database every page shows and
acts on (the home one by default), and a switch links to each when there are several.

Two real databases of the test run's engine: ``default`` and ``shard`` (testproject's
settings), with the queue ``reports`` routed to ``shard``. Rows are counted in each by the
ORM, never through the admin.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.admin.models import LogEntry
from django.test import override_settings
from testapp import jobs

from django_leasejobs import Workflow, protocol
from django_leasejobs.models import DeadLetter, Job, Schedule, Status, WorkflowRun
from django_leasejobs.models.databases import using_database
from django_leasejobs.protocol import Failure

from ..conftest import shifted
from .conftest import url

pytestmark = pytest.mark.django_db(databases=["default", "shard"])

SWITCH = 'id="leasejobs-databases"'


@pytest.fixture
def shards() -> Iterator[None]:
    with override_settings(LEASEJOBS_QUEUE_DATABASES={"reports": "shard"}):
        yield


def at(alias: str, name: str, *args: object) -> str:
    """The admin URL ``name`` on database ``alias``."""
    return f"{url(name, *args)}?database={alias}"


def listed(response) -> list[int]:
    return sorted(row.pk for row in response.context["cl"].result_list)


def status(alias: str, job: Job) -> str:
    return Job.objects.using(alias).get(pk=job.pk).status


def meeting_jobs() -> tuple[Job, Job]:
    """A pending job at home and one in the shard with the same id: each table has its own
    sequence, so the shard's row is given the home one's id."""
    home = jobs.noop.using(delay=600).enqueue()
    away = jobs.noop.using(queue="reports", delay=600).enqueue()
    Job.objects.using("shard").filter(pk=away.pk).update(id=home.pk)
    away = Job.objects.using("shard").get(pk=home.pk)
    assert (home._state.db, away._state.db) == ("default", "shard")
    return home, away


def meeting_schedules(home_name: str, away_name: str) -> tuple[Schedule, Schedule]:
    """A schedule at home and one in the shard with the same id."""
    home, away = (
        Schedule.objects.using(alias).create(
            name=name, cron="0 * * * *", timezone="UTC", job="testapp.jobs.noop"
        )
        for alias, name in (("default", home_name), ("shard", away_name))
    )
    Schedule.objects.using("shard").filter(pk=away.pk).update(id=home.pk)
    return home, Schedule.objects.using("shard").get(pk=home.pk)


def dead_in_shard() -> DeadLetter:
    job = jobs.add.using(queue="reports", max_attempts=1).enqueue(1, 2)
    Job.objects.using("shard").filter(pk=job.pk).update(run_at=shifted(-1))
    with using_database("shard"):
        [running] = protocol.claim("admin-test-worker", batch=1)
        protocol.fail(job.pk, running.attempt, Failure("boom", "Traceback: boom"))
    return DeadLetter.objects.using("shard").get(job_id=job.pk)


# ---------------------------------------------------------------------- one database


def test_with_one_database_no_switch_is_shown_and_the_home_one_may_be_named(admin_client):
    jobs.noop.enqueue()
    names = ("job_changelist", "deadletter_changelist", "deadletter_groups", "schedule_changelist")
    for name in (*names, "workflowrun_changelist", "dashboard", "leases"):
        response = admin_client.get(url(name))
        assert response.status_code == 200
        assert SWITCH not in response.content.decode()
    page = admin_client.get(url("job_change", jobs.noop.enqueue().pk)).content.decode()
    assert 'id="leasejobs-database"' not in page
    response = admin_client.get(at("default", "job_changelist"))
    assert response.status_code == 200
    assert len(listed(response)) == 2
    assert "?e=1" not in response.get("Location", "")  # not taken as a filter


def test_with_one_database_another_alias_is_no_queue_database(admin_client) -> None:
    response = admin_client.get(at("shard", "job_changelist"))
    assert response.status_code == 404
    assert response.content.decode() == (
        "No queue database 'shard': the queue databases are 'default'."
    )


# ---------------------------------------------------------------------- lists and switch


@pytest.mark.parametrize("bad", ["nowhere", "", "shard%00", "DEFAULT"])
@pytest.mark.parametrize("name", ["job_changelist", "dashboard", "deadletter_groups"])
def test_an_unknown_database_is_refused_with_the_ones_there_are(
    admin_client, shards, bad: str, name: str
) -> None:
    response = admin_client.get(f"{url(name)}?database={bad}")
    assert response.status_code == 404
    assert "the queue databases are 'default', 'shard'." in response.content.decode()


def test_a_visitor_not_signed_in_is_sent_to_the_login_page_and_told_nothing(client, shards):
    response = client.get(at("nowhere", "job_changelist"))
    assert response.status_code == 302
    assert response["Location"].startswith(url("job_changelist").split("django_leasejobs")[0])
    assert "login" in response["Location"]
    assert "queue databases" not in response.content.decode()


def test_an_unknown_database_in_a_list_s_filters_is_refused(admin_client, shards) -> None:
    job = jobs.noop.enqueue()
    page = f"{url('job_change', job.pk)}?_changelist_filters=database%3Dnowhere"
    assert admin_client.get(page).status_code == 404
    assert admin_client.post(at("nowhere", "job_cancel", job.pk)).status_code == 404
    assert status("default", job) == Status.PENDING


def test_each_list_shows_the_chosen_database_s_rows(admin_client, shards) -> None:
    home = jobs.noop.enqueue()
    away = jobs.noop.using(queue="reports").enqueue()
    away_letter = dead_in_shard()
    flow = Workflow(name="shard-flow")
    flow.add(jobs.noop.using(queue="reports").s())
    run = flow.enqueue()
    schedule = Schedule.objects.using("shard").create(
        name="in-shard", cron="0 * * * *", timezone="UTC", job="testapp.jobs.noop"
    )
    assert listed(admin_client.get(url("job_changelist"))) == [home.pk]
    shown = admin_client.get(at("shard", "job_changelist"))
    queues = shown.context["cl"].result_list.values_list("queue", flat=True)
    assert sorted(queues) == ["reports"] * 3  # its job, its dead job, its workflow's step
    assert away.pk in listed(shown)
    assert listed(admin_client.get(url("deadletter_changelist"))) == []
    assert listed(admin_client.get(at("shard", "deadletter_changelist"))) == [away_letter.pk]
    assert listed(admin_client.get(url("workflowrun_changelist"))) == []
    assert listed(admin_client.get(at("shard", "workflowrun_changelist"))) == [run.pk]
    assert listed(admin_client.get(url("schedule_changelist"))) == []
    assert listed(admin_client.get(at("shard", "schedule_changelist"))) == [schedule.pk]


def switch_links(page: str) -> tuple[str, list[tuple[str, str]]]:
    """The switch's current database and its links (alias, href)."""
    [switch] = re.findall(r'<p id="leasejobs-databases".*?</p>', page, re.S)
    [current] = re.findall(r'<strong aria-current="page">([^<]*)</strong>', switch)
    links = re.findall(r'<a href="([^"]*)">([^<]*)</a>', switch)
    return current, [(alias, href.replace("&amp;", "&")) for href, alias in links]


@pytest.mark.parametrize(
    "name",
    [
        "job_changelist",
        "deadletter_changelist",
        "deadletter_groups",
        "workflowrun_changelist",
        "schedule_changelist",
        "dashboard",
        "leases",
    ],
)
def test_the_switch_links_each_database_and_marks_the_shown_one(
    admin_client, shards, name: str
) -> None:
    current, links = switch_links(admin_client.get(url(name)).content.decode())
    assert current == "default"
    assert [alias for alias, _ in links] == ["shard"]
    current, links = switch_links(admin_client.get(at("shard", name)).content.decode())
    assert current == "shard"
    [(alias, href)] = links
    assert alias == "default"
    assert parse_qs(urlsplit(href).query) == {"database": ["default"]}


def test_the_switch_keeps_the_list_s_filters_but_not_its_page(admin_client, shards) -> None:
    page = admin_client.get(f"{url('job_changelist')}?status=pending&p=2").content.decode()
    [(_, href)] = switch_links(page)[1]
    assert parse_qs(urlsplit(href).query) == {"status": ["pending"], "database": ["shard"]}


def test_filters_and_search_keep_the_database(admin_client, shards) -> None:
    jobs.noop.using(queue="reports").enqueue()
    Schedule.objects.using("default").create(name="home-only", cron="0 * * * *", timezone="UTC")
    Schedule.objects.using("shard").create(name="away", cron="0 * * * *", timezone="UTC")
    response = admin_client.get(at("shard", "job_changelist"))
    [by_schedule] = [f for f in response.context["cl"].filter_specs if f.title == "schedule"]
    assert [name for _, name in by_schedule.lookup_choices] == ["away"]
    page = response.content.decode()
    filter_links = re.findall(r'href="(\?[^"]*status__exact=pending[^"]*)"', page)
    assert filter_links
    assert all("database=shard" in link for link in filter_links)
    assert '<input type="hidden" name="database" value="shard">' in page  # the search form
    searched = admin_client.get(f"{url('job_changelist')}?database=shard&q=noop")
    assert '(<a href="?database=shard">Show all</a>)' in searched.content.decode()
    response = admin_client.get(f"{url('job_changelist')}?database=shard&status=pending")
    assert len(listed(response)) == 1


# ---------------------------------------------------------------------- actions on a shard


def test_a_list_action_changes_the_shard_s_job_and_not_the_home_one(admin_client, shards):
    home, away = meeting_jobs()
    response = admin_client.post(
        at("shard", "job_changelist"),
        {"action": "cancel_jobs", "_selected_action": [away.pk]},
    )
    assert response.status_code == 302
    assert "database=shard" in response["Location"]
    assert status("shard", away) == Status.CANCELLED
    assert status("default", home) == Status.PENDING
    assert LogEntry.objects.using("default").filter(object_id=str(away.pk)).count() == 1


def test_list_detail_action_and_back_keep_the_database(admin_client, shards) -> None:
    home, away = meeting_jobs()
    Job.objects.using("shard").filter(pk=away.pk).update(name="testapp.jobs.add")
    listing = admin_client.get(at("shard", "job_changelist")).content.decode()
    [detail] = re.findall(rf'href="([^"]*/job/{away.pk}/change/[^"]*)"', listing)[:1]
    detail = detail.replace("&amp;", "&")
    assert "database%3Dshard" in detail
    page = admin_client.get(detail)
    assert page.context["original"].name == "testapp.jobs.add"  # the shard's row
    assert "In the queue database <strong>shard</strong>." in page.content.decode()
    [cancel] = [a["url"] for a in page.context["leasejobs_actions"] if a["slug"] == "cancel"]
    assert cancel.endswith("?database=shard")
    done = admin_client.post(cancel)
    assert done.status_code == 302
    assert done["Location"] == at("shard", "job_change", away.pk)
    assert status("shard", away) == Status.CANCELLED
    assert status("default", home) == Status.PENDING
    back = admin_client.get(done["Location"]).content.decode()
    assert f'href="{url("job_changelist")}?database=shard"' in back  # the breadcrumbs


def test_a_missing_row_of_the_chosen_database_is_a_404(admin_client, shards) -> None:
    home = jobs.noop.enqueue()  # no job of this id in the shard
    Job.objects.using("shard").filter(pk=home.pk).delete()
    assert admin_client.post(at("shard", "job_cancel", home.pk)).status_code == 404
    assert status("default", home) == Status.PENDING


def test_a_bulk_action_acts_on_the_shard_only(admin_client, shards) -> None:
    home, away = meeting_jobs()
    query = "?database=shard&status=pending"
    confirm = admin_client.get(f"{url('job_bulk', 'cancel')}{query}")
    assert confirm.context["count"] == 1
    done = admin_client.post(
        f"{url('job_bulk', 'cancel')}{query}", {"through_id": confirm.context["through_id"]}
    )
    assert done.status_code == 302
    assert "database=shard" in done["Location"]
    assert status("shard", away) == Status.CANCELLED
    assert status("default", home) == Status.PENDING


def test_a_dead_letter_of_the_shard_is_replayed_there(admin_client, shards) -> None:
    letter = dead_in_shard()
    page = admin_client.get(at("shard", "deadletter_change", letter.pk))
    assert page.context["leasejobs_replay_url"] == at("shard", "deadletter_replay", letter.pk)
    done = admin_client.post(page.context["leasejobs_replay_url"], {"as_is": "1"})
    assert done["Location"] == at("shard", "deadletter_change", letter.pk)
    replayed = DeadLetter.objects.using("shard").get(pk=letter.pk).replayed_job_id
    assert replayed is not None
    assert Job.objects.using("shard").get(pk=replayed).status == Status.PENDING
    assert not Job.objects.using("default").exists()


def test_a_dead_letter_replay_by_the_list_action_stays_in_the_shard(admin_client, shards):
    letter = dead_in_shard()
    admin_client.post(
        at("shard", "deadletter_changelist"),
        {"action": "replay_selected", "_selected_action": [letter.pk]},
    )
    assert DeadLetter.objects.using("shard").get(pk=letter.pk).replayed_job_id is not None
    assert not Job.objects.using("default").exists()


def test_a_group_of_the_shard_s_dead_letters_is_replayed_there(admin_client, shards) -> None:
    dead_in_shard()
    with using_database("shard"):
        groups = protocol.groups()
    assert len(groups) == 1
    assert admin_client.get(url("deadletter_groups")).context["total"] == 0
    shown = admin_client.get(at("shard", "deadletter_groups"))
    assert shown.context["total"] == 1
    [row] = shown.context["rows"]
    assert row["replay_url"].endswith("?database=shard")
    confirm = admin_client.get(row["replay_url"])
    assert confirm.context["count"] == 1
    done = admin_client.post(row["replay_url"], {"through_id": groups[0].latest_id})
    assert done["Location"] == at("shard", "deadletter_groups")
    assert DeadLetter.objects.using("shard").get().replayed_job_id is not None
    assert not Job.objects.using("default").exists()


def test_a_workflow_run_of_the_shard_is_cancelled_there(admin_client, shards) -> None:
    flow = Workflow(name="shard-flow")
    flow.add(jobs.noop.using(queue="reports", delay=600).s())
    run = flow.enqueue()
    page = admin_client.get(at("shard", "workflowrun_change", run.pk))
    [cancel] = [a["url"] for a in page.context["leasejobs_actions"] if a["slug"] == "cancel-run"]
    done = admin_client.post(cancel)
    assert done["Location"] == at("shard", "workflowrun_change", run.pk)
    assert WorkflowRun.objects.using("shard").get(pk=run.pk).status == "cancelled"


def test_schedules_of_the_shard_are_disabled_edited_and_shown_there(admin_client, shards):
    home, away = meeting_schedules("same", "away")
    admin_client.post(
        at("shard", "schedule_changelist"),
        {"action": "disable_schedules", "_selected_action": [away.pk]},
    )
    assert Schedule.objects.using("shard").get(pk=away.pk).enabled is False
    assert Schedule.objects.using("default").get(pk=home.pk).enabled is True
    occurrences = admin_client.get(at("shard", "schedule_occurrences", away.pk))
    assert occurrences.status_code == 200
    assert occurrences.context["schedule"].name == "away"
    assert all("database=shard" in link for _, link in occurrences.context["quick"])


def test_a_schedule_added_on_the_shard_is_written_there(admin_client, shards) -> None:
    Schedule.objects.using("shard").create(
        name="taken", cron="0 * * * *", timezone="UTC", job="testapp.jobs.noop"
    )
    form = {
        "name": "taken",
        "cron": "0 3 * * *",
        "timezone": "UTC",
        "job": "testapp.jobs.noop",
        "args": "[]",
        "kwargs": "{}",
        "queue": "",
        "priority": "0",
        "max_attempts": "",
        "jitter": "0",
        "misfire": "latest",
        "enabled": "on",
        "catchup_window": "3600",
    }
    refused = admin_client.post(at("shard", "schedule_add"), form)
    assert refused.status_code == 200
    assert "exists in this database" in str(refused.context["adminform"].form.errors)
    added = admin_client.post(at("shard", "schedule_add"), {**form, "name": "new"})
    assert added.status_code == 302, added.context["adminform"].form.errors
    assert "database" in added["Location"]
    assert Schedule.objects.using("shard").filter(name="new").count() == 1
    assert not Schedule.objects.using("default").exists()


# ---------------------------------------------------------------------- dashboard


def test_the_dashboard_counts_per_database(admin_client, shards) -> None:
    jobs.noop.enqueue()
    jobs.noop.using(queue="reports").enqueue()
    jobs.noop.using(queue="reports").enqueue()
    home = admin_client.get(url("dashboard"))
    away = admin_client.get(at("shard", "dashboard"))

    def pending(response) -> dict[str, str]:
        return {row["queue"]: row["cells"][0]["text"] for row in response.context["rows"]}

    assert pending(home) == {"default": "1"}
    assert pending(away) == {"reports": "2"}
    page = away.content.decode()
    assert f'href="{url("job_changelist")}?queue=reports&amp;database=shard"' in page
    assert f'action="{at("shard", "pause", "pause")}"' in page  # the pause buttons
    assert 'href="?range=24h&amp;database=shard#leasejobs-history"' in page  # the charts


def test_a_pause_from_the_shard_s_dashboard_pauses_there(admin_client, shards) -> None:
    done = admin_client.post(
        at("shard", "pause", "pause"), {"kind": "queue", "name": "reports", "confirm": "yes"}
    )
    assert done["Location"] == at("shard", "dashboard")
    with using_database("shard"):
        assert [p.name for p in protocol.paused()] == ["reports"]
    assert protocol.paused() == []


def test_a_schedule_of_the_shard_is_deleted_there(admin_client, shards) -> None:
    _, away = meeting_schedules("home", "away")
    confirm = admin_client.get(at("shard", "schedule_delete", away.pk))
    assert confirm.context["object"].name == "away"
    assert confirm.context["deleted_objects"] == ["Schedule: away"]
    assert not confirm.context["perms_lacking"]
    done = admin_client.post(at("shard", "schedule_delete", away.pk), {"post": "yes"})
    assert done.status_code == 302
    assert "database=shard" in done["Location"]
    assert not Schedule.objects.using("shard").exists()
    assert Schedule.objects.using("default").get().name == "home"


def test_a_schedule_of_the_shard_is_edited_there(admin_client, shards) -> None:
    home, away = meeting_schedules("home", "away")
    page = admin_client.get(at("shard", "schedule_change", away.pk))
    form = {
        key: value
        for key, value in page.context["adminform"].form.initial.items()
        if value is not None and key not in ("args", "kwargs", "enabled")
    }
    done = admin_client.post(
        at("shard", "schedule_change", away.pk),
        {**form, "cron": "5 4 * * *", "args": "[]", "kwargs": "{}", "enabled": "on"},
    )
    assert done.status_code == 302, done.context["adminform"].form.errors
    assert parse_qs(urlsplit(done["Location"]).query)["database"] == ["shard"]
    assert Schedule.objects.using("shard").get(pk=away.pk).cron == "5 4 * * *"
    assert Schedule.objects.using("default").get(pk=home.pk).cron == "0 * * * *"
