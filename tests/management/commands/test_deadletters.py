"""manage.py deadletters: groups, replay and discard a group, backfill; bad input refused."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job
from django_leasejobs.protocol import Failure

from ...conftest import shifted

pytestmark = pytest.mark.django_db

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/app/shop/jobs.py", line 7, in charge\n'
    "    raise {cls}(order)\n"
    "{cls}: order\n"
)


def buried(cls: str = "ValueError", name: str = "testapp.jobs.add") -> DeadLetter:
    job = jobs.add.enqueue(1, 2, max_attempts=1)
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (claimed,) = protocol.claim("command-worker", batch=1)
    protocol.fail(claimed.pk, claimed.attempt, Failure(f"{cls}: order", TRACEBACK.format(cls=cls)))
    if name != job.name:
        Job.objects.filter(pk=job.pk).update(name=name)
        DeadLetter.objects.filter(job_id=job.pk).update(name=name)
    return DeadLetter.objects.get(job_id=job.pk)


def run(*args: Any, **options: Any) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("deadletters", *args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def test_groups_as_a_table_and_as_json() -> None:
    first, _ = buried(), buried()
    other = buried("KeyError")
    table, _ = run("groups")
    assert first.fingerprint in table
    assert "ValueError in shop.jobs.charge" in table
    assert "jobs: testapp.jobs.add (2)" in table
    rows = {row["fingerprint"]: row for row in json.loads(run("groups", "--json")[0])}
    assert set(rows) == {first.fingerprint, other.fingerprint}
    assert rows[first.fingerprint]["dead_letters"] == 2
    assert rows[first.fingerprint]["not_replayed"] == 2
    assert rows[first.fingerprint]["jobs"] == {"testapp.jobs.add": 2}
    assert rows[other.fingerprint]["error"] == "KeyError in shop.jobs.charge"


def test_no_dead_letters() -> None:
    assert run("groups")[0].strip() == "No dead letters."
    assert json.loads(run("groups", "--json")[0]) == []


def test_replay_reports_replayed_and_refused_letters() -> None:
    ok = buried()
    gone = buried(name="testapp.jobs.removed_since")
    assert "Would replay 2 of the 2" in run("replay", "--group", ok.fingerprint, "--dry-run")[0]
    assert DeadLetter.objects.filter(replayed_job__isnull=False).count() == 0
    out, err = run("replay", "--group", ok.fingerprint)
    ok.refresh_from_db()
    assert f"Replayed 1 dead letters of group {ok.fingerprint}; refused 1." in out
    assert f"dead letter #{ok.pk} -> job #{ok.replayed_job_id}" in out
    assert f"refused dead letter #{gone.pk}:" in err
    assert "testapp.jobs.removed_since" in err


def test_discard_asks_for_yes_then_deletes() -> None:
    letter = buried()
    with pytest.raises(CommandError, match=r"Would delete the 1 dead letters .* Add --yes"):
        run("discard", "--group", letter.fingerprint)
    assert "Would delete the 1" in run("discard", "--group", letter.fingerprint, "--dry-run")[0]
    assert DeadLetter.objects.exists()
    out, _ = run("discard", "--group", letter.fingerprint, "--yes")
    assert f"Discarded 1 dead letters of group {letter.fingerprint}; kept 0." in out
    assert not DeadLetter.objects.exists()
    assert not Job.objects.exists()


def test_fingerprint_fills_what_is_missing() -> None:
    letters = [buried(), buried("KeyError"), buried()]
    expected = dict(DeadLetter.objects.values_list("pk", "fingerprint"))
    DeadLetter.objects.filter(pk__in=[letters[0].pk, letters[1].pk]).update(fingerprint="")
    out, _ = run("fingerprint", "--batch", "1")
    assert out.strip() == "Fingerprinted 2 dead letters in 2 batch(es)."
    assert dict(DeadLetter.objects.values_list("pk", "fingerprint")) == expected
    assert run("fingerprint", "--all")[0].strip() == "Fingerprinted 0 dead letters in 1 batch(es)."


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay"], "Name the group: --group"),
        (["replay", "--group", "XYZ"], "16 hex digits"),
        (["discard", "--group", "0123456789ABCDEF"], "16 hex digits"),
        (["replay", "--group", "0123456789abcdef"], "No dead letter has the fingerprint"),
    ],
)
def test_bad_groups_are_refused(args, message) -> None:
    buried()
    with pytest.raises(CommandError, match=message):
        run(*args)


@pytest.mark.parametrize("batch", ["0", "10001", "x"])
def test_a_bad_batch_is_refused_by_argparse(batch) -> None:
    with pytest.raises(CommandError, match="--batch"):
        run("fingerprint", "--batch", batch)


@pytest.mark.parametrize("batch", [0, True, "5"])
def test_a_bad_batch_from_call_command_is_refused(batch) -> None:
    with pytest.raises(CommandError, match="--batch must be between 1 and 10000"):
        run("fingerprint", batch=batch)


def test_an_action_is_required() -> None:
    with pytest.raises(CommandError, match="ACTION"):
        run()
    with pytest.raises(CommandError, match="invalid choice"):
        run("explode")
