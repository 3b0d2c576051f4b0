"""The admin shows a job's version beside its handler's, and a replay with edited arguments
starts from the arguments upgraded to the handler's version, at which they are stored."""

from __future__ import annotations

from typing import Any

import pytest

from django_leasejobs import job, protocol
from django_leasejobs.core import registry
from django_leasejobs.models import DeadLetter, Job
from django_leasejobs.protocol import Failure, Outcome

from .conftest import claim, url
from .test_jobs import _field_row

pytestmark = pytest.mark.django_db

NAME = "tests.admin.versions.ship"


def ship(order: dict[str, Any]) -> None:
    pass


def to_v2(args: list[Any], kwargs: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    return [{"id": args[0]}], kwargs


@pytest.fixture(autouse=True)
def version_2(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    monkeypatch.setattr(registry, "_late", set(registry._late))
    return job(name=NAME, version=2, upgrade={1: to_v2}, aliases=["tests.admin.old_ship"])(ship)


def dead(name: str = NAME, version: int = 1, args: Any = (7,)) -> DeadLetter:
    row = Job.objects.create(name=name, version=version, args=list(args), max_attempts=1)
    claimed = claim(row)
    assert protocol.fail(row.pk, claimed.attempt, Failure("boom")) is Outcome.DEAD
    return DeadLetter.objects.get(job_id=row.pk)


def version_row(admin_client, job_id: int) -> str:
    page = admin_client.get(url("job_change", job_id)).content.decode()
    return _field_row(page, "Version")


def test_the_detail_shows_the_version_beside_the_handlers(admin_client) -> None:
    current = Job.objects.create(name=NAME, version=2, args=[{"id": 1}])
    older = Job.objects.create(name=NAME, version=1, args=[1])
    newer = Job.objects.create(name=NAME, version=3, args=[1])
    renamed = Job.objects.create(name="tests.admin.old_ship", version=2, args=[{"id": 1}])
    assert "2 (the handler&#x27;s version)" in version_row(admin_client, current.pk)
    assert "the handler runs version 2: a worker upgrades" in version_row(admin_client, older.pk)
    assert "newer than version 2" in version_row(admin_client, newer.pk)
    assert "lists this name in its aliases" in version_row(admin_client, renamed.pk)


def test_the_replay_form_shows_older_arguments_upgraded(admin_client) -> None:
    letter = dead()
    page = admin_client.get(url("deadletter_replay", letter.pk)).content.decode()
    assert "written for version 1 of the job" in page
    assert "shown upgraded to version 2" in page
    assert "&quot;id&quot;: 7" in page


def test_edited_arguments_are_stored_at_the_handlers_version(admin_client) -> None:
    letter = dead()
    response = admin_client.post(
        url("deadletter_replay", letter.pk), {"args": '[{"id": 8}]', "kwargs": "{}"}
    )
    assert response.status_code == 302
    letter.refresh_from_db()
    replayed = Job.objects.get(pk=letter.replayed_job_id)
    assert (replayed.name, replayed.version, replayed.args) == (NAME, 2, [{"id": 8}])


def test_a_replay_as_is_keeps_the_version_its_arguments_have(admin_client) -> None:
    letter = dead(name="tests.admin.old_ship")
    admin_client.post(url("deadletter_replay", letter.pk), {"as_is": "1"})
    letter.refresh_from_db()
    replayed = Job.objects.get(pk=letter.replayed_job_id)
    assert (replayed.name, replayed.version, replayed.args) == (NAME, 1, [7])
