"""The checks of a queue database of its own (``leasejobs.E015``, ``E016``, ``E017``).

The suite has one database, so these read the checks with ``default`` as the queue database
and with routers that send the app's models elsewhere; a project with two databases, where
``E017`` fires, is tests/acceptance/test_queue_database.py.
"""

from __future__ import annotations

import pytest
from django.core import checks as django_checks
from django.test import override_settings

from django_leasejobs.checks import routing as routing_checks
from django_leasejobs.checks import settings as setting_checks


def ids(messages: list[django_checks.CheckMessage]) -> list[str]:
    return [message.id or "" for message in messages]


class EveryModelToReplica:
    """A project's own router that answers for every model, placed before JobsRouter."""

    def db_for_read(self, model: object, **hints: object) -> str:
        return "replica"

    def db_for_write(self, model: object, **hints: object) -> str:
        return "replica"


JOBS_ROUTER = "django_leasejobs.routers.JobsRouter"


@override_settings(LEASEJOBS_DATABASE="default", DATABASE_ROUTERS=[])
def test_the_queue_database_where_the_routers_send_the_models_anyway_is_fine() -> None:
    assert routing_checks.check_router() == []


@override_settings(LEASEJOBS_DATABASE="default", DATABASE_ROUTERS=[JOBS_ROUTER])
def test_the_setting_with_its_router_is_fine() -> None:
    assert routing_checks.check_router() == []


@pytest.mark.parametrize(
    ("routers", "why"),
    [
        ([f"{__name__}.EveryModelToReplica"], "it is not in DATABASE_ROUTERS"),
        ([f"{__name__}.EveryModelToReplica", JOBS_ROUTER], "a router before it answers first"),
    ],
)
def test_e015_the_setting_where_the_routers_send_the_models_elsewhere(
    routers: list[str], why: str
) -> None:
    with override_settings(LEASEJOBS_DATABASE="default", DATABASE_ROUTERS=routers):
        messages = routing_checks.check_router()
    assert ids(messages) == ["leasejobs.E015"]
    assert "LEASEJOBS_DATABASE is 'default' but Django's routers send" in messages[0].msg
    assert "'replica'" in messages[0].msg
    assert why in messages[0].msg


@override_settings(DATABASE_ROUTERS=[JOBS_ROUTER])
def test_e016_the_router_without_the_setting() -> None:
    messages = routing_checks.check_router()
    assert ids(messages) == ["leasejobs.E016"]
    assert "LEASEJOBS_DATABASE is not set" in messages[0].msg


@override_settings(LEASEJOBS_DATABASE="nowhere")
def test_a_bad_queue_database_is_e001_alone() -> None:
    assert routing_checks.check_router() == []
    assert routing_checks.check_queue_migrated(databases=["default"]) == []
    assert "LEASEJOBS_DATABASE is 'nowhere'" in " ".join(
        m.msg for m in setting_checks.check_settings()
    )


@pytest.mark.django_db
@override_settings(LEASEJOBS_DATABASE="default", DATABASE_ROUTERS=[JOBS_ROUTER])
def test_e017_is_silent_on_the_queue_database_itself() -> None:
    # Checked on itself an unmigrated queue database is W010, so `migrate --database` runs;
    # E017 (seen from another database) is in tests/acceptance/test_queue_database.py.
    assert routing_checks.check_queue_migrated(databases=["default"]) == []
    assert routing_checks.check_queue_migrated(databases=[]) == []


@override_settings(LEASEJOBS_READ_DATABASES={"default": "default"})
def test_e018_is_silent_for_a_replica_of_the_queue_database() -> None:
    # A replica keyed by another database than the queue database's needs two aliases:
    # tests/acceptance/test_read_replicas.py runs a project that has them.
    assert routing_checks.check_read_databases() == []


@override_settings(LEASEJOBS_READ_DATABASES={"default": "jobs_replica"})
def test_a_replica_not_in_databases_is_e001_alone() -> None:
    assert routing_checks.check_read_databases() == []
    assert "names 'jobs_replica'" in " ".join(m.msg for m in setting_checks.check_settings())
