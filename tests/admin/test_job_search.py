"""The job list's search and name filter: what they find, and that they read indexes.

Django's own search on ``name`` is a substring ``LIKE`` that no index serves, and its filter
by a name few rows carry walks the whole table (716 ms and 4.5 s at ten million rows before
``leasejobs_name``): the search resolves words to the names present (a skip scan) and each
term goes through an index. The plans are read with the parameters each statement was sent
with, on a table whose statistics were taken.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from testapp import jobs

from django_leasejobs.admin import job_search
from django_leasejobs.admin.base import MAX_WORDS
from django_leasejobs.models import Job, Status

from ..plans import explain, scanned_tables, statements
from .conftest import url

pytestmark = pytest.mark.django_db

TABLE = Job._meta.db_table


def found(client: Any, **query: str) -> list[int]:
    response = client.get(url("job_changelist"), query)
    assert response.status_code == 200, query
    return [job.pk for job in response.context["cl"].result_list]


class TestSearch:
    def test_part_of_a_name_in_any_case(self, admin_client) -> None:
        wanted = jobs.record.enqueue(label="x")
        jobs.noop.enqueue()
        for word in ("record", "RECORD", "jobs.rec", "testapp.jobs.record"):
            assert found(admin_client, q=word) == [wanted.pk], word

    def test_names_no_longer_registered_are_found_and_listed(self, admin_client) -> None:
        gone = jobs.noop.enqueue()
        Job.objects.filter(pk=gone.pk).update(name="retired.jobs.Nightly", status=Status.DEAD)
        jobs.noop.enqueue()
        assert found(admin_client, q="nightly") == [gone.pk]
        response = admin_client.get(url("job_changelist"))
        (names,) = [
            [choice["display"] for choice in spec.choices(response.context["cl"])]
            for spec in response.context["cl"].filter_specs
            if spec.title == "job name"
        ]
        assert "retired.jobs.Nightly" in names
        assert "testapp.jobs.add" in names  # registered, no row
        assert found(admin_client, name="retired.jobs.Nightly") == [gone.pk]

    def test_every_word_must_match_and_quotes_make_one_word(self, admin_client) -> None:
        both = jobs.per_customer.enqueue(7)  # name ...per_customer, key customer:7
        jobs.per_customer.enqueue(8)
        noop = jobs.noop.enqueue()
        assert found(admin_client, q="per_customer customer:7") == [both.pk]
        assert found(admin_client, q="noop customer:7") == []
        assert found(admin_client, q='"jobs.noop"') == [noop.pk]
        assert found(admin_client, q='"customer:7" per_') == [both.pk]

    def test_ids_keys_and_names_are_ored_within_a_word(self, admin_client) -> None:
        by_key = jobs.record.enqueue(dedupe_key="noop")  # its key is another job's name part
        by_name = jobs.noop.enqueue()
        assert sorted(found(admin_client, q="noop")) == sorted([by_key.pk, by_name.pk])
        assert found(admin_client, q=str(by_name.pk)) == [by_name.pk]

    @pytest.mark.parametrize(
        "word", ["no-such-word", "9" * 30, "9" * 4301, "\u00b2", "' OR 1=1 --", "%", "_"]
    )
    def test_words_that_match_nothing_find_nothing(self, admin_client, word) -> None:
        # Too large for an id, more digits than int() reads, a digit that is not ASCII, SQL,
        # LIKE's wildcards.
        jobs.noop.enqueue()
        jobs.record.enqueue(label="x")
        assert found(admin_client, q=word) == []

    def test_a_nul_character_is_refused_with_a_message(self, admin_client) -> None:
        made = {jobs.noop.enqueue().pk}
        response = admin_client.get(url("job_changelist"), {"q": "no\x00op"})
        assert response.status_code == 200
        assert "Null characters are not allowed." in response.content.decode()
        assert {job.pk for job in response.context["cl"].result_list} == made

    def test_an_empty_or_blank_search_lists_everything(self, admin_client) -> None:
        made = {jobs.noop.enqueue().pk, jobs.add.enqueue(1, 2).pk}
        for text in ("", "   ", '""'):
            assert set(found(admin_client, q=text)) == made, repr(text)

    def test_past_the_cap_of_names_the_name_is_matched_in_the_database(
        self, admin_client, monkeypatch
    ) -> None:
        wanted = jobs.record.enqueue(label="x")
        jobs.noop.enqueue()
        jobs.add.enqueue(1, 2)
        monkeypatch.setattr(job_search, "MAX_NAMES", 2)
        assert job_search.names_present(connection.alias) is None
        assert found(admin_client, q="RECORD") == [wanted.pk]
        assert found(admin_client, name="testapp.jobs.record") == [wanted.pk]


def test_a_search_takes_its_first_words_and_says_so(admin_client) -> None:
    # 2,000 words: SQLite refused the statement ("Expression tree is too large"), and the
    # cost grew with the square of the words (600 took 5.3 s of database time).
    wanted = jobs.record.enqueue(label="x")
    jobs.noop.enqueue()
    first = ["record", "testapp", "jobs", "RECORD", "jobs.record"]
    first += ["app", "rec", "cord", "testapp.jobs", "ord"]  # all parts of the wanted name
    assert len(set(first)) == MAX_WORDS
    rest = [f"no-such-word-{n}" for n in range(2000 - len(first))]  # each would find nothing
    read: dict[str, list[tuple[str, Any]]] = {}
    for label, words in (("capped", first), ("long", [*first, *rest])):
        with statements() as sent:
            response = admin_client.get(url("job_changelist"), {"q": " ".join(words)})
        assert response.status_code == 200
        assert [job.pk for job in response.context["cl"].result_list] == [wanted.pk]
        read[label] = searches(sent)
        shown = [str(m) for m in response.context["messages"]]
        said = [m for m in shown if "first 10 words only (it had 2,000)" in m]
        assert len(said) == (1 if label == "long" else 0), shown
    # The same statements with the same parameters: the words past the cap never reach SQL.
    assert read["long"] == read["capped"]
    assert read["long"]
    # Three per word (the two keys, the matching names), and the page's own.
    assert max(len(params) for _, params in read["long"]) <= 4 * MAX_WORDS


def test_a_word_given_twice_counts_once(admin_client) -> None:
    wanted = jobs.record.enqueue(label="x")
    response = admin_client.get(url("job_changelist"), {"q": " ".join(["record"] * 50)})
    assert [job.pk for job in response.context["cl"].result_list] == [wanted.pk]
    assert not list(response.context["messages"])


def test_the_help_text_states_the_cap(admin_client) -> None:
    page = admin_client.get(url("job_changelist")).content.decode()
    assert "the first 10 words are used" in page


def test_a_search_page_lists_the_names_once(admin_client) -> None:
    # The name filter's choices and the search both need the names present.
    jobs.noop.enqueue()
    jobs.add.enqueue(1, 2)
    qn = connection.ops.quote_name
    probe = f"SELECT {qn(TABLE)}.{qn('name')} AS {qn('name')} FROM {qn(TABLE)}"
    with statements() as sent:
        assert found(admin_client, q="noop")
    probes = [sql for sql, _ in sent if sql.startswith(probe)]
    assert len(probes) == 3  # the first name, the next, and none after it


def test_names_present_are_distinct_and_ordered() -> None:
    jobs.noop.enqueue_many([((), {})] * 3)
    jobs.add.enqueue(1, 2)
    done = jobs.record.enqueue(label="x")
    Job.objects.filter(pk=done.pk).update(status=Status.SUCCEEDED)
    assert job_search.names_present(connection.alias) == [
        "testapp.jobs.add",
        "testapp.jobs.noop",
        "testapp.jobs.record",
    ]
    assert job_search.names_present(connection.alias, limit=2) is None
    assert job_search.names_present(connection.alias, limit=3) is not None


def searches(sent: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The reads of the job table that filter by name or by a key (the queue filter's choices,
    also on the page, are another test's)."""
    columns = ("name", "dedupe_key", "concurrency_key")
    return [
        (sql, params)
        for sql, params in sent
        if sql.lstrip().upper().startswith("SELECT")
        and TABLE in sql
        and " WHERE " in sql
        and any(column in sql.split(" WHERE ", 1)[1] for column in columns)
    ]


