"""``manage.py workflows list|show|cancel`` and the runs in ``jobstats``."""

from __future__ import annotations

import io
import json

import jsonschema_rs  # schemathesis brings it: the API's tests validate with it too
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_leasejobs.api import schema
from django_leasejobs.models import RunStatus, WorkflowRun, WorkflowStep

from ... import workflow_rows

pytestmark = pytest.mark.django_db


def run(*argv: str, command: str = "workflows") -> str:
    out = io.StringIO()
    call_command(command, *argv, stdout=out)
    return out.getvalue()


def test_list_newest_first_and_by_status() -> None:
    running = workflow_rows.diamond()
    done = workflow_rows.finished("nightly")
    lines = run("list").splitlines()
    assert lines[0].split() == ["id", "name", "status", "steps", "age"]
    assert lines[1].split()[:4] == [str(done.pk), "nightly", "succeeded", "1/1"]
    assert lines[2].split()[:4] == [str(running.pk), "order-42", "running", "2/4"]
    only = json.loads(run("list", "--status", "running", "--json"))
    assert [(r["id"], r["status"], r["steps_failed"]) for r in only] == [(running.pk, "running", 1)]
    assert run("list", "--status", "cancelled") == "No workflow runs.\n"


def test_show_lists_every_step_with_its_state_job_and_parents() -> None:
    run_row = workflow_rows.diamond()
    text = run("show", str(run_row.pk))
    assert text.splitlines()[0] == (
        f"workflow run {run_row.pk} order-42: running, 2/4 steps ended "
        "(1 succeeded, 1 failed, 0 cancelled)"
    )
    rows = {line.split()[0]: line.split() for line in text.splitlines()[2:]}
    thumbs = WorkflowStep.objects.get(run=run_row, name="thumbs")
    assert rows["thumbs"][:3] == ["thumbs", "dead", str(thumbs.job_id)]
    assert rows["publish"] == ["publish", "waiting", "-", "parse,", "thumbs"]
    data = json.loads(run("show", str(run_row.pk), "--json"))
    assert [s["name"] for s in data["steps"]] == ["fetch", "parse", "thumbs", "publish"]


def test_the_json_is_the_http_apis_shape() -> None:
    """A script may read runs from the command or the API: one shape, as documented."""
    run_row = workflow_rows.diamond()
    document = json.loads(schema.rendered())

    def valid(component: str, value: object) -> bool:
        checker = {**document, "$ref": f"#/components/schemas/{component}"}
        return jsonschema_rs.Draft202012Validator(checker, validate_formats=True).is_valid(value)

    shown = json.loads(run("show", str(run_row.pk), "--json"))
    assert valid("WorkflowRunDetail", shown)
    assert shown["created_at"].endswith("Z")
    assert not valid("WorkflowRunDetail", {**shown, "created_at": "yesterday"})
    listed = json.loads(run("list", "--json"))
    assert [valid("WorkflowRun", row) for row in listed] == [True]
    assert listed[0] == {k: v for k, v in shown.items() if k not in ("steps", "next_cursor")}
    assert shown["next_cursor"] is None  # every step: the last page


def test_cancel_a_running_run() -> None:
    run_row = workflow_rows.diamond()
    assert run("cancel", str(run_row.pk)) == (
        f"workflow run {run_row.pk}: cancel requested (steps not started cancelled; running "
        "steps' workers asked to end them)\n"
    )
    assert WorkflowRun.objects.get(pk=run_row.pk).cancel_requested_at is not None
    assert WorkflowStep.objects.get(run=run_row, name="publish").state == "cancelled"


def test_cancelling_a_finished_run_is_an_error_and_changes_nothing() -> None:
    done = workflow_rows.finished()
    with pytest.raises(CommandError, match="is succeeded: only running runs can be cancelled"):
        run("cancel", str(done.pk))
    after = WorkflowRun.objects.get(pk=done.pk)
    assert (after.status, after.cancel_requested_at) == (RunStatus.SUCCEEDED, None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "999999"], "There is no workflow run 999999."),
        (["cancel", "999999"], "There is no workflow run 999999."),
        (["show", "x"], "invalid run id value: 'x'"),
        (["cancel", "0"], "invalid run id value: '0'"),
        (["show", "9" * 30], "invalid run id value"),
        (["list", "--status", "done"], "invalid choice: 'done'"),
        (["list", "--limit", "0"], "invalid run id value: '0'"),
        ([], "ACTION"),
    ],
)
def test_bad_input_is_a_command_error(argv, message) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        run(*argv)


def test_jobstats_counts_runs_by_status() -> None:
    assert "workflow runs" not in run(command="jobstats")  # none yet: the table as before
    assert json.loads(run("--json", command="jobstats"))["workflow_runs"] == {
        "running": 0,
        "succeeded": 0,
        "failed": 0,
        "cancelled": 0,
    }
    workflow_rows.diamond()
    workflow_rows.finished()
    workflow_rows.finished("other")
    table = run(command="jobstats")
    assert "workflow runs: running 1, succeeded 2, failed 0, cancelled 0" in table
    assert json.loads(run("--json", command="jobstats"))["workflow_runs"] == {
        "running": 1,
        "succeeded": 2,
        "failed": 0,
        "cancelled": 0,
    }


def test_names_and_reasons_print_their_control_characters_escaped() -> None:
    """Names and reasons come from rows anyone who enqueues may write: an escape sequence in
    one could rewrite what the operator reads (``\\x1b[2J`` clears the screen)."""
    run_row = workflow_rows.diamond()
    WorkflowRun.objects.filter(pk=run_row.pk).update(name="evil\x1b[2J\rname\u200b")
    WorkflowStep.objects.filter(run=run_row, name="thumbs").update(name="th\x07umbs")
    WorkflowStep.objects.filter(run=run_row, name="publish").update(
        reason="held:\nfake line \x9b31m é"
    )
    listed = run("list")
    shown = run("show", str(run_row.pk))
    for text in (listed, shown):
        assert not any(c in text for c in "\x1b\r\x07\x9b\u200b"), text
    assert "evil\\x1b[2J\\rname\\u200b" in listed
    assert f"workflow run {run_row.pk} evil\\x1b[2J\\rname\\u200b: running" in shown
    assert "th\\x07umbs" in shown
    assert "(held:\\nfake line \\x9b31m é)" in shown
    assert len(shown.splitlines()) == 2 + 4  # the reason's line break printed, not obeyed
    data = json.loads(run("show", str(run_row.pk), "--json"))  # JSON escapes them itself
    assert data["name"] == "evil\x1b[2J\rname\u200b"
