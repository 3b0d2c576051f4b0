"""``JobsRouter``: the app's models to ``LEASEJOBS_DATABASE``, nothing said about other apps.

The router's answers are read from Django's own router (``django.db.router``) with the router
installed, as ``migrate`` and the admin read them. The suite has one database, so the queue
database here is ``default`` under another name's rules (another alias is refused by the
setting); tests/acceptance/test_queue_database.py runs a project with two.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import router
from django.test import override_settings

from django_leasejobs.db.routing import JobsRouter
from django_leasejobs.models import ApiToken, Job, Schedule, WorkflowStep
from django_leasejobs.models.databases import (
    job_database,
    probe_database,
    read_database,
    replica_database,
    token_database,
)

ROUTER = "django_leasejobs.routers.JobsRouter"
APP = "django_leasejobs"


@pytest.fixture
def routed():
    with override_settings(DATABASE_ROUTERS=[ROUTER], LEASEJOBS_DATABASE="default"):
        yield JobsRouter()


def test_the_app_s_models_go_to_the_queue_database(routed: JobsRouter) -> None:
    for model in (Job, Schedule, WorkflowStep, WorkflowStep.parents.through):
        assert routed.db_for_read(model) == "default"
        assert routed.db_for_write(model) == "default"
    assert router.db_for_write(Job) == "default"


def test_other_apps_and_api_tokens_are_left_to_the_other_routers(routed: JobsRouter) -> None:
    for model in (get_user_model(), ContentType, ApiToken):
        assert routed.db_for_read(model) is None
        assert routed.db_for_write(model) is None
    assert routed.allow_migrate("default", "auth", model_name="user") is None
    assert routed.allow_migrate("elsewhere", "auth") is None


def test_the_app_s_tables_are_migrated_only_in_the_queue_database(routed: JobsRouter) -> None:
    assert routed.allow_migrate("default", APP, model_name="job") is True
    assert routed.allow_migrate("default", APP) is True  # a data step, which names no model
    assert routed.allow_migrate("elsewhere", APP, model_name="job") is False
    assert routed.allow_migrate("elsewhere", APP) is False
    # API tokens point at users: their table is made where the user model's is.
    assert routed.allow_migrate("default", APP, model_name="apitoken") is True
    assert routed.allow_migrate("elsewhere", APP, model_name="apitoken") is False


def test_relations_between_the_app_s_rows_only(routed: JobsRouter) -> None:
    job, schedule = Job(name="x"), Schedule(name="s")
    assert routed.allow_relation(job, schedule) is True
    assert routed.allow_relation(job, get_user_model()(username="u")) is None
    assert routed.allow_relation(ApiToken(), get_user_model()(username="u")) is None


def test_without_the_setting_the_router_has_no_opinion() -> None:
    with override_settings(DATABASE_ROUTERS=[ROUTER]):
        routed = JobsRouter()
        assert routed.db_for_write(Job) is None
        assert routed.allow_migrate("default", APP, model_name="job") is None


def test_one_function_names_the_database(routed: JobsRouter) -> None:
    assert job_database() == read_database() == token_database() == "default"


def test_a_project_with_one_database_is_unchanged() -> None:
    assert job_database() == read_database() == token_database() == "default"


def test_without_a_replica_the_read_side_reads_the_queue_database() -> None:
    assert replica_database() is None
    assert replica_database("default") is None
    assert read_database("default") == "default"


@override_settings(LEASEJOBS_READ_DATABASES={"default": "default"})
def test_the_replica_of_the_queue_database_is_the_read_side_s() -> None:
    # The suite has one database: its own replica here (a no-op mapping, allowed); a project
    # with a replica alias is tests/acceptance/test_read_replicas.py.
    assert replica_database() == "default"
    assert read_database() == "default"
    assert job_database() == "default"


def test_a_verdict_reads_the_read_side_without_a_replica() -> None:
    assert probe_database() == read_database() == "default"


@override_settings(LEASEJOBS_READ_DATABASES={"default": "default"})
def test_a_verdict_reads_the_queue_database_with_a_replica() -> None:
    assert probe_database() == job_database() == "default"
