"""The grouped dead-letter page, and replaying or discarding a group from the admin."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job
from django_leasejobs.protocol import Failure

from ..conftest import shifted
from .conftest import VIEW, staff_client, url

pytestmark = pytest.mark.django_db

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/shop/jobs.py", line {line}, in charge\n'
    "    raise {cls}(order)\n"
    "{cls}: {message}\n"
)


def buried(
    message: str = "order 1", cls: str = "ValueError", line: int = 7, **options
) -> DeadLetter:
    """A dead letter of ``testapp.jobs.add`` whose traceback says ``cls`` was raised in charge."""
    job = jobs.add.enqueue(1, 2, max_attempts=1, **options)
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (claimed,) = protocol.claim("admin-test-worker", batch=1)
    traceback = TRACEBACK.format(line=line, cls=cls, message=message)
    protocol.fail(claimed.pk, claimed.attempt, Failure(f"{cls}: {message}", traceback))
    return DeadLetter.objects.get(job_id=job.pk)


def action_url(letter: DeadLetter, action: str) -> str:
    return url("deadletter_group_action", letter.fingerprint, action)


def messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.fixture
def group_operator(db):
    return staff_client(
        "group-operator", [*VIEW, "replay_deadletter_group", "discard_deadletter_group"]
    )


class TestGroupedPage:
    def test_one_row_per_error_with_counts_names_and_times(self, admin_client) -> None:
        first = buried("order 1", line=7)
        buried("order 2", line=91)  # the same bug after a deploy moved it
        renamed = buried("order 3")
        Job.objects.filter(pk=renamed.job_id).update(name="testapp.jobs.noop", args=[])
        DeadLetter.objects.filter(pk=renamed.pk).update(name="testapp.jobs.noop", args=[])
        other = buried("no key", cls="KeyError")
        DeadLetter.objects.filter(pk=first.pk).update(created_at=shifted(-86400))
        DeadLetter.objects.filter(pk=other.pk).update(created_at=shifted(-3600))
        protocol.replay(renamed.pk)  # noop() takes no arguments
        response = admin_client.get(url("deadletter_groups"))
        assert response.status_code == 200
        page = response.content.decode()
        assert "2 groups, the most recently seen first." in page
        rows = response.context["rows"]
        assert [r["group"].fingerprint for r in rows] == [first.fingerprint, other.fingerprint]
        group = rows[0]["group"]
        assert (group.count, group.not_replayed) == (3, 2)
        assert group.names == (("testapp.jobs.add", 2), ("testapp.jobs.noop", 1))
        assert group.first_seen == DeadLetter.objects.get(pk=first.pk).created_at
        assert rows[0]["label"] == "ValueError in shop.jobs.charge"
        assert rows[0]["message"] == "ValueError: order 3"
        assert "testapp.jobs.add&nbsp;(2)" in page
        assert f"?fingerprint={first.fingerprint}" in page
        assert action_url(first, "replay") in page
        assert action_url(first, "discard") in page

    def test_the_group_link_lists_its_letters(self, admin_client) -> None:
        mine, theirs = buried(), buried(cls="KeyError")
        response = admin_client.get(
            url("deadletter_changelist") + f"?fingerprint={mine.fingerprint}"
        )
        assert [r.pk for r in response.context["cl"].result_list] == [mine.pk]
        assert theirs.pk != mine.pk
        detail = admin_client.get(url("deadletter_change", mine.pk)).content.decode()
        assert mine.fingerprint in detail
        assert url("deadletter_groups") in detail

    def test_a_letter_without_a_fingerprint_is_its_own_row_without_actions(
        self, admin_client
    ) -> None:
        letter = buried()
        DeadLetter.objects.filter(pk=letter.pk).update(fingerprint="")
        response = admin_client.get(url("deadletter_groups"))
        (row,) = response.context["rows"]
        assert (row["replay_url"], row["discard_url"]) == ("", "")
        assert "manage.py deadletters fingerprint" in response.content.decode()

    def test_fingerprints_the_app_never_writes_are_listed_without_actions(
        self, admin_client
    ) -> None:
        """A row edited by hand (or by a bug) must not break the page for everyone."""
        odd = ["a/b&c", "../x", "has space", "ABCDEF0123456789", "0123456789abcdef\n", "é#?"]
        good = buried("order 0")
        for n, fingerprint in enumerate(odd):
            letter = buried(f"order {n + 1}", cls=f"Error{n}")
            DeadLetter.objects.filter(pk=letter.pk).update(fingerprint=fingerprint)
        response = admin_client.get(url("deadletter_groups"))
        assert response.status_code == 200
        rows = {r["group"].fingerprint: r for r in response.context["rows"]}
        assert set(rows) == {good.fingerprint, *odd}
        for fingerprint in odd:
            assert (rows[fingerprint]["replay_url"], rows[fingerprint]["discard_url"]) == ("", "")
        assert rows[good.fingerprint]["replay_url"] == action_url(good, "replay")
        assert rows[good.fingerprint]["discard_url"] == action_url(good, "discard")
        letters = admin_client.get(rows["a/b&c"]["letters_url"])
        assert [r.fingerprint for r in letters.context["cl"].result_list] == ["a/b&c"]
        assert rows["a/b&c"]["letters_url"].endswith("?fingerprint=a%2Fb%26c")
        odd_letter = DeadLetter.objects.get(fingerprint="a/b&c")
        detail = admin_client.get(url("deadletter_change", odd_letter.pk)).content.decode()
        assert f'href="{url("deadletter_changelist")}?fingerprint=a%2Fb%26c"' in detail

    def test_one_aggregate_query_and_one_read_of_the_newest_letters(
        self, admin_client, django_assert_max_num_queries
    ) -> None:
        for n in range(30):
            buried(f"order {n}", cls=("ValueError", "KeyError", "OSError")[n % 3])
        with django_assert_max_num_queries(6) as captured:  # session, user, 2 of ours, messages
            response = admin_client.get(url("deadletter_groups"))
        assert len(response.context["rows"]) == 3
        ours = [q["sql"] for q in captured.captured_queries if "deadletter" in q["sql"]]
        assert len(ours) == 2
        assert "GROUP BY" in ours[0].upper()

    def test_the_changelist_links_to_the_grouped_page(self, admin_client) -> None:
        page = admin_client.get(url("deadletter_changelist")).content.decode()
        assert 'id="leasejobs-groups-link"' in page


class TestPermissions:
    def test_a_viewer_sees_the_groups_but_no_action(self, viewer) -> None:
        letter = buried()
        response = viewer.get(url("deadletter_groups"))
        assert response.status_code == 200
        assert action_url(letter, "replay") not in response.content.decode()
        assert action_url(letter, "discard") not in response.content.decode()

    @pytest.mark.parametrize("action", ["replay", "discard"])
    def test_without_the_group_permission_get_and_post_are_refused(self, action, operator) -> None:
        """``operator`` may replay one letter, but not a group."""
        letter = buried()
        assert operator.get(action_url(letter, action)).status_code == 403
        response = operator.post(action_url(letter, action), {"through_id": letter.pk})
        assert response.status_code == 403
        letter.refresh_from_db()
        assert letter.replayed_job_id is None
        assert DeadLetter.objects.filter(pk=letter.pk).exists()
        assert not LogEntry.objects.exists()

    def test_replay_and_discard_permissions_are_separate(self, db) -> None:
        letter = buried()
        replayer = staff_client("replayer", [*VIEW, "replay_deadletter_group"])
        assert replayer.get(action_url(letter, "replay")).status_code == 200
        assert replayer.get(action_url(letter, "discard")).status_code == 403
        page = replayer.get(url("deadletter_groups")).content.decode()
        assert action_url(letter, "replay") in page
        assert action_url(letter, "discard") not in page

    def test_no_view_permission_no_page(self, db) -> None:
        nobody = staff_client("nobody", [])
        assert nobody.get(url("deadletter_groups")).status_code == 403


class TestConfirmation:
    def test_replay_counts_what_it_will_replay_and_what_it_leaves(self, group_operator) -> None:
        letters = [buried(f"order {n}") for n in range(3)]
        protocol.replay(letters[0].pk)
        response = group_operator.get(action_url(letters[0], "replay"))
        assert (response.context["count"], response.context["skipped"]) == (2, 1)
        page = response.content.decode()
        assert "<strong>2</strong> dead letters will be replayed" in page
        assert "1 already replayed is left alone" in page
        assert f'name="through_id" value="{letters[2].pk}"' in page
        assert LogEntry.objects.count() == 0
        assert Job.objects.filter(status="pending").count() == 1

    def test_discard_counts_every_letter(self, group_operator) -> None:
        letters = [buried(f"order {n}") for n in range(3)]
        protocol.replay(letters[0].pk)
        response = group_operator.get(action_url(letters[0], "discard"))
        assert response.context["count"] == 3
        assert "<strong>3</strong> dead letters will be deleted" in response.content.decode()
        assert DeadLetter.objects.count() == 3

    @pytest.mark.parametrize(
        ("path", "status"),
        [
            ("groups/XYZ/replay/", 404),
            ("groups/0123456789abcdef/replay/", 404),  # no such group
            ("groups/{fp}/explode/", 404),
        ],
    )
    def test_bad_addresses(self, group_operator, path, status) -> None:
        letter = buried()
        address = url("deadletter_changelist") + path.format(fp=letter.fingerprint)
        assert group_operator.get(address).status_code == status

    @pytest.mark.parametrize(
        "fingerprint", ["a/b", "has space", "ABCDEF0123456789", "0123456789abcdef\n", "é"]
    )
    @pytest.mark.parametrize("action", ["replay", "discard"])
    def test_a_fingerprint_the_app_never_writes_is_not_found(
        self, admin_client, fingerprint, action
    ) -> None:
        letter = buried()
        DeadLetter.objects.filter(pk=letter.pk).update(fingerprint=fingerprint)
        address = url("deadletter_groups") + f"{quote(fingerprint, safe='/')}/{action}/"
        assert admin_client.get(address).status_code == 404
        response = admin_client.post(address, {"through_id": str(letter.pk)})
        assert response.status_code == 404
        assert DeadLetter.objects.get(pk=letter.pk).replayed_job_id is None
        assert Job.objects.count() == 1
        assert not LogEntry.objects.exists()

    @pytest.mark.parametrize("through", ["", "abc", "-1", str(2**63), "9" * 4301, "\u00b2"])
    def test_a_post_without_a_letter_id_changes_nothing(self, group_operator, through) -> None:
        letter = buried()
        response = group_operator.post(action_url(letter, "discard"), {"through_id": through})
        assert response.status_code == 400
        assert DeadLetter.objects.filter(pk=letter.pk).exists()


class TestReplayGroup:
    def test_replays_logs_and_names_the_refused_letter(self, group_operator) -> None:
        ok1, ok2 = buried("order 1"), buried("order 2")
        gone = buried("order 3")
        Job.objects.filter(pk=gone.job_id).update(name="testapp.jobs.removed_since")
        DeadLetter.objects.filter(pk=gone.pk).update(name="testapp.jobs.removed_since")
        later = buried("order 4")  # died after the page was shown
        response = group_operator.post(
            action_url(ok1, "replay"), {"through_id": gone.pk}, follow=True
        )
        assert response.redirect_chain[-1][0] == url("deadletter_groups")
        said = messages(response)
        assert f"Replayed 2 dead letters of group {ok1.fingerprint}." in said
        (refusal,) = [m for m in said if m.startswith("Refused 1:")]
        assert f"#{gone.pk}:" in refusal
        assert "testapp.jobs.removed_since" in refusal
        replayed = {pk: job for pk, job in DeadLetter.objects.values_list("pk", "replayed_job_id")}
        assert replayed[gone.pk] is None
        assert replayed[later.pk] is None
        changes = LogEntry.objects.filter(action_flag=CHANGE).order_by("object_id")
        assert [(e.object_id, e.change_message) for e in changes] == [
            (
                str(letter.pk),
                f"Replayed dead letter #{letter.pk} as job #{replayed[letter.pk]} "
                f"(group {ok1.fingerprint}).",
            )
            for letter in (ok1, ok2)
        ]
        additions = LogEntry.objects.filter(action_flag=ADDITION)
        assert sorted(int(e.object_id) for e in additions) == sorted(
            [replayed[ok1.pk], replayed[ok2.pk]]
        )
        assert {e.user.username for e in LogEntry.objects.all()} == {"group-operator"}


class TestDiscardGroup:
    def test_deletes_the_letters_and_their_dead_jobs_and_logs_each(self, group_operator) -> None:
        first, second = buried("order 1"), buried("order 2")
        other = buried("no key", cls="KeyError")
        response = group_operator.post(
            action_url(first, "discard"), {"through_id": second.pk}, follow=True
        )
        assert f"Discarded 2 dead letters of group {first.fingerprint}." in messages(response)
        assert list(DeadLetter.objects.values_list("pk", flat=True)) == [other.pk]
        assert not Job.objects.filter(pk__in=[first.job_id, second.job_id]).exists()
        entries = LogEntry.objects.filter(action_flag=DELETION).order_by("object_id")
        assert [(e.object_id, e.object_repr) for e in entries] == [
            (str(first.pk), str(first)),
            (str(second.pk), str(second)),
        ]
        assert all(first.fingerprint in e.change_message for e in entries)
