"""The lease advisor's faces: collect(), ``jobstats --leases``, the W005/W006 checks, the admin.

Rows are written through the worker's own flush (``upkeep.record_runtimes``); their hour is
moved in the database to put runs in the past.
"""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.core import checks
from django.core.management import call_command
from django.db.models import F
from django.test import Client

from django_leasejobs import upkeep
from django_leasejobs.checks import leases as lease_checks
from django_leasejobs.models import RuntimeStat
from django_leasejobs.reports import advisor
from django_leasejobs.upkeep import RuntimeCounts

from ..admin.conftest import VIEW, staff_client, url

pytestmark = pytest.mark.django_db

REPORT = "testapp.jobs.sleep"  # a registered name; any name works


def flush(
    name: str,
    runtimes: list[float],
    *,
    stale: int = 0,
    recovered: int = 0,
    lease: float = 60.0,
    heartbeat: float | None = 15.0,
) -> None:
    counts = RuntimeCounts(stale=stale, recovered=recovered, lease_seconds=lease)
    for seconds in runtimes:
        counts.run(seconds)
    upkeep.record_runtimes({name: counts}, heartbeat=heartbeat)


def older(days: int) -> None:
    """Move every recorded hour back by ``days`` (as if those runs were that long ago)."""
    RuntimeStat.objects.update(hour=F("hour") - dt.timedelta(days=days))


def forty_one_second_runs() -> list[float]:
    """100 runs: 98 of 10 s and two of 41 s, so p99 is 41 s (the largest run caps it)."""
    return [10.0] * 98 + [41.0] * 2


def job(name: str) -> advisor.JobLeases:
    return next(j for j in advisor.collect() if j.name == name)


def ids(databases=("default",)) -> list[str]:
    return sorted(m.id for m in lease_checks.check_leases(databases=list(databases)) if m.id)


def test_collect_merges_the_hours_of_the_window() -> None:
    flush(REPORT, forty_one_second_runs()[:50], stale=1)
    older(days=2)  # two days ago
    flush(REPORT, forty_one_second_runs()[50:], recovered=2, lease=90.0, heartbeat=20.0)
    found = job(REPORT)
    assert (found.runs, found.stale, found.recovered) == (100, 1, 2)
    assert (found.runs_last_day, found.stale_last_day) == (50, 0)
    assert (found.p99, found.max) == (41.0, 41.0)
    assert found.p50 is not None
    assert 8.4 < found.p50 < 11.9  # 10 s, within a bucket's error
    assert (found.lease, found.heartbeat) == (90.0, 20.0)  # the newest flush's
    assert found.suggestion is not None
    assert (found.suggestion.lease, found.suggestion.heartbeat) == (60.0, 15.0)
    older(days=8)
    assert job(REPORT).runs == 0  # out of the 7-day window


def test_a_registered_job_without_runs_is_listed_with_its_configured_lease(settings) -> None:
    settings.LEASEJOBS_LEASE_SECONDS = 45.0
    short = job("testapp.jobs.short_lease")
    assert (short.runs, short.lease, short.p99, short.suggestion) == (0, 5.0, None, None)
    assert job("testapp.jobs.noop").lease == 45.0
    assert "nothing to suggest" in short.reason


def test_jobstats_leases_table(settings) -> None:
    flush(REPORT, forty_one_second_runs(), stale=3)
    out = io.StringIO()
    call_command("jobstats", "--leases", stdout=out)
    text = out.getvalue()
    assert text.startswith("Runs of the last 7 day(s), by job name\njob ")
    line = next(row for row in text.splitlines() if row.startswith(REPORT + " "))
    # runs, p50 p95 p99 max, lease heartbeat, stale recovered, suggested lease heartbeat
    # (10 s runs read back as 8.6 s: the middle of their bucket, 7.2 to 10.2 s)
    assert " ".join(line.split()[1:]) == ("100 8.6 s 8.6 s 41 s 41 s 60 s 15 s 3 0 60 s 7.5 s")
    assert (
        f"{REPORT}: 3 stale reports in 100 runs say beats are missed; p99 41 s; lease 60 s "
        "renewed every 7.5 s keeps a healthy run's claim with 7 missed beats of slack; a crash "
        "is retried after 60 s"
    ) in text


def test_jobstats_leases_json_and_window() -> None:
    flush(REPORT, forty_one_second_runs())
    older(days=3)
    out = io.StringIO()
    call_command("jobstats", "--leases", "--json", stdout=out)
    rows = {row["name"]: row for row in json.loads(out.getvalue())}
    assert rows[REPORT]["runs"] == 100
    assert rows[REPORT]["p99"] == 41.0
    assert (rows[REPORT]["suggested_lease"], rows[REPORT]["suggested_heartbeat"]) == (60.0, 15.0)
    assert rows[REPORT]["reason"].startswith("p99 41 s; lease 60 s renewed every 15 s")
    out = io.StringIO()
    call_command("jobstats", "--leases", "--json", "--window", "1d", stdout=out)
    rows = {row["name"]: row for row in json.loads(out.getvalue())}
    assert rows[REPORT]["runs"] == 0
    assert rows[REPORT]["suggested_lease"] is None


