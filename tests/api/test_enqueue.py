"""Enqueue over HTTP: one, many, dedupe, the allow-list, and bad input on every field."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from testapp import jobs

from django_leasejobs.core import fairness, json_values, validation
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job


def test_enqueue_returns_the_job_201(operator):
    status, body = operator.post(
        "jobs/",
        {
            "name": "testapp.jobs.add",
            "args": [1, 2],
            "priority": 5,
            "queue": "api",
            "max_attempts": 2,
        },
    )
    assert status == 201
    assert operator.last["LeaseJobs-Deduplicated"] == "false"
    job = Job.objects.get(pk=body["id"])
    assert (job.name, job.args, job.priority, job.queue, job.max_attempts) == (
        "testapp.jobs.add",
        [1, 2],
        5,
        "api",
        2,
    )
    assert body["status"] == "pending"
    assert body["errors"] == []
    entry = LogEntry.objects.get(object_id=str(job.pk), action_flag=ADDITION)
    assert entry.user_id == operator.user.pk
    assert "API" in entry.change_message


def test_enqueue_with_run_at_and_delay(operator):
    status, body = operator.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "run_at": "2030-01-02T03:04:05Z"}
    )
    assert status == 201
    assert body["run_at"] == "2030-01-02T03:04:05Z"
    status, body = operator.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "delay": 3600}
    )
    job = Job.objects.get(pk=body["id"])
    assert status == 201
    assert (job.run_at - job.created_at).total_seconds() == pytest.approx(3600, abs=5)


def test_enqueue_with_a_fair_key_and_weight(operator):
    status, body = operator.post(
        "jobs/",
        {"name": "testapp.jobs.add", "args": [1, 2], "fair_key": "acme", "fair_weight": 3},
    )
    assert status == 201
    assert body["fair_key"] == "acme"
    job = Job.objects.get(pk=body["id"])
    assert (job.fair_key, job.fair_weight) == ("acme", 3)
    assert job.fair_at == job.run_at
    status, body = operator.post(
        "jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "fair_weight": 3}
    )
    assert (status, body["code"], Job.objects.count()) == (400, "invalid", 1)
    assert "fair_weight needs a fair_key" in body["message"]


def test_dedupe_hit_is_200_with_the_live_job(operator):
    first = operator.post("jobs/", {"name": "testapp.jobs.add", "args": [1, 2], "dedupe_key": "k"})
    again = operator.post("jobs/", {"name": "testapp.jobs.add", "args": [3, 4], "dedupe_key": "k"})
    assert first[0] == 201
    assert again[0] == 200
    assert operator.last["LeaseJobs-Deduplicated"] == "true"
    assert again[1]["id"] == first[1]["id"]
    assert again[1]["args"] == [1, 2]
    assert Job.objects.count() == 1


def test_job_marked_api_true_is_allowed(operator):
    status, body = operator.post("jobs/", {"name": "testapp.jobs.noop"})
    assert status == 201
    assert body["name"] == "testapp.jobs.noop"


@pytest.mark.parametrize(
    "name",
    [
        "testapp.jobs.flaky",
        "no.such.job",
        "os.system",
        "django_leasejobs.protocol.cancel",
        "testapp.jobs.add\ud800",
    ],
)
def test_names_off_the_allow_list_are_404_even_for_a_superuser(db, caller, name):
    admin = caller()
    admin.user.is_superuser = True
    admin.user.save()
    status, body = admin.post("jobs/", {"name": name})
    assert status == 404
    assert body == {
        "code": "unknown_job",
        "message": f"No job {name!r} may be enqueued through this API.",
        "field": "name",
    }
    assert not Job.objects.exists()


def test_allow_list_setting_is_read_at_request_time(operator, settings):
    settings.LEASEJOBS_API_JOBS = []
    assert operator.post("jobs/", {"name": "testapp.jobs.add", "args": [1, 2]})[0] == 404
    settings.LEASEJOBS_API_JOBS = ["testapp.jobs.flaky"]
    assert operator.post("jobs/", {"name": "testapp.jobs.flaky"})[0] == 201


def python_message(call) -> str:
    with pytest.raises(JobValidationError) as info:
        call()
    return str(info.value)


BAD = [
    ("args", "nope", lambda: json_values.check_payload("nope", {})),
    ("args", {"a": 1}, lambda: json_values.check_payload({"a": 1}, {})),
    ("args", ["a\u0000b"], lambda: json_values.check_payload(["a\u0000b"], {})),
    ("args", [1e300], lambda: json_values.check_payload([1e300], {})),
    ("kwargs", [1], lambda: json_values.check_payload([], [1])),
    ("kwargs", {"x": "\ud800"}, lambda: json_values.check_payload([], {"x": "\ud800"})),
    ("priority", 101, lambda: validation.check_priority(101)),
    ("priority", "high", lambda: validation.check_priority("high")),
    ("priority", True, lambda: validation.check_priority(True)),
    ("priority", 1.5, lambda: validation.check_priority(1.5)),
    ("queue", "", lambda: validation.check_queue("")),
    ("queue", "a b", lambda: validation.check_queue("a b")),
    ("queue", 7, lambda: validation.check_queue(7)),
    ("queue", "a\ud800", lambda: validation.check_queue("a\ud800")),
    ("queue", "default\n", lambda: validation.check_queue("default\n")),
    ("max_attempts", 0, lambda: validation.check_max_attempts(0)),
    ("max_attempts", 2**31, lambda: validation.check_max_attempts(2**31)),
    ("max_attempts", "3", lambda: validation.check_max_attempts("3")),
    ("dedupe_key", "", lambda: validation.check_dedupe_key("")),
    ("dedupe_key", "x" * 201, lambda: validation.check_dedupe_key("x" * 201)),
    ("dedupe_key", 5, lambda: validation.check_dedupe_key(5)),
    ("dedupe_key", "k\ud800", lambda: validation.check_dedupe_key("k\ud800")),
    ("fair_key", "", lambda: fairness.check_key("")),
    ("fair_key", "x" * 201, lambda: fairness.check_key("x" * 201)),
    ("fair_key", 5, lambda: fairness.check_key(5)),
    ("fair_weight", 0, lambda: fairness.check_weight(0)),
    ("fair_weight", 101, lambda: fairness.check_weight(101)),
    ("fair_weight", "2", lambda: fairness.check_weight("2")),
    ("delay", -1, lambda: validation.check_run_at(None, -1)),
    ("delay", "soon", lambda: validation.check_run_at(None, "soon")),
    ("delay", True, lambda: validation.check_run_at(None, True)),
    # A JSON number past a float's range: float() raised OverflowError (a 500).
    ("delay", 10**400, lambda: validation.check_run_at(None, 10**400)),
    ("delay", -(10**400), lambda: validation.check_run_at(None, -(10**400))),
]


@pytest.mark.parametrize(("field", "value", "python"), BAD)
def test_bad_input_on_every_field_gets_the_python_message(operator, field, value, python):
    status, body = operator.post("jobs/", {"name": "testapp.jobs.add", field: value})
    assert status == 400
    assert body == {"code": "invalid", "message": python_message(python), "field": field}
    assert not Job.objects.exists()


def test_naive_run_at_gets_the_python_message(operator):
    import datetime as dt

    naive = dt.datetime(2030, 1, 1)
    status, body = operator.post(
        "jobs/", {"name": "testapp.jobs.add", "run_at": "2030-01-01T00:00:00"}
    )
    assert (status, body["field"]) == (400, "run_at")
    assert body["message"] == python_message(lambda: validation.check_run_at(naive, None))


@pytest.mark.parametrize("value", ["tomorrow", 12, "2030-13-01T00:00:00Z", ["2030-01-01"]])
def test_run_at_that_is_not_a_date_is_refused(operator, value):
    status, body = operator.post("jobs/", {"name": "testapp.jobs.add", "run_at": value})
    assert (status, body["code"], body["field"]) == (400, "invalid", "run_at")


def test_run_at_and_delay_together_are_refused(operator):
    status, body = operator.post(
        "jobs/", {"name": "testapp.jobs.add", "run_at": "2030-01-01T00:00:00Z", "delay": 5}
    )
    assert (status, body["message"]) == (400, "Give run_at or delay, not both.")


def test_payload_over_the_cap_is_refused(operator, settings):
    settings.LEASEJOBS_MAX_PAYLOAD_BYTES = 100
    status, body = operator.post("jobs/", {"name": "testapp.jobs.add", "args": ["x" * 200]})
    assert status == 400
    assert "over LEASEJOBS_MAX_PAYLOAD_BYTES" in body["message"]


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"args": [1]}, "invalid", "name"),
        ({"name": 5}, "invalid", "name"),
        ({"name": "testapp.jobs.add", "color": "red"}, "unknown_field", "color"),
        ([], "invalid", None),
        ("text", "invalid", None),
    ],
)
def test_malformed_documents(operator, body, code, field):
    status, answer = operator.post("jobs/", body)
    assert (status, answer["code"], answer["field"]) == (400, code, field)


@pytest.mark.parametrize("raw", ["{", "[1,", "NaN", '{"name": Infinity}', "\xff"])
def test_invalid_json_is_400(operator, raw):
    status, body = operator.post("jobs/", raw=raw)
    assert (status, body["code"]) == (400, "invalid_json")


@pytest.mark.parametrize(
    ("number", "code"),
    [
        ("1e400", "invalid"),  # read as infinity
        ("1" + "0" * 400, "invalid"),  # an int no float holds
        ("9" * 4301, "invalid_json"),  # more digits than Python reads
    ],
)
def test_a_delay_past_any_range_is_400(operator, number, code):
    status, body = operator.post("jobs/", raw=f'{{"name": "testapp.jobs.add", "delay": {number}}}')
    assert (status, body["code"]) == (400, code)
    assert not Job.objects.exists()


def test_body_must_be_json(operator):
    response = operator.client.post(
        "/jobs/api/jobs/", {"name": "x"}, headers=operator.headers()
    )  # form-encoded
    assert (response.status_code, response.json()["code"]) == (415, "unsupported_media_type")


def test_body_over_the_limit_is_413(operator, settings):
    settings.LEASEJOBS_API_MAX_BODY_BYTES = 1024
    status, body = operator.post("jobs/", {"name": "testapp.jobs.add", "args": ["x" * 2000]})
    assert (status, body["code"]) == (413, "body_too_large")


# --------------------------------------------------------------------------- many


def test_enqueue_many_in_order(operator):
    items = [
        {"name": "testapp.jobs.add", "args": [1, 2]},
        {"name": "testapp.jobs.add", "args": [3, 4], "priority": 9},
        {"name": "testapp.jobs.noop", "dedupe_key": "once"},
        {"name": "testapp.jobs.add", "args": [5, 6]},
    ]
    status, body = operator.post("jobs/batch/", {"jobs": items})
    assert status == 201
    assert [item["job"]["args"] for item in body["jobs"]] == [[1, 2], [3, 4], [], [5, 6]]
    assert [item["deduplicated"] for item in body["jobs"]] == [False] * 4
    assert Job.objects.count() == 4
    status, body = operator.post("jobs/batch/", {"jobs": [items[2]]})
    assert status == 200
    assert body["jobs"][0]["deduplicated"] is True


def test_enqueue_many_is_all_or_nothing(operator):
    items = [{"name": "testapp.jobs.add", "args": [1, 2]}] * 3 + [
        {"name": "testapp.jobs.add", "priority": 1000}
    ]
    status, body = operator.post("jobs/batch/", {"jobs": items})
    assert (status, body["field"]) == (400, "jobs[3].priority")
    assert not Job.objects.exists()
    items[3] = {"name": "testapp.jobs.flaky"}
    status, body = operator.post("jobs/batch/", {"jobs": items})
    assert (status, body["code"], body["field"]) == (404, "unknown_job", "jobs[3].name")
    assert not Job.objects.exists()


def test_max_attempts_is_capped_by_the_api_setting(operator, settings):
    """A caller's job may not retry practically for ever: 400 naming the setting."""
    too_many = {"name": "testapp.jobs.add", "args": [1, 2], "max_attempts": 101}
    status, body = operator.post("jobs/", too_many)
    assert status == 400
    assert body == {
        "code": "invalid",
        "message": "max_attempts must be at most 100 through the API "
        "(LEASEJOBS_API_MAX_ATTEMPTS), not 101.",
        "field": "max_attempts",
    }
    status, body = operator.post("jobs/batch/", {"jobs": [{"name": "testapp.jobs.noop"}, too_many]})
    assert (status, body["code"], body["field"]) == (400, "invalid", "jobs[1].max_attempts")
    assert "LEASEJOBS_API_MAX_ATTEMPTS" in body["message"]
    assert not Job.objects.exists()
    status, body = operator.post("jobs/", {**too_many, "max_attempts": 100})
    assert (status, body["max_attempts"]) == (201, 100)
    settings.LEASEJOBS_API_MAX_ATTEMPTS = 5
    assert operator.post("jobs/", {**too_many, "max_attempts": 6})[1]["field"] == "max_attempts"
    assert operator.post("jobs/", {**too_many, "max_attempts": 5})[0] == 201