def assert_no_table_scan(sql: str, params: Any) -> None:
    steps = explain(sql, params)
    if connection.vendor == "postgresql":
        explained = steps[0]["QUERY PLAN"]
        (plan,) = json.loads(explained) if isinstance(explained, str) else explained
        assert TABLE not in set(scanned_tables(plan["Plan"])), (sql, plan)
    elif connection.vendor == "sqlite":
        details = [step["detail"] for step in steps]
        assert f"SCAN {TABLE}" not in details, (sql, details)
    else:  # MySQL: "ALL" is a full scan, "index" a full read of an index in its order
        for step in steps:
            if step["table"] and TABLE in step["table"]:
                assert step["type"] not in ("ALL", "index"), (sql, step)


@pytest.fixture
def many_jobs() -> None:
    """2,000 jobs of two names, half finished, and 3 jobs of a third, with statistics
    taken; none named ``record``."""
    jobs.noop.enqueue_many([((), {})] * 1000)
    jobs.add.enqueue_many([((1, 2), {})] * 3)
    jobs.per_customer.enqueue_many([((n % 50,), {}) for n in range(1000)])
    first = Job.objects.order_by("pk").values_list("pk", flat=True)[999]
    Job.objects.filter(pk__lte=first).update(status=Status.SUCCEEDED)
    if connection.vendor != "mysql":  # MySQL's ANALYZE TABLE commits the test's transaction
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {TABLE}")


@pytest.mark.parametrize(
    "query",
    [
        {"name": "testapp.jobs.record"},
        {"q": "record"},
        {"q": "no-such-word"},
        {"q": "customer:3"},
        {"q": "record", "status__exact": "succeeded"},
        {"name": "testapp.jobs.add"},
        pytest.param(
            {"q": "jobs.add"},
            marks=pytest.mark.skipif(
                connection.vendor == "sqlite",
                reason="SQLite estimates a name's rows as its average share of the table",
            ),
        ),
    ],
    ids=[
        "name filter",
        "search by name",
        "search, no match",
        "search by key",
        "and status",
        "rare name filter",
        "search, rare name",
    ],
)
def test_a_rare_name_or_word_is_read_through_indexes(admin_client, many_jobs, query) -> None:
    with statements() as sent:
        response = admin_client.get(url("job_changelist"), query)
    assert response.status_code == 200
    reads = searches(sent)
    assert len(reads) >= 2  # the rows and their count
    for sql, params in reads:
        assert_no_table_scan(sql, params)
