"""schemathesis fuzzes every operation of the OpenAPI document against a live server.

Per operation: hypothesis makes valid and invalid requests from the document; each answer must
not be a 5xx, must have a status and content type the document lists, and must match the
documented schema. The caller holds every permission, so requests get past authentication
and reach the views' own checks.
"""

from __future__ import annotations

import copy

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from django_leasejobs.api import schema, tokens

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


@pytest.fixture
def secret(transactional_db) -> str:
    user = make_user("fuzzer", ALL)
    return tokens.issue(user, name="fuzz")[1]


@SCHEMA.parametrize()
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_answers_as_documented(case, live_server, secret):
    case.call_and_validate(
        base_url=f"{live_server.url}/jobs/api",
        headers={"Authorization": f"Bearer {secret}"},
        checks=CHECKS,
    )