def test_python_callers_are_not_capped_by_the_api_setting(db):
    """Trusted code: only the column's own limit applies."""
    assert jobs.add.enqueue(1, 2, max_attempts=2**31 - 1).max_attempts == 2**31 - 1


def test_enqueue_many_batch_limit(operator, settings):
    settings.LEASEJOBS_API_MAX_BATCH = 2
    status, body = operator.post("jobs/batch/", {"jobs": [{"name": "testapp.jobs.noop"}] * 3})
    assert (status, body["code"], body["field"]) == (400, "batch_too_large", "jobs")
    for bad in ({"jobs": []}, {"jobs": "x"}, {}, {"jobs": [1]}):
        assert operator.post("jobs/batch/", bad)[0] == 400
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "option", "template"),
    [
        ({"items": []}, "concurrency_key", "first:{items[0]}"),
        ({"items": {"a": 1}}, "concurrency_key", "first:{items[0]}"),
        ({"items": 5}, "concurrency_key", "first:{items[0]}"),
        ({"items": [1], "n": "x"}, "rate_key", "n:{n:d}"),
        ({"items": [1], "n": None}, "rate_key", "n:{n:d}"),
    ],
)
def test_limit_keys_the_arguments_cannot_fill_are_400(operator, settings, kwargs, option, template):
    settings.LEASEJOBS_API_JOBS = ["testapp.jobs.keyed_by_shape"]
    item = {"name": "testapp.jobs.keyed_by_shape", "kwargs": kwargs}
    status, body = operator.post("jobs/", item)
    assert (status, body["code"]) == (400, "invalid")
    assert body["message"].startswith(f"{option} {template!r} cannot be filled: ")
    status, body = operator.post("jobs/batch/", {"jobs": [item]})
    assert (status, body["code"]) == (400, "invalid")
    assert body["message"].startswith(f"{option} {template!r} cannot be filled: ")
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("item", "field", "problem"),
    [
        ({}, "args", "missing a required argument: 'a'"),
        ({"args": [1, 2, 3]}, "args", "too many positional arguments"),
        ({"args": [1, 2], "kwargs": {"c": 3}}, "kwargs", "got an unexpected keyword argument 'c'"),
        ({"args": [1], "kwargs": {"a": 2}}, "kwargs", "multiple values for argument 'a'"),
    ],
)
def test_arguments_the_job_cannot_take_are_400_not_a_500(operator, item, field, problem):
    """The handler is never called with them: refused at enqueue, one item or a batch."""
    message = (
        f"Job 'testapp.jobs.add' cannot take these arguments: {problem} (its signature: add(a, b))."
    )
    status, body = operator.post("jobs/", {"name": "testapp.jobs.add", **item})
    assert status == 400
    assert body == {"code": "invalid", "message": message, "field": field}
    good = {"name": "testapp.jobs.add", "args": [1, 2]}
    status, body = operator.post(
        "jobs/batch/", {"jobs": [good, {"name": "testapp.jobs.add", **item}]}
    )
    assert status == 400
    assert body == {"code": "invalid", "message": message, "field": f"jobs[1].{field}"}
    assert not Job.objects.exists()
