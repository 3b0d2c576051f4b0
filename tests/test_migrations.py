"""Migrations 0004, 0005 and 0009 leave the job table with its indexes, and go back and forth;
0006 fingerprints the dead letters already there; 0010 adds the cancel request column; 0017 the
snooze count; 0018 the maintenance lease table and ``Schedule.from_code``; 0020 the job version."""

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
UNIQUE_KEYS = ("leasejobs_live_dedupe_per_name", "leasejobs_one_job_per_occurrence")
UNIQUE_KEYS_BEFORE_0016 = ("leasejobs_live_dedupe", "leasejobs_one_job_per_occurrence")


def _indexed_table() -> str:
    """The table that holds the job table's indexes: on PostgreSQL after 0026, its live
    partition (the partitioned table itself has none)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [f"{TABLE}_live"])
            if cursor.fetchone()[0]:
                return f"{TABLE}_live"
    return TABLE


def _indexes() -> dict[str, Any]:
    table = _indexed_table()
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, table)
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
        assert "WHERE (live_dedupe_key IS NOT NULL)" in _index_sql("leasejobs_live_dedupe_per_name")
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
        for name in UNIQUE_KEYS_BEFORE_0016:
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


def _old_job_model(migration: str = "0016_dedupe_key_per_name") -> Any:
    """``Job`` as code of that migration knows it (before 0017: no ``snoozes`` field)."""
    state = MigrationLoader(connection).project_state(("django_leasejobs", migration))
    return state.apps.get_model("django_leasejobs", "Job")


def test_0017_adds_the_snoozes_column_with_a_default_old_code_relies_on() -> None:
    from django_leasejobs.models import Job

    assert "snoozes" in _columns()
    _migrate("0016_dedupe_key_per_name")
    try:
        assert "snoozes" not in _columns()
        before = _old_job_model().objects.create(name="testapp.jobs.noop", args=[], kwargs={})
    finally:
        _migrate(LATEST)
    # A row written before the column exists, and one written by a process still running the
    # old code (its INSERT does not name the column): both read 0.
    during = _old_job_model().objects.create(name="testapp.jobs.noop", args=[], kwargs={})
    snoozes = dict(Job.objects.filter(pk__in=[before.pk, during.pk]).values_list("pk", "snoozes"))
    assert snoozes == {before.pk: 0, during.pk: 0}
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


def _job(name: str = "testapp.jobs.noop", **fields: Any) -> Any:
    from django_leasejobs.models import Job

    return Job(name=name, args=[], kwargs={}, **fields)


def test_the_unique_keys_still_refuse_a_second_live_job() -> None:
    """Partial or not, the indexes refuse what the constraints refused, and nothing else: a
    key is unique within its job name, and another name may hold the same key."""
    from django.db import IntegrityError, transaction

    from django_leasejobs.models import Job

    Job.objects.bulk_create([_job(), _job(), _job(live_dedupe_key=None)])  # NULLs never conflict
    _job(live_dedupe_key="k").save()
    with pytest.raises(IntegrityError), transaction.atomic():
        _job(live_dedupe_key="k").save()
    _job("testapp.jobs.add", live_dedupe_key="k").save()
    assert Job.objects.count() == 5


def test_0016_scopes_the_live_key_by_name_and_goes_back() -> None:
    """Forward over rows that were valid, back to the key alone, and forward again."""
    from django.db import IntegrityError, transaction

    from django_leasejobs.models import Job

    _migrate("0015_job_name_and_key_indexes")
    try:
        assert "leasejobs_live_dedupe_per_name" not in _indexes()
        assert _indexes()["leasejobs_live_dedupe"]["columns"] == ["live_dedupe_key"]
        with connection.cursor() as cursor:  # the table as 0015 left it: one key, one row
            cursor.execute(
                "INSERT INTO django_leasejobs_job (name, args, kwargs, queue, priority, status, "
                "run_at, attempt, released, max_attempts, lease_owner, dedupe_key, "
                "live_dedupe_key, created_at, last_error, errors, finished_by, task_backend) "
                "VALUES (%s, %s, %s, %s, 0, %s, %s, 0, 0, 5, '', %s, %s, %s, '', %s, '', '')",
                [
                    "testapp.jobs.noop",
                    "[]",
                    "{}",
                    "default",
                    "pending",
                    "2026-01-01 00:00:00",
                    "k",
                    "k",
                    "2026-01-01 00:00:00",
                    "[]",
                ],
            )
    finally:
        _migrate(LATEST)
    indexes = _indexes()
    assert "leasejobs_live_dedupe" not in indexes
    assert indexes["leasejobs_live_dedupe_per_name"]["columns"] == ["name", "live_dedupe_key"]
    assert indexes["leasejobs_live_dedupe_per_name"]["unique"]
    with pytest.raises(IntegrityError), transaction.atomic():
        _job(live_dedupe_key="k").save()
    _job("testapp.jobs.add", live_dedupe_key="k").save()
    assert Job.objects.filter(live_dedupe_key="k").count() == 2
    Job.objects.filter(name="testapp.jobs.add").delete()
    _migrate("0015_job_name_and_key_indexes")
    try:
        assert _indexes()["leasejobs_live_dedupe"]["unique"]
    finally:
        _old_job_model("0015_job_name_and_key_indexes").objects.all().delete()
        _migrate(LATEST)
    _assert_lean()


def test_0006_fingerprints_the_dead_letters_already_there() -> None:
    from django_leasejobs.core import fingerprints
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


def test_0018_adds_the_lease_table_and_the_from_code_column_and_goes_back() -> None:
    def schedule_columns() -> set[str]:
        with connection.cursor() as cursor:
            described = connection.introspection.get_table_description(
                cursor, "django_leasejobs_schedule"
            )
        return {column.name for column in described}

    def tables() -> set[str]:
        return set(connection.introspection.table_names())

    assert "from_code" in schedule_columns()
    assert "django_leasejobs_maintenancelease" in tables()
    _migrate("0017_job_snoozes")
    try:
        assert "from_code" not in schedule_columns()
        assert "django_leasejobs_maintenancelease" not in tables()
    finally:
        _migrate(LATEST)
    assert "from_code" in schedule_columns()
    assert "django_leasejobs_maintenancelease" in tables()
    _assert_lean()


def test_0020_adds_the_version_column_every_row_reads_as_version_1() -> None:
    from django_leasejobs.models import Job

    assert "version" in _columns()
    _migrate("0019_job_deferrals")
    try:
        assert "version" not in _columns()
        assert "deferrals" in _columns()
        before = _old_job_model("0019_job_deferrals").objects.create(
            name="testapp.jobs.noop", args=[], kwargs={}
        )
    finally:
        _migrate(LATEST)
    assert "version" in _columns()
    # A row written before the column exists, and one written by a process still on the code
    # of 0019 (its INSERT does not name the column): both are version 1.
    during = _old_job_model("0019_job_deferrals").objects.create(
        name="testapp.jobs.noop", args=[], kwargs={}
    )
    versions = dict(Job.objects.filter(pk__in=[before.pk, during.pk]).values_list("pk", "version"))
    assert versions == {before.pk: 1, during.pk: 1}
    _assert_lean()


def test_0025_and_0026_partition_the_job_table_and_go_back_keeping_rows_and_ids() -> None:
    from django_leasejobs.models import Job

    live = Job.objects.create(name="testapp.jobs.noop")
    done = Job.objects.create(name="testapp.jobs.noop", status="succeeded", in_history=True)
    partitioned = connection.vendor == "postgresql"
    assert _indexed_table() == (f"{TABLE}_live" if partitioned else TABLE)
    _migrate("0024_job_logs")
    try:
        assert _indexed_table() == TABLE
        assert "in_history" not in _columns()
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, status FROM {TABLE} ORDER BY id")
            assert list(cursor.fetchall()) == [(live.pk, "pending"), (done.pk, "succeeded")]
    finally:
        _migrate(LATEST)
    assert _indexed_table() == (f"{TABLE}_live" if partitioned else TABLE)
    later = Job.objects.create(name="testapp.jobs.noop")
    assert later.pk > done.pk
    assert set(Job.objects.values_list("pk", flat=True)) == {live.pk, done.pk, later.pk}
    _assert_lean()


def test_0026_stopped_after_its_first_step_runs_again() -> None:
    """The partitioning's steps each do nothing when done, and its first step's CHECK is
    made again: a migrate stopped between them (a server restart, say) is run again."""
    from django_leasejobs import dialects

    _migrate("0025_job_in_history")
    try:
        dialects.history_migration(connection, "check")  # the first step, then a stop
    finally:
        _migrate(LATEST)
    partitioned = connection.vendor == "postgresql"
    assert _indexed_table() == (f"{TABLE}_live" if partitioned else TABLE)
    for step in ("check", "partition"):  # both already done: nothing happens
        dialects.history_migration(connection, step)
    assert _indexed_table() == (f"{TABLE}_live" if partitioned else TABLE)
    _assert_lean()


FAIR = {"fair_key", "fair_weight", "fair_at"}


def _fair_place_function() -> bool:
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        signature = "leasejobs_fair_place(text, integer, text, integer, timestamptz)"
        cursor.execute("SELECT to_regprocedure(%s)", [signature])
        return cursor.fetchone()[0] is not None


def test_0027_adds_the_fair_columns_and_indexes_and_goes_back() -> None:
    """Every database: the columns and both indexes, partial where conditions exist, on
    MySQL/MariaDB on virtual columns that hold a value only while a fair job waits;
    PostgreSQL's function. All gone going back, all back after."""
    mysql = connection.vendor == "mysql"
    added = FAIR | ({"fair_waiting_run_at", "fair_waiting_at"} if mysql else set())
    indexes = {"leasejobs_fair_key", "leasejobs_fair_head"}

    def present() -> None:
        assert _columns() >= added
        assert set(_indexes()) >= indexes
        assert _fair_place_function() is (connection.vendor == "postgresql")
        if mysql:
            assert _indexes()["leasejobs_fair_key"]["columns"][-1] == "fair_waiting_at"
        else:
            assert "fair_at IS NOT NULL" in _index_sql("leasejobs_fair_key").replace('"', "")

    present()
    _migrate("0026_job_history_partitions")
    try:
        assert not _columns() & added
        assert not set(_indexes()) & indexes
        assert _fair_place_function() is False
    finally:
        _migrate(LATEST)
    present()
    _assert_lean()