def test_w005_when_p99_exceeds_a_lease_no_heartbeat_renews() -> None:
    flush(REPORT, forty_one_second_runs(), lease=30.0, heartbeat=15.0)
    assert ids() == []  # p99 over the lease, but the heartbeat keeps it: nothing to say
    flush(REPORT, [1.0], lease=30.0, heartbeat=None)  # the newest runs had no heartbeat
    assert ids() == ["leasejobs.W005"]
    flush(REPORT, [1.0], lease=10.0, heartbeat=15.0)  # a heartbeat slower than the lease
    (message,) = lease_checks.check_leases(databases=["default"])
    assert message.id == "leasejobs.W005"
    assert isinstance(message, checks.Warning)
    assert f"Job {REPORT}: its p99 runtime (41 s) exceeds its lease (10 s)" in message.msg
    flush(REPORT, [1.0], lease=60.0, heartbeat=None)  # a lease above p99 needs no renewal
    assert ids() == []


def test_w006_when_stale_reports_exceed_one_percent_of_the_last_days_runs() -> None:
    flush(REPORT, [1.0] * 100, stale=1)
    assert ids() == []  # 1 %: at the limit, not over it
    flush(REPORT, [1.0] * 100, stale=2)
    older(days=2)  # all of that two days ago
    flush(REPORT, [1.0] * 100, stale=2)
    (message,) = lease_checks.check_leases(databases=["default"])
    assert message.id == "leasejobs.W006"
    assert "2 stale reports in 100 runs of the last day (2.0%)" in message.msg


def test_the_checks_run_with_the_database_tag_only() -> None:
    flush(REPORT, [1.0] * 10, stale=5)
    plain = checks.run_checks(tags=None)
    assert "leasejobs.W006" not in {m.id for m in plain}
    tagged = checks.run_checks(databases=["default"], tags=[checks.Tags.database])
    assert "leasejobs.W006" in {m.id for m in tagged}


def test_admin_page_for_view_only_staff(db) -> None:
    flush(REPORT, forty_one_second_runs())
    viewer = staff_client("viewer", VIEW)
    response = viewer.get(url("leases"))
    assert response.status_code == 200
    page = response.content.decode()
    assert "p99 41 s; lease 60 s renewed every 15 s keeps a healthy run&#x27;s claim" in page
    row = next(r for r in response.context["rows"] if r["name"] == REPORT)
    assert row["runtimes"] == ["8.6 s", "8.6 s", "41 s", "41 s"]
    assert (row["suggested_lease"], row["suggested_heartbeat"], row["warnings"]) == (
        "60 s",
        "15 s",
        [],
    )
    assert url("leases") in viewer.get(reverse_app_index()).content.decode()


def test_admin_page_flags_the_warnings(db) -> None:
    flush(REPORT, forty_one_second_runs(), stale=5, lease=30.0, heartbeat=None)
    response = staff_client("viewer", VIEW).get(url("leases"))
    row = next(r for r in response.context["rows"] if r["name"] == REPORT)
    assert row["heartbeat"] == "off"
    assert [w.split("(")[-1] for w in row["warnings"]] == ["W005)", "W006)"]
    assert response.content.decode().count('class="leasejobs-overdue"') == 3


def test_admin_page_needs_the_view_permission(db) -> None:
    assert staff_client("nobody", []).get(url("leases")).status_code == 403
    anonymous = Client().get(url("leases"))
    assert anonymous.status_code == 302
    assert "login" in anonymous["Location"]


def reverse_app_index() -> str:
    from django.urls import reverse

    return reverse("admin:app_list", kwargs={"app_label": "django_leasejobs"})


def test_prunejobs_prunes_runtime_rows_older_than_the_longest_age_and_the_window() -> None:
    flush(REPORT, [1.0])
    older(days=10)
    flush(REPORT, [1.0])
    out = io.StringIO()
    call_command("prunejobs", "--succeeded-older-than", "1d", "--dry-run", stdout=out)
    assert "runtime stats: would delete 1 hourly rows over 7d00h old" in out.getvalue()
    assert RuntimeStat.objects.count() == 2
    call_command("prunejobs", "--dead-older-than", "30d", stdout=io.StringIO())
    assert RuntimeStat.objects.count() == 2  # 10 days is younger than 30
    out = io.StringIO()
    call_command("prunejobs", "--succeeded-older-than", "1d", stdout=out)
    assert "runtime stats: deleted 1 hourly rows over 7d00h old" in out.getvalue()
    assert RuntimeStat.objects.count() == 1
