"""Migrations 0004, 0005 and 0009 leave the job table with its indexes, and go back and forth;
0006 fingerprints the dead letters already there; 0010 adds the cancel request column."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = "django_leasejobs_job"


def _latest() -> str:
    """The app's newest migration (whichever it is: later ones must stay applied)."""
    (leaf,) = MigrationLoader(None).graph.leaf_nodes("django_leasejobs")
    return leaf[1]


LATEST = _latest()
UNIQUE_KEYS = ("leasejobs_live_dedupe", "leasejobs_one_job_per_occurrence")


def _indexes() -> dict[str, Any]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, TABLE)
    return {
        name: info
        for name, info in constraints.items()
        if (info["index"] or info["unique"]) and not info["primary_key"]
    }


def _index_sql(name: str) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        elif connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [name])
        else:
            return ""  # MySQL/MariaDB keep no index condition
        return str(cursor.fetchone()[0])


def _assert_lean() -> None:
    indexes = _indexes()
    by_columns = {tuple(info["columns"]): name for name, info in indexes.items()}
    assert ("name",) not in by_columns
    assert ("schedule_id",) not in by_columns
    assert ("schedule_id", "occurrence_at") in by_columns, "the foreign key's index"
    assert by_columns.get(("status", "finished_at")) == "leasejobs_finished"
    if connection.vendor != "mysql":
        assert "WHERE" in _index_sql("leasejobs_finished").upper()
    for name in UNIQUE_KEYS:
        assert indexes[name]["unique"], name
    if connection.vendor == "postgresql":
        assert "WHERE (live_dedupe_key IS NOT NULL)" in _index_sql("leasejobs_live_dedupe")
        assert "WHERE (schedule_id IS NOT NULL)" in _index_sql("leasejobs_one_job_per_occurrence")


def _migrate(target: str) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([("django_leasejobs", target)])


def test_the_job_table_has_the_lean_indexes() -> None:
    _assert_lean()


def test_0004_goes_back_to_the_old_indexes_and_forward_again() -> None:
    _migrate("0003_job_task_backend")
    try:
        by_columns = {tuple(info["columns"]) for info in _indexes().values()}
        assert ("name",) in by_columns
        if connection.vendor != "mysql":  # InnoDB's foreign key used the unique index
            assert ("schedule_id",) in by_columns
            assert "WHERE" not in _index_sql("leasejobs_finished").upper()
    finally:
        _migrate(LATEST)
    _assert_lean()


def test_0005_goes_back_to_full_unique_constraints_and_forward_again() -> None:
    _migrate("0004_lean_job_indexes")
    try:
        for name in UNIQUE_KEYS:
            assert _indexes()[name]["unique"], name
            if connection.vendor == "postgresql":  # elsewhere 0005 changes nothing
                assert "WHERE" not in _index_sql(name).upper(), name
    finally:
        _migrate(LATEST)
    _assert_lean()


def _assert_limits() -> None:
    indexes = _indexes()
    by_columns = {tuple(info["columns"]): name for name, info in indexes.items()}
    assert by_columns.get(("concurrency_key", "status")) == "leasejobs_running_key"
    if connection.vendor != "mysql":  # MySQL keeps no index condition: nothing to split
        claimable = _index_sql("leasejobs_claimable").replace('"', "")
        assert "concurrency_key IS NULL" in claimable
        assert "rate_key IS NULL" in claimable
        assert "concurrency_key IS NOT NULL" in _index_sql("leasejobs_limited").replace('"', "")


def test_0008_splits_the_claimable_index_and_goes_back() -> None:
    _assert_limits()
    _migrate("0005_partial_unique_keys")
    try:
        by_columns = {tuple(info["columns"]) for info in _indexes().values()}
        assert ("concurrency_key", "status") not in by_columns
        assert "leasejobs_limited" not in _indexes()
        if connection.vendor != "mysql":
            assert "concurrency_key" not in _index_sql("leasejobs_claimable")
    finally:
        _migrate(LATEST)
    _assert_limits()


def _columns() -> set[str]:
    with connection.cursor() as cursor:
        return {c.name for c in connection.introspection.get_table_description(cursor, TABLE)}


def test_0010_adds_the_cancel_request_column_and_removes_it_going_back() -> None:
    assert "cancel_requested_at" in _columns()
    _migrate("0009_limits")
    try:
        assert "cancel_requested_at" not in _columns()
    finally:
        _migrate(LATEST)
    assert "cancel_requested_at" in _columns()
    _assert_lean()


def _assert_search_indexes() -> None:
    indexes = _indexes()
    assert indexes["leasejobs_name"]["columns"] == ["name", "id"]
    if connection.vendor == "mysql":  # leasejobs_running_key leads with the key, unconditioned
        assert "leasejobs_concurrency_key" not in indexes
    else:
        assert indexes["leasejobs_concurrency_key"]["columns"] == ["concurrency_key"]
        assert "concurrency_key IS NOT NULL" in _index_sql("leasejobs_concurrency_key").replace(
            '"', ""
        )


def test_0015_adds_the_search_indexes_and_removes_them_going_back() -> None:
    _assert_search_indexes()
    _migrate("0014_job_waiting_index")
    try:
        assert "leasejobs_name" not in _indexes()
        assert "leasejobs_concurrency_key" not in _indexes()
    finally:
        _migrate(LATEST)
    _assert_search_indexes()
    _assert_lean()


def test_the_unique_keys_still_refuse_a_second_live_job() -> None:
    """Partial or not, the indexes refuse what the constraints refused, and nothing else."""
    from django.db import IntegrityError, transaction

    from django_leasejobs.models import Job

    def row(**fields: Any) -> Job:
        return Job(name="testapp.jobs.noop", args=[], kwargs={}, **fields)

    Job.objects.bulk_create([row(), row(), row(live_dedupe_key=None)])  # NULLs never conflict
    row(live_dedupe_key="k").save()
    with pytest.raises(IntegrityError), transaction.atomic():
        row(live_dedupe_key="k").save()
    assert Job.objects.count() == 4


def test_0006_fingerprints_the_dead_letters_already_there() -> None:
    from django_leasejobs import fingerprints
    from django_leasejobs.models import DeadLetter

    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/shop/jobs.py", line 7, in charge\n'
        "    raise ValueError(order)\n"
        "ValueError: order 17\n"
    )
    histories = [
        [{"error": f"ValueError: order {n}", "traceback": traceback, "kind": "error"}]
        for n in range(3)
    ]
    histories.append([{"error": "Lease expired (worker w).", "kind": "lease expired"}])
    _migrate("0005_partial_unique_keys")
    try:
        state = MigrationExecutor(connection).loader.project_state(
            ("django_leasejobs", "0005_partial_unique_keys")
        )
        old_job = state.apps.get_model("django_leasejobs", "Job")
        old_letter = state.apps.get_model("django_leasejobs", "DeadLetter")
        for errors in histories:
            job = old_job.objects.create(name="testapp.jobs.add", status="dead")
            old_letter.objects.create(
                job=job, name=job.name, queue="default", reason="attempts exhausted", errors=errors
            )
    finally:
        _migrate(LATEST)
    found = list(DeadLetter.objects.order_by("pk").values_list("fingerprint", flat=True))
    assert found == [fingerprints.of_errors(errors).digest for errors in histories]
    assert found[0] == found[1] == found[2] != found[3]
    assert fingerprints.of_errors(histories[0]).label == "ValueError in shop.jobs.charge"
