"""Workflow runs over HTTP: list with a status filter and pages, get with steps, cancel."""

from __future__ import annotations

import json

import jsonschema_rs
import pytest
from django.contrib.admin.models import LogEntry

from django_leasejobs.api import schema
from django_leasejobs.models import RunStatus, WorkflowRun

from .. import workflow_rows

pytestmark = pytest.mark.django_db


def validate(component: str, value: dict) -> None:
    document = json.loads(schema.rendered())
    checker = {**document, "$ref": f"#/components/schemas/{component}"}
    jsonschema_rs.Draft202012Validator(checker, validate_formats=True).validate(value)


def test_list_newest_first_filtered_by_status_as_documented(operator):
    running = workflow_rows.diamond()
    done = workflow_rows.finished()
    status, body = operator.get("workflows/")
    assert status == 200
    assert [r["id"] for r in body["results"]] == [done.pk, running.pk]
    validate("WorkflowRunPage", body)
    status, body = operator.get("workflows/", status="running")
    assert [
        (r["id"], r["status"], r["steps_finished"], r["steps_total"]) for r in body["results"]
    ] == [(running.pk, "running", 2, 4)]
    status, body = operator.get("workflows/", name="done")
    assert [r["id"] for r in body["results"]] == [done.pk]


def test_pages_follow_the_cursor(operator):
    runs = [workflow_rows.finished(f"r{i}") for i in range(3)]
    _, first = operator.get("workflows/", limit=2)
    assert [r["id"] for r in first["results"]] == [runs[2].pk, runs[1].pk]
    _, second = operator.get("workflows/", limit=2, cursor=first["next_cursor"])
    assert [r["id"] for r in second["results"]] == [runs[0].pk]
    assert second["next_cursor"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [({"status": "done"}, "status"), ({"name": "\x00"}, "name"), ({"queue": "x"}, "queue")],
)
def test_bad_parameters_are_400_naming_them(operator, params, field):
    status, body = operator.get("workflows/", **params)
    assert status == 400
    assert body["field"] == field
    assert body["code"] in ("invalid_parameter", "unknown_parameter")


def test_get_a_run_with_its_steps(operator):
    run = workflow_rows.diamond()
    status, body = operator.get(f"workflows/{run.pk}/")
    assert status == 200
    validate("WorkflowRunDetail", body)
    steps = {s["name"]: s for s in body["steps"]}
    assert [s["name"] for s in body["steps"]] == ["fetch", "parse", "thumbs", "publish"]
    assert {n: (s["state"], s["status"]) for n, s in steps.items()} == {
        "fetch": ("succeeded", "succeeded"),
        "parse": ("released", "running"),
        "thumbs": ("failed", "dead"),
        "publish": ("waiting", "waiting"),
    }
    assert steps["publish"]["parents"] == ["parse", "thumbs"]
    assert steps["publish"]["job_id"] is None
    assert steps["fetch"]["job_id"] is not None
    assert body["next_cursor"] is None


def test_a_runs_steps_come_a_page_at_a_time(operator):
    """A run of 6,000 steps answered 1.3 MB at once; its steps now follow the cursor, in the
    order they were added, each page naming its steps' parents (on earlier pages too)."""
    run = workflow_rows.diamond()
    status, first = operator.get(f"workflows/{run.pk}/", limit=3)
    assert status == 200
    validate("WorkflowRunDetail", first)
    assert [s["name"] for s in first["steps"]] == ["fetch", "parse", "thumbs"]
    assert first["steps_total"] == 4
    assert first["next_cursor"] is not None
    _, second = operator.get(f"workflows/{run.pk}/", limit=3, cursor=first["next_cursor"])
    validate("WorkflowRunDetail", second)
    assert [(s["name"], s["parents"]) for s in second["steps"]] == [
        ("publish", ["parse", "thumbs"])
    ]
    assert second["next_cursor"] is None
    _, default = operator.get(f"workflows/{run.pk}/")
    assert len(default["steps"]) == 4  # LEASEJOBS_API_PAGE_SIZE (50) steps a page


@pytest.mark.parametrize(
    ("params", "field"),
    [({"limit": 0}, "limit"), ({"cursor": "nope"}, "cursor"), ({"status": "x"}, "status")],
)
def test_bad_paging_of_a_runs_steps_is_400_naming_it(operator, params, field):
    run = workflow_rows.finished()
    status, body = operator.get(f"workflows/{run.pk}/", **params)
    assert status == 400
    assert body["field"] == field


