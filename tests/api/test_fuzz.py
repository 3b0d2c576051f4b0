"""schemathesis fuzzes the OpenAPI document's operations against a live server.

Per operation: hypothesis makes valid and invalid requests from the document; each answer must
not be a 5xx, must have a status and content type the document lists, and must match the
documented schema. Statefully: scenarios chain calls along the document's links (enqueue, then
get / cancel / retry the job it returned; list dead letters, then replay one; pause, then
resume), each answer checked the same way. The caller holds every permission, so requests get
past authentication and reach the views' own checks.

The draw follows tests/conftest.py's Hypothesis profile: the same requests on every run (ci),
new ones in the fuzz pass (`bash .ci/run fuzz`). A request found answered wrongly is pinned in
FOUND, as a plain test every pass runs.
"""

from __future__ import annotations

import copy

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode, checks
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.api import schema
from django_leasejobs.models import DeadLetter, Job, Pause, Schedule, Status, WorkflowRun
from django_leasejobs.protocol import Failure
from django_leasejobs.upkeep import api_tokens as tokens

from .. import workflow_rows
from ..conftest import examples, shifted
from .conftest import ALL, make_user


def fuzzed_document() -> dict:
    """The document, with the enqueue's ``name`` narrowed to the test project's allow-list:
    random names are all 404, and the fuzzing should reach the enqueue's own checks."""
    document = copy.deepcopy(schema.document())
    names = ["testapp.jobs.add", "testapp.jobs.noop", "testapp.jobs.record"]
    properties = document["components"]["schemas"]["EnqueueRequest"]["properties"]
    properties["name"] = {"type": "string", "enum": names}
    return document


SCHEMA = schemathesis.openapi.from_dict(fuzzed_document())
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
]


STATEFUL_EXAMPLES = 60
LINKED = {
    ("GET /jobs/{job_id}/", 200),
    ("POST /jobs/{job_id}/cancel/", 200),
    ("POST /jobs/{job_id}/retry/", 200),
    ("GET /dead-letters/{dead_letter_id}/", 200),
    ("POST /dead-letters/{dead_letter_id}/replay/", 201),
    ("GET /schedules/{schedule_id}/occurrences/", 200),
    ("POST /pauses/resume/", 200),
    ("GET /workflows/{run_id}/", 200),
    ("POST /workflows/{run_id}/cancel/", 200),
}
"""Answers a call can only get with an id (or a pause) an earlier answer gave."""


@pytest.fixture
def secret(transactional_db, settings) -> str:
    # No worker runs here, so a fuzzed enqueue due a minute ago would make the health verdict a
    # (documented) 503 for its unserved queue, which not_a_server_error counts as a failure.
    settings.LEASEJOBS_HEALTH_MAX_UNSERVED_AGE = None
    user = make_user("fuzzer", ALL)
    return tokens.issue(user, name="fuzz")[1]


@pytest.mark.fuzz
@SCHEMA.parametrize()
@settings(
    # derandomize comes from the profile (tests/conftest.py): the same requests on every run
    # in CI's passes, random ones in the fuzz pass. schemathesis keeps a @settings value that
    # differs from Hypothesis' default, so derandomize=True here would make the fuzz pass
    # replay these very requests.
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_answers_as_documented(case, live_server, secret):
    case.call_and_validate(
        base_url=f"{live_server.url}/jobs/api",
        headers={"Authorization": f"Bearer {secret}"},
        checks=CHECKS,
    )


# Requests the fuzzing answered wrongly once, pinned: every pass sends them, whatever the draw.
# Each is (path, query) and the documented answer: 400 invalid_parameter naming the parameter.
FOUND = [
    # 500 on PostgreSQL, whose text cannot hold a NUL: the filter reached the query.
    pytest.param("jobs/", {"name": "\x00q"}, "name", id="GET /jobs/?name=%00q"),
]


@pytest.mark.parametrize(("path", "params", "field"), FOUND)
def test_requests_the_fuzzing_found_get_their_documented_answer(operator, path, params, field):
    status, body = operator.get(path, **params)
    answer = (status, body.get("code"), body.get("field"))
    assert answer == (400, "invalid_parameter", field), body


def stateful_document() -> dict:
    """``fuzzed_document``, with pauses naming a few real targets, so that the resume a pause
    links to finds the pause (a random name is refused or never paused), and replays editing
    the arguments to small integers (random JSON is mostly refused, and the chain ends)."""
    document = fuzzed_document()
    schemas = document["components"]["schemas"]
    pause = schemas["PauseRequest"]["properties"]
    pause["name"] = {"type": "string", "enum": ["mail", "default", "testapp.jobs.noop"]}
    replay = schemas["ReplayRequest"]["properties"]
    replay["args"] = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}}
    replay["kwargs"] = {"type": "object", "maxProperties": 0}
    return document


def make_rows() -> None:
    """A dead letter, a failed job, a schedule and a workflow run, so the list operations'
    links have rows to follow (replay, retry, occurrences, a run) from a scenario's first
    step."""
    dead = jobs.add.enqueue(1, 2, max_attempts=1)
    failed = jobs.add.enqueue(3, 4, max_attempts=5)
    Job.objects.filter(pk__in=[dead.pk, failed.pk]).update(run_at=shifted(-1))
    for claimed in protocol.claim("fuzz", batch=2):
        protocol.fail(claimed.pk, claimed.attempt, Failure("boom", "Traceback: boom"))
    assert DeadLetter.objects.count() == 1
    assert Job.objects.filter(status=Status.FAILED).count() == 1
    Schedule.objects.create(name="hourly", cron="0 * * * *", job="testapp.jobs.noop")
    workflow_rows.diamond()


def reset_rows() -> None:
    """Each scenario starts from the same rows: what one scenario did (a replay, a pause) must
    not change which links the next can follow, or hypothesis sees its generation change."""
    DeadLetter.objects.all().delete()
    Job.objects.all().delete()
    WorkflowRun.objects.all().delete()
    Pause.objects.all().delete()
    Schedule.objects.all().delete()
    make_rows()


@pytest.mark.fuzz
def test_chained_calls_answer_as_documented(live_server, secret):
    """Scenarios of a few calls each, every call after the first following a link of the one
    before; each answer checked as above. Valid requests only: the invalid ones are the
    per-operation test's; here each step should reach a row the scenario made or found."""
    base_url = f"{live_server.url}/jobs/api"
    seen: set[tuple[str, int]] = set()
    document = schemathesis.openapi.from_dict(stateful_document())
    document.config.generation.update(modes=[GenerationMode.POSITIVE])

    class Workflow(document.as_state_machine()):  # type: ignore[misc]
        def setup(self):
            reset_rows()

        def get_call_kwargs(self, case):
            return {"base_url": base_url, "headers": {"Authorization": f"Bearer {secret}"}}

        def after_call(self, response, case):
            super().after_call(response, case)
            seen.add((case.operation.label, response.status_code))

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs)

    Workflow.run(
        settings=settings(
            max_examples=examples(STATEFUL_EXAMPLES),
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
    # Reached only through links: a random id is never a row the test made.
    assert ("GET /jobs/{job_id}/", 200) in seen, sorted(seen)
    assert len(LINKED & seen) >= 3, sorted(seen)
