"""The HTTP API resolves a renamed job's former names (``@job(aliases=)``): an enqueue under
one is stored under the job's name, and the list's name filter finds rows under either."""

from __future__ import annotations

import pytest
from django.test import override_settings

from django_leasejobs import job
from django_leasejobs.core import registry
from django_leasejobs.models import Job

pytestmark = pytest.mark.django_db

OLD = "tests.api.old_receipt"
NEW = "tests.api.email_receipt"


def email_receipt(order_id: int) -> None:
    pass


@pytest.fixture(autouse=True)
def renamed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))
    job(name=NEW, aliases=[OLD])(email_receipt)


@override_settings(LEASEJOBS_API_JOBS=[NEW])
def test_an_enqueue_under_the_former_name_reaches_the_job(operator) -> None:
    status, body = operator.post("jobs/", {"name": OLD, "args": [7]})
    assert status == 201, body
    assert body["name"] == NEW
    assert Job.objects.get(pk=body["id"]).name == NEW


def test_the_name_filter_finds_rows_under_either_name(operator) -> None:
    old = Job.objects.create(name=OLD, args=[1])
    new = Job.objects.create(name=NEW, args=[2])
    for name in (OLD, NEW):
        status, body = operator.get("jobs/", name=name)
        assert status == 200
        assert sorted(r["id"] for r in body["results"]) == [old.pk, new.pk]