def test_a_steps_job_status_is_shown_only_to_who_may_view_jobs(caller):
    run = workflow_rows.diamond()
    blind = caller("view_workflowrun")
    status, body = blind.get(f"workflows/{run.pk}/")
    assert status == 200
    validate("WorkflowRunDetail", body)
    assert {s["name"]: s["status"] for s in body["steps"]} == {
        "fetch": "succeeded",
        "parse": "released",  # its job's "running" is not shown
        "thumbs": "failed",  # nor its job's "dead"
        "publish": "waiting",
    }
    _, seen = caller("view_workflowrun", "view_job").get(f"workflows/{run.pk}/")
    assert {s["name"]: s["status"] for s in seen["steps"]}["parse"] == "running"


@pytest.mark.parametrize(
    "path", ["workflows/999999/", f"workflows/{'9' * 30}/", "workflows/x/", "workflows/1/x/"]
)
def test_missing_runs_are_json_404(operator, path):
    status, body = operator.get(path)
    assert (status, body["code"]) == (404, "not_found")


def test_cancelling_a_finished_run_is_409_and_changes_nothing(operator):
    run = workflow_rows.finished()
    status, body = operator.post(f"workflows/{run.pk}/cancel/")
    assert (status, body["code"]) == (409, "invalid_state")
    assert body["message"] == (
        f"Workflow run #{run.pk} is succeeded: only running runs can be cancelled."
    )
    after = WorkflowRun.objects.get(pk=run.pk)
    assert (after.status, after.cancel_requested_at) == (RunStatus.SUCCEEDED, None)
    assert not LogEntry.objects.exists()


def test_cancel_a_running_run(operator):
    run = workflow_rows.diamond()
    status, body = operator.post(f"workflows/{run.pk}/cancel/")
    assert status == 200
    validate("WorkflowRunDetail", body)
    assert body["cancel_requested_at"] is not None
    steps = {s["name"]: s for s in body["steps"]}
    assert (steps["publish"]["status"], steps["publish"]["reason"]) == (
        "cancelled",
        "run cancelled",
    )
    assert steps["parse"]["status"] == "running"  # its worker is asked to end it
    entry = LogEntry.objects.get(object_id=str(run.pk))
    assert entry.change_message == "Cancelled (API)"


def test_cancel_takes_post_only(operator):
    run = workflow_rows.diamond()
    status, body = operator.get(f"workflows/{run.pk}/cancel/")
    assert (status, body["code"]) == (405, "method_not_allowed")
    assert operator.last["Allow"] == "POST"
    status, body = operator.post("workflows/")
    assert (status, body["code"]) == (405, "method_not_allowed")


def test_permissions(caller):
    run = workflow_rows.diamond()
    nobody = caller("view_job")
    status, body = nobody.get("workflows/")
    assert (status, body["code"]) == (403, "permission_denied")
    viewer = caller("view_workflowrun")
    assert viewer.get(f"workflows/{run.pk}/")[0] == 200
    status, body = viewer.post(f"workflows/{run.pk}/cancel/")
    assert (status, body["code"]) == (403, "permission_denied")
    assert "cancel_workflowrun" in body["message"]
    assert WorkflowRun.objects.get(pk=run.pk).cancel_requested_at is None


def test_without_credentials_it_is_401(client):
    response = client.get("/jobs/api/workflows/")
    assert (response.status_code, response.json()["code"]) == (401, "not_authenticated")


def test_the_documents_choices_are_the_models():
    from django_leasejobs.api import schema_parts as c
    from django_leasejobs.models import Policy, StepState

    assert RunStatus.values == c.RUN_STATUSES
    assert StepState.values == c.STEP_STATES
    assert Policy.values == c.POLICIES


def test_queue_stats_and_health_count_runs_by_status(operator, settings):
    settings.LEASEJOBS_HEALTH_MAX_UNSERVED_AGE = None
    workflow_rows.diamond()
    workflow_rows.finished()
    for path, component in (("queues/", "Stats"), ("health/", "Health")):
        status, body = operator.get(path)
        assert status == 200, body
        validate(component, body)
        assert body["workflow_runs"] == {
            "running": 1,
            "succeeded": 1,
            "failed": 0,
            "cancelled": 0,
        }, path
