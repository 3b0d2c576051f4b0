"""The workflow admin: the runs list, a run's page with its graph, cancel and replay."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from django.contrib.admin.models import LogEntry

from django_leasejobs.admin import workflows as workflow_admin
from django_leasejobs.models import DeadLetter, RunStatus, WorkflowRun, WorkflowStep

from .. import workflow_rows
from .conftest import SCRIPT, staff_client, url

pytestmark = pytest.mark.django_db

NS = {"svg": "http://www.w3.org/2000/svg"}
VIEW_RUN = ["view_workflowrun", "view_job"]


def messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def graph_of(page: str) -> ET.Element:
    start = page.index('<svg xmlns="http://www.w3.org/2000/svg" id="leasejobs-workflow-graph"')
    return ET.fromstring(page[start : page.index("</svg>", start) + len("</svg>")])


@pytest.fixture
def run_operator():
    return staff_client(
        "run-operator",
        [*VIEW_RUN, "cancel_workflowrun", "view_deadletter", "replay_deadletter"],
    )


@pytest.fixture
def run_viewer():
    return staff_client("run-viewer", VIEW_RUN)


class TestList:
    def test_status_progress_and_age(self, admin_client) -> None:
        run = workflow_rows.diamond()
        page = admin_client.get(url("workflowrun_changelist")).content.decode()
        assert "order-42" in page
        assert "2/4 steps (1 failed)" in page
        assert url("workflowrun_change", run.pk) in page
        assert '<td class="field-status">Running</td>' in page
        assert re.search(r'<td class="field-age">\d+\.\d\d s</td>', page)  # since created

    def test_filter_by_status_and_search_by_name(self, admin_client) -> None:
        workflow_rows.diamond("order-42")
        workflow_rows.finished("nightly-report")
        running = admin_client.get(url("workflowrun_changelist"), {"status__exact": "running"})
        assert "order-42" in running.content.decode()
        assert "nightly-report" not in running.content.decode()
        found = admin_client.get(url("workflowrun_changelist"), {"q": "nightly"})
        assert "nightly-report" in found.content.decode()
        assert "order-42" not in found.content.decode()

    def test_a_nul_in_the_status_filter_is_an_invalid_lookup(self, admin_client) -> None:
        workflow_rows.diamond()
        response = admin_client.get(f"{url('workflowrun_changelist')}?status__exact=%00")
        assert response.status_code == 302
        assert response["Location"] == f"{url('workflowrun_changelist')}?e=1"

    def test_runs_are_never_added_or_edited_through_a_form(self, admin_client) -> None:
        run = workflow_rows.diamond()
        assert admin_client.get(url("workflowrun_add")).status_code == 403
        response = admin_client.post(url("workflowrun_change", run.pk), {"name": "x"})
        assert response.status_code == 403
        assert WorkflowRun.objects.get(pk=run.pk).name == "order-42"


class TestRunPage:
    def test_the_graph_draws_every_step_by_depth_coloured_by_state(self, admin_client) -> None:
        run = workflow_rows.diamond()
        page = admin_client.get(url("workflowrun_change", run.pk)).content.decode()
        root = graph_of(page)
        classes = {
            g.find("svg:title", NS).text.split(":")[0]: g.get("class")
            for g in root.iter(f"{{{NS['svg']}}}g")
        }
        assert classes == {
            "fetch": "leasejobs-step leasejobs-step-succeeded",
            "parse": "leasejobs-step leasejobs-step-running",
            "thumbs": "leasejobs-step leasejobs-step-dead",
            "publish": "leasejobs-step leasejobs-step-waiting",
        }
        assert len(root.findall("svg:path", NS)) == 4  # fetch->parse, fetch->thumbs, 2 -> publish
        steps = {s.name: s for s in WorkflowStep.objects.filter(run=run)}
        links = {a.get("href") for a in root.findall("svg:a", NS)}
        assert links == {url("job_change", steps[n].job_id) for n in ("fetch", "parse", "thumbs")}
        assert "<script" not in page[page.index("leasejobs-workflow-graph") :].split("</svg>")[0]

    def test_the_step_table_lists_parents_and_jobs(self, admin_client) -> None:
        run = workflow_rows.diamond()
        page = admin_client.get(url("workflowrun_change", run.pk)).content.decode()
        assert "<td>parse, thumbs</td>" in page
        assert 'class="leasejobs-status-dead"' in page

    def test_the_table_lists_the_first_steps_and_the_graph_counts_them_all(
        self, admin_client, monkeypatch
    ) -> None:
        monkeypatch.setattr(workflow_admin, "MAX_LISTED_STEPS", 2)
        run = workflow_rows.diamond()
        page = admin_client.get(url("workflowrun_change", run.pk)).content.decode()
        assert "The first 2 of 4 steps." in page
        assert "<td>parse, thumbs</td>" not in page  # publish, the fourth, is not listed
        assert len(list(graph_of(page).iter(f"{{{NS['svg']}}}g"))) == 4

    def test_names_from_rows_are_escaped(self, admin_client) -> None:
        run = workflow_rows.diamond(name=SCRIPT)
        WorkflowStep.objects.filter(run=run, name="fetch").update(name=SCRIPT)
        for page_url in (url("workflowrun_changelist"), url("workflowrun_change", run.pk)):
            page = admin_client.get(page_url).content.decode()
            assert "<script>alert" not in page, page_url
            assert "&lt;script&gt;alert" in page, page_url

    def test_buttons_follow_the_state_and_the_permissions(self, run_operator, run_viewer) -> None:
        run = workflow_rows.diamond()
        page = run_operator.get(url("workflowrun_change", run.pk)).content.decode()
        assert url("workflowrun_cancel", run.pk) in page
        assert url("workflowrun_replay", run.pk) in page
        page = run_viewer.get(url("workflowrun_change", run.pk)).content.decode()
        assert url("workflowrun_cancel", run.pk) not in page
        assert url("workflowrun_replay", run.pk) not in page
        done = workflow_rows.finished()
        page = run_operator.get(url("workflowrun_change", done.pk)).content.decode()
        assert url("workflowrun_cancel", done.pk) not in page


class TestCancel:
    def test_cancel_a_running_run_from_its_page(self, run_operator) -> None:
        run = workflow_rows.diamond()
        response = run_operator.post(url("workflowrun_cancel", run.pk), follow=True)
        assert messages(response) == [
            f"Cancelled workflow run #{run.pk}: its steps not started are cancelled, its running "
            "steps' workers are asked to end them; the run ends cancelled when they have."
        ]
        steps = {s.name: s for s in WorkflowStep.objects.filter(run=run).select_related("job")}
        assert (steps["publish"].state, steps["publish"].reason) == ("cancelled", "run cancelled")
        assert steps["parse"].job.cancel_requested_at is not None  # its worker will end it
        assert WorkflowRun.objects.get(pk=run.pk).cancel_requested_at is not None
        entry = LogEntry.objects.get(object_id=str(run.pk))
        assert entry.change_message.startswith(f"Cancelled workflow run #{run.pk}")
        # The run is no longer offered a cancel once it has finished.
        page = run_operator.get(url("workflowrun_change", run.pk)).content.decode()
        assert "run cancelled" in page

    def test_cancel_selected_runs_cancels_running_and_refuses_finished(self, run_operator) -> None:
        running = workflow_rows.diamond()
        done = workflow_rows.finished()
        response = run_operator.post(
            url("workflowrun_changelist"),
            {"action": "cancel_runs", "_selected_action": [running.pk, done.pk]},
            follow=True,
        )
        said = messages(response)
        assert said[0].startswith(f"Cancelled workflow run #{running.pk}")
        assert (
            said[1] == f"Workflow run #{done.pk} is succeeded: only running runs can be cancelled."
        )
        assert WorkflowRun.objects.get(pk=running.pk).cancel_requested_at is not None
        assert WorkflowRun.objects.get(pk=done.pk).cancel_requested_at is None

    def test_cancelling_a_finished_run_says_so_and_changes_nothing(self, run_operator) -> None:
        run = workflow_rows.finished()
        response = run_operator.post(url("workflowrun_cancel", run.pk), follow=True)
        assert messages(response) == [
            f"Workflow run #{run.pk} is succeeded: only running runs can be cancelled."
        ]
        after = WorkflowRun.objects.get(pk=run.pk)
        assert (after.status, after.cancel_requested_at) == (RunStatus.SUCCEEDED, None)
        assert not LogEntry.objects.exists()

    def test_without_the_permission_it_is_refused(self, run_viewer) -> None:
        run = workflow_rows.diamond()
        assert run_viewer.post(url("workflowrun_cancel", run.pk)).status_code == 403
        assert WorkflowRun.objects.get(pk=run.pk).cancel_requested_at is None

    def test_get_is_not_allowed_and_unknown_ids_are_not_found(self, run_operator) -> None:
        run = workflow_rows.diamond()
        assert run_operator.get(url("workflowrun_cancel", run.pk)).status_code == 405
        for bad in ("999999", "x", "1" * 40):
            response = run_operator.post(f"/admin/django_leasejobs/workflowrun/{bad}/cancel/")
            assert response.status_code == 404, bad


class TestReplay:
    def test_replays_each_dead_step_through_its_dead_letter(self, run_operator) -> None:
        run = workflow_rows.diamond()
        letter = DeadLetter.objects.get()
        response = run_operator.post(url("workflowrun_replay", run.pk), follow=True)
        letter.refresh_from_db()
        assert letter.replayed_job_id is not None
        assert messages(response) == [
            f"Replayed step thumbs of workflow run #{run.pk} (dead letter #{letter.pk}) as job "
            f"#{letter.replayed_job_id}."
        ]
        assert LogEntry.objects.filter(object_id=str(run.pk)).count() == 1
        # The engine re-armed the step with its new job; its dependant waits for it again.
        thumbs = WorkflowStep.objects.get(run=run, name="thumbs")
        assert (thumbs.state, thumbs.job_id) == ("released", letter.replayed_job_id)
        assert WorkflowRun.objects.get(pk=run.pk).steps_failed == 0
        again = run_operator.post(url("workflowrun_replay", run.pk), follow=True)
        assert messages(again) == [f"Workflow run #{run.pk} has no dead step to replay."]

    def test_a_run_without_a_dead_step_says_so(self, run_operator) -> None:
        run = workflow_rows.finished()
        response = run_operator.post(url("workflowrun_replay", run.pk), follow=True)
        assert messages(response) == [f"Workflow run #{run.pk} has no dead step to replay."]
        assert not DeadLetter.objects.filter(replayed_job__isnull=False).exists()

    def test_without_the_permission_it_is_refused(self, run_viewer) -> None:
        run = workflow_rows.diamond()
        assert run_viewer.post(url("workflowrun_replay", run.pk)).status_code == 403
        assert DeadLetter.objects.get().replayed_job_id is None

    def test_replaying_needs_viewing_dead_letters_too(self) -> None:
        """As the dead-letter admin and the API ask: a replay reads the dead letters."""
        blind = staff_client("blind-replayer", [*VIEW_RUN, "replay_deadletter"])
        run = workflow_rows.diamond()
        page = blind.get(url("workflowrun_change", run.pk)).content.decode()
        assert url("workflowrun_replay", run.pk) not in page
        assert blind.post(url("workflowrun_replay", run.pk)).status_code == 403
        assert DeadLetter.objects.get().replayed_job_id is None
